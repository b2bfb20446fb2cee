"""The driver side of each micro-batch: persist its changed records and append its
transitions to the history; then bring the views up to date and publish them for scrapes
(streaming.published).

No Spark here: it takes the batch's output columns as Python values, so it is tested without a
cluster.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

from streaming.fold.entity import UNKNOWN_SOURCE, RecordJson, cluster_of, record_from_json
from streaming.history_log import HistoryLog
from streaming.published import LatestPublished, Published
from streaming.record_log import RecordLog
from streaming.views import ViewOptions, Views
from streaming.views.stats import BatchStats, SelfStats

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("kmon.stream")
T = TypeVar("T")


@dataclass(frozen=True)
class Persisted:
    """A micro-batch in the record log and the history, not yet in the views."""
    batch_id: int
    stored: Mapping[str, RecordJson | None]   # message key -> changed record (None: gone)
    stats: BatchStats                         # but for its duration, finish and state rows: known once presented
    started: float                            # when its sink began (the clock's seconds)


class ViewDriver:
    """A micro-batch's driver side in two halves: persist() the records, then present() them
    in the views and publish them; on_batch() does both in turn, the app runs the second
    on its own thread (streaming.view_thread)."""

    def __init__(self, record_log: RecordLog, history: HistoryLog, holder: LatestPublished, options: ViewOptions,
                 events_topic: str, clock: Callable[[], float] = time.time,
                 takes: Callable[[str], bool] = lambda cluster: True):
        self._log = record_log
        self._history = history
        self._holder = holder
        self._views = Views(options)
        self._topic = events_topic   # names where a malformed event is, in the log
        self._clock = clock
        # a checkpoint reused with another --cluster-share: the clusters it no longer takes leave
        # the views and the record log; their events no longer reach this app
        loaded = record_log.load(keeps=lambda key: takes(cluster_of(key)))
        self._views.apply(loaded.records)
        # the counters go on from the checkpoint's (a restart must not make them go lower: rate()
        # would read a reset); a batch at or before the one they count is a replay, not counted again
        self._counted_through, counted = self._load_counters()
        counted = counted.of_clusters(takes)
        dropped = Counter({(cluster, UNKNOWN_SOURCE): n for cluster, n in loaded.dropped.items() if takes(cluster)})
        self._counted = replace(counted, malformed=dict(Counter(counted.malformed) + dropped))
        self._stats = replace(self._counted, state_rows=self._state_rows())
        if loaded.dropped:   # now out of the record log: counted once, the count kept at once
            self._log.save_counters(self._counted_through, self._counted.counters())
        if loaded.records:
            log.info("restored %d entity records from %s", len(loaded.records), record_log.dir)
        self._publish()

    def on_batch(self, batch_id: int, stored: Mapping[str, RecordJson | None], summaries: Iterable[Mapping[str, Any]],
                 started: float, history: Iterable[pa.Table] = ()) -> None:
        """Persist a batch, then bring the views up to date with it (both halves in turn)."""
        self.present([self.persist(batch_id, stored, summaries, started, history)])

    def persist(self, batch_id: int, stored: Mapping[str, RecordJson | None], summaries: Iterable[Mapping[str, Any]],
                started: float, history: Iterable[pa.Table] = ()) -> Persisted:
        """The half a micro-batch must finish before Spark commits it: its changed records into
        the record log and its transitions into the history; returns what the views have yet to
        take. ``stored``: each changed record by message key, as the executor serialised it
        (None: gone); ``summaries``: entity_step.summarise() of each bucket; ``history``: the
        batch's transitions (streaming.history_log.table)."""
        events: Counter[tuple[str, str, str]] = Counter()
        malformed: Counter[tuple[str, str]] = Counter()
        input_rows: Counter[str] = Counter()
        newest: dict[tuple[str, str], int] = {}
        for summary in summaries:
            input_rows.update(summary["input_rows"])
            for cluster, sources in summary["events"].items():
                for source, kinds in sources.items():
                    for kind, n in kinds.items():
                        events[(cluster, source, kind)] += n
            for cluster, sources in summary["newest_observed_ms"].items():
                for source, ms in sources.items():
                    newest[(cluster, source)] = max(ms, newest.get((cluster, source), ms))
            for cluster, sources in summary["malformed"].items():
                for source, n in sources.items():
                    malformed[(cluster, source)] += n
            for row in summary["problems"]:
                self._log_problem(row)
                if row["dropped_state"] is not None:   # a stored record that no longer decodes
                    malformed[(row["cluster"], UNKNOWN_SOURCE)] += 1
        self._log.append(batch_id, stored)
        written = self._history.append(batch_id, history)
        stats = BatchStats(duration_s=0.0, finished_ms=0, input_rows=dict(input_rows), events=dict(events),
                           malformed=dict(malformed), newest_observed_ms=newest, history_rows=written.rows,
                           history_lost=written.lost)
        if batch_id <= self._counted_through:
            stats = stats.uncounted()
        else:
            self._counted = self._counted.add(stats)
            self._counted_through = batch_id
            self._log.save_counters(batch_id, self._counted.counters())
        return Persisted(batch_id, stored, stats, started)

    def _load_counters(self) -> tuple[int, SelfStats]:
        saved = self._log.load_counters()
        if saved is None:
            return -1, SelfStats()
        batch_id, doc = saved
        try:
            return batch_id, SelfStats().with_counters(doc)
        except ValueError as e:
            log.error("the stream's self counters in %s are not counters (%s): they start again from 0",
                      self._log.dir, e)
            return -1, SelfStats()

    def _log_problem(self, row: Mapping[str, Any]) -> None:
        key = row["key"]
        if row["malformed"]:
            log.warning("skipped %d malformed event(s) under key %r, the first at %s partition %s offset %s: %s",
                        sum(row["malformed"].values()), key, self._topic,
                        row["malformed_partition"], row["malformed_offset"], row["malformed_reason"])
        if row["dropped_state"] is not None:
            log.warning("dropped the stored record of key %r, rebuilt from its events: %s", key, row["dropped_state"])

    def present(self, batches: Sequence[Persisted]) -> None:
        """The views' half, for one or more persisted batches in their order: each changed
        record is parsed once (as last stored), each touched topic rendered once, then the
        exposition is published with every batch's statistics."""
        latest: dict[str, RecordJson | None] = {}
        for batch in batches:
            latest.update(batch.stored)
        # the executors wrote these from the records they folded and checked
        changed = {key: None if record_json is None else record_from_json(record_json, trusted=True)
                   for key, record_json in latest.items()}
        self._views.apply(changed)
        self._views.refresh()   # before the clock stops: the delay measured is to the rendered view
        finished, state_rows = self._clock(), self._state_rows()
        for batch in batches:
            self._stats = self._stats.add(replace(batch.stats, duration_s=finished - batch.started,
                                                  finished_ms=int(finished * 1000), state_rows=state_rows))
        self._publish()
        if changed:
            log.debug("batches %s: %d entities changed", ",".join(str(b.batch_id) for b in batches), len(changed))

    def ask(self, question: Callable[[Views], T]) -> T:
        """``question`` of the views as the latest presented batch left them (on the thread that presents)."""
        return question(self._views)

    def _publish(self) -> None:
        self._holder.set(Published(self._views.exposition(self._stats), self._stats))

    def _state_rows(self) -> dict[str, int]:
        return self._views.record_counts()

