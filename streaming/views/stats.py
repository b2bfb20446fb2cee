"""The stream app's statistics of itself: what each micro-batch measured, and their sum."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, TypeVar

K = TypeVar("K")


@dataclass(frozen=True)
class BatchStats:
    """What the driver measured in one micro-batch."""
    duration_s: float
    finished_ms: int
    input_rows: Mapping[str, int] = field(default_factory=dict)            # cluster -> rows read
    events: Mapping[tuple[str, str, str], int] = field(default_factory=dict)  # (cluster, source, kind)
    malformed: Mapping[tuple[str, str], int] = field(default_factory=dict)    # (cluster, source)
    newest_observed_ms: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (cluster, source)
    state_rows: Mapping[str, int] = field(default_factory=dict)            # cluster -> records held
    history_rows: Mapping[str, int] = field(default_factory=dict)          # cluster -> transitions written
    history_lost: Mapping[str, int] = field(default_factory=dict)          # cluster -> ... not written

    def uncounted(self) -> BatchStats:
        """This batch without what the counters count: a batch replayed after a restart, whose
        counts the counters kept in the checkpoint hold already."""
        return replace(self, input_rows={}, events={}, malformed={}, history_rows={}, history_lost={})


# The counters of SelfStats, as the checkpoint keeps them (a restarted app goes on from them):
# field -> how many parts its key has
COUNTERS = {"events": 3, "malformed": 2, "input_rows": 1, "history_rows": 1, "history_lost": 1}


@dataclass(frozen=True)
class SelfStats:
    """The self-metrics: the counters cumulative over the checkpoint's life (COUNTERS), the
    gauges as of the latest batch."""
    events: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    malformed: Mapping[tuple[str, str], int] = field(default_factory=dict)
    input_rows: Mapping[str, int] = field(default_factory=dict)
    last_event_ms: Mapping[tuple[str, str], int] = field(default_factory=dict)
    event_delay_s: Mapping[str, float] = field(default_factory=dict)   # per cluster, latest batch with events
    batch_duration_s: float | None = None
    state_rows: Mapping[str, int] = field(default_factory=dict)
    history_rows: Mapping[str, int] = field(default_factory=dict)
    history_lost: Mapping[str, int] = field(default_factory=dict)

    def add(self, batch: BatchStats) -> SelfStats:
        newest: dict[str, int] = {}
        for (cluster, _), ms in batch.newest_observed_ms.items():
            newest[cluster] = max(ms, newest.get(cluster, ms))
        return SelfStats(
            events=dict(Counter(self.events) + Counter(batch.events)),
            malformed=dict(Counter(self.malformed) + Counter(batch.malformed)),
            input_rows=dict(Counter(self.input_rows) + Counter(batch.input_rows)),
            last_event_ms=_merge_max(self.last_event_ms, batch.newest_observed_ms),
            # how long the newest change of the batch took to reach the exported view
            event_delay_s={**self.event_delay_s,
                           **{c: max(0, batch.finished_ms - ms) / 1000 for c, ms in newest.items()}},
            batch_duration_s=batch.duration_s,
            state_rows=dict(batch.state_rows),
            history_rows=dict(Counter(self.history_rows) + Counter(batch.history_rows)),
            history_lost=dict(Counter(self.history_lost) + Counter(batch.history_lost)),
        )


    def counters(self) -> dict[str, list[list[Any]]]:
        """The counters as JSON-able rows: each key's parts, then its count."""
        return {name: [[*(k if isinstance(k, tuple) else (k,)), n] for k, n in getattr(self, name).items()]
                for name in COUNTERS}

    def with_counters(self, doc: Any) -> SelfStats:
        """These stats with the counters of ``doc`` (as ``counters()`` wrote them); ValueError if
        it is not that."""
        if not isinstance(doc, dict):
            raise ValueError(f"not a map of counters: {type(doc).__name__}")
        counted: dict[str, dict] = {}
        for name, parts in COUNTERS.items():
            rows = doc.get(name, [])
            if not isinstance(rows, list) or not all(
                    isinstance(r, list) and len(r) == parts + 1 and all(isinstance(x, str) for x in r[:-1])
                    and type(r[-1]) is int and r[-1] >= 0 for r in rows):
                raise ValueError(f"{name}: not rows of {parts} name(s) and a count")
            counted[name] = {(tuple(r[:-1]) if parts > 1 else r[0]): r[-1] for r in rows}
        return replace(self, **counted)

    def of_clusters(self, takes: Callable[[str], bool]) -> SelfStats:
        """These stats with the counters of the clusters ``takes`` only (each counter's key names
        its cluster first): a checkpoint reused with another --cluster-share."""
        return replace(self, **{name: {k: n for k, n in getattr(self, name).items()
                                       if takes(k[0] if isinstance(k, tuple) else k)} for name in COUNTERS})


def _merge_max(a: Mapping[K, int], b: Mapping[K, int]) -> dict[K, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(v, out.get(k, v))
    return out
