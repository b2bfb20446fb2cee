"""Prometheus exposition of the latest view snapshot.

A custom prometheus_client Collector: every scrape builds the metric families afresh
from the snapshot the driver published last, so a topic or group that disappeared from
the views leaves no stale series behind. Names, types, help and labels come from
kmon.metrics.CATALOG only.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kmon.metrics import BY_NAME, CATALOG, GROUP_STATES, MetricSpec
from streaming.views import ClusterView, ClusterViews

log = logging.getLogger("kmon.stream")

# What this exporter serves: the views and the monitor itself (the collectors serve theirs).
EXPORTED: tuple[MetricSpec, ...] = tuple(m for m in CATALOG if m.view != "collector")
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(m.view for m in EXPORTED))   # controller .. self
LOG_FAILURE_EVERY_S = 60.0   # a family failing at every scrape logs once a minute, not at every scrape

Sample = tuple[str, Mapping[str, object], float]   # metric name, labels besides cluster, value
K = TypeVar("K")
ClusterSample = tuple[str, str, Mapping[str, object], float]   # cluster first


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


@dataclass(frozen=True)
class SelfStats:
    """The self-metrics, cumulative since the app started."""
    events: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    malformed: Mapping[tuple[str, str], int] = field(default_factory=dict)
    input_rows: Mapping[str, int] = field(default_factory=dict)
    last_event_ms: Mapping[tuple[str, str], int] = field(default_factory=dict)
    event_delay_s: Mapping[str, float] = field(default_factory=dict)   # per cluster, latest batch with events
    batch_duration_s: float | None = None
    state_rows: Mapping[str, int] = field(default_factory=dict)

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
        )


def _merge_max(a: Mapping[K, int], b: Mapping[K, int]) -> dict[K, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(v, out.get(k, v))
    return out


@dataclass(frozen=True)
class Snapshot:
    """What scrapes read. The views are built by the first scrape that asks for them, once
    per snapshot: a micro-batch costs only what changed in it, and a 100k-partition cluster
    is folded into views at the scrape interval instead of at every trigger."""
    build: Callable[[], ClusterViews]
    stats: SelfStats

    @cached_property   # computed once even under concurrent scrapes (3.11's cached_property locks)
    def views(self) -> ClusterViews:
        return self.build()

    @classmethod
    def of(cls, views: ClusterViews, stats: SelfStats) -> Snapshot:
        return cls(lambda: views, stats)


class SnapshotHolder:
    """The latest Snapshot, swapped whole by the driver and read by scrapes."""

    def __init__(self, initial: Snapshot | None = None) -> None:
        self._lock = threading.Lock()
        self._snapshot = initial or Snapshot.of(ClusterViews(0, {}), SelfStats())

    def set(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    def get(self) -> Snapshot:
        with self._lock:
            return self._snapshot


class ViewsCollector(Collector):
    """Each view family is built and rendered on its own: one that raises is left out of the
    scrape, counted in kmon_view_errors_total and logged, and the others are served."""

    def __init__(self, holder: SnapshotHolder, clock: Callable[[], float] = time.monotonic) -> None:
        self._holder = holder
        self._clock = clock
        self._lock = threading.Lock()   # scrapes run concurrently
        self._errors: Counter[tuple[str, str]] = Counter()   # (cluster, family) -> failed scrapes
        self._logged: dict[str, float] = {}                  # family -> when its failure was last logged

    def collect(self) -> Iterator[Metric]:
        snapshot = self._holder.get()
        views = snapshot.views.clusters
        clusters = sorted(set(views) | set(snapshot.stats.state_rows))
        samples: list[ClusterSample] = []
        for cluster, view in views.items():
            for family, render in _VIEW_SAMPLES.items():
                samples += self._isolated(family, [cluster], view.failed.get(family),
                                          functools.partial(_of_cluster, cluster, render, view))
        samples += self._isolated("self", clusters, None, functools.partial(_self_samples, snapshot.stats, views))
        with self._lock:
            samples += [(cluster, "kmon_view_errors_total", {"family": family}, self._errors[(cluster, family)])
                        for cluster in clusters for family in FAMILIES]
        families = {spec.name: _family(spec) for spec in EXPORTED}
        for cluster, name, labels, value in samples:
            values = {"cluster": cluster, **labels}
            families[name].add_metric([values[label] for label in BY_NAME[name].all_labels], value)
        yield from families.values()

    def _isolated(self, family: str, clusters: Sequence[str], failure: Exception | None,
                  render: Callable[[], Iterable[ClusterSample]]) -> list[ClusterSample]:
        """The family's samples, ready to add (labels text, values float, so nothing of it can
        fail later in the exposition), or none when building or rendering it failed."""
        if failure is None:
            try:
                return [(cluster, name, {k: str(v) for k, v in labels.items()}, float(value))
                        for cluster, name, labels, value in render()]
            except Exception as e:   # one family's bug must not fail the scrape
                failure = e
        now = self._clock()
        with self._lock:
            self._errors.update((cluster, family) for cluster in clusters)
            last = self._logged.get(family)
            quiet = last is not None and now - last < LOG_FAILURE_EVERY_S
            if not quiet:
                self._logged[family] = now
        if not quiet:
            log.error("building the %s metrics of cluster(s) %s failed; they are left out of the scrape "
                      "(logged at most every %.0f s)", family, ", ".join(clusters), LOG_FAILURE_EVERY_S,
                      exc_info=failure)
        return []


def _family(spec: MetricSpec) -> GaugeMetricFamily | CounterMetricFamily:
    if spec.type == "counter":
        # client_python adds the _total suffix itself
        return CounterMetricFamily(spec.name.removesuffix("_total"), spec.help, labels=spec.all_labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.all_labels)


def _controller_samples(v: ClusterView) -> Iterator[Sample]:
    if v.controller is not None:
        yield "kmon_controller_id", {}, v.controller.broker_id
        if v.controller.epoch is not None:
            yield "kmon_controller_epoch", {}, v.controller.epoch
        yield "kmon_active_controller_count", {}, v.controller.active
        yield "kmon_controller_changes_total", {}, v.controller.changes


def _broker_samples(v: ClusterView) -> Iterator[Sample]:
    yield "kmon_brokers", {}, len(v.brokers)
    for b, up in v.broker_up.items():
        yield "kmon_broker_up", {"broker": b}, up
    for b, s in v.brokers.items():
        # registrations without a PLAINTEXT listener have no host/port: use the first endpoint
        first = s.endpoints[0] if s.endpoints else None
        host = s.host or (first.host if first else "")
        port = s.port if s.port not in (None, -1) else (first.port if first else "")
        yield "kmon_broker_info", {"broker": b, "host": host, "port": port, "rack": s.rack or ""}, 1


def _isr_samples(v: ClusterView) -> Iterator[Sample]:
    for t, isr in v.topics.items():
        topic = {"topic": t}
        yield "kmon_partitions", topic, isr.partitions
        yield "kmon_under_replicated_partitions", topic, isr.under_replicated
        yield "kmon_under_min_isr_partitions", topic, isr.under_min_isr
        yield "kmon_at_min_isr_partitions", topic, isr.at_min_isr
        yield "kmon_offline_partitions", topic, isr.offline
        yield "kmon_leader_elections_total", topic, isr.leader_elections
        yield "kmon_unclean_leader_elections_total", topic, isr.unclean_leader_elections
    for name, counts in (("kmon_isr_shrinks_total", v.isr_shrinks), ("kmon_isr_expands_total", v.isr_expands)):
        for (t, b), n in counts.items():
            yield name, {"topic": t, "broker": b}, n
    for d in v.partition_detail:
        partition = {"topic": d.topic, "partition": d.partition}
        yield "kmon_partition_isr_size", partition, d.isr_size
        yield "kmon_partition_replicas", partition, d.replicas
        yield "kmon_partition_leader", partition, d.leader


def _balance_samples(v: ClusterView) -> Iterator[Sample]:
    for b, bal in v.balance.items():
        broker = {"broker": b}
        yield "kmon_broker_leader_partitions", broker, bal.leaders
        yield "kmon_broker_preferred_leader_partitions", broker, bal.preferred_leaders
        yield "kmon_broker_leader_imbalance_ratio", broker, bal.imbalance_ratio
        yield "kmon_broker_replica_partitions", broker, bal.replicas
    yield "kmon_preferred_replica_imbalance", {}, v.preferred_replica_imbalance
    yield "kmon_reassigning_partitions", {}, v.reassigning_partitions


def _group_samples(v: ClusterView) -> Iterator[Sample]:
    for g, gv in v.groups.items():
        group = {"group": g}
        # a state this kmon does not know still shows, as the one set to 1
        states = GROUP_STATES if gv.state in GROUP_STATES else (*GROUP_STATES, gv.state)
        for s in states:
            yield "kmon_consumer_group_state", {"group": g, "state": s}, int(s == gv.state)
        yield "kmon_consumer_group_members", group, gv.members
        yield "kmon_consumer_group_generation", group, gv.generation
        yield "kmon_consumer_group_rebalances_total", group, gv.rebalances
        yield "kmon_consumer_group_state_seconds", group, gv.state_seconds
        for t, lag in gv.lag.items():
            yield "kmon_consumer_group_lag", {"group": g, "topic": t}, lag.lag
            if lag.lag_seconds is not None:
                yield "kmon_consumer_group_lag_seconds", {"group": g, "topic": t}, lag.lag_seconds


def _of_cluster(cluster: str, render: Callable[[ClusterView], Iterator[Sample]],
                view: ClusterView) -> Iterator[ClusterSample]:
    for name, labels, value in render(view):
        yield cluster, name, labels, value


# The samples of each view family (MetricSpec.view) but self, from one cluster's view.
_VIEW_SAMPLES: dict[str, Callable[[ClusterView], Iterator[Sample]]] = {
    "controller": _controller_samples,
    "brokers": _broker_samples,
    "isr": _isr_samples,
    "balance": _balance_samples,
    "groups": _group_samples,
}


def _self_samples(s: SelfStats, views: Mapping[str, ClusterView]) -> Iterator[ClusterSample]:
    for (cluster, source, kind), n in s.events.items():
        yield cluster, "kmon_events_total", {"source": source, "kind": kind}, n
    for (cluster, source), n in s.malformed.items():
        yield cluster, "kmon_malformed_total", {"source": source}, n
    for (cluster, source), ms in s.last_event_ms.items():
        yield cluster, "kmon_last_event_timestamp_seconds", {"source": source}, ms / 1000
    for cluster, delay in s.event_delay_s.items():
        yield cluster, "kmon_event_delay_seconds", {}, delay
    for cluster, n in s.input_rows.items():
        yield cluster, "kmon_stream_input_rows_total", {}, n
    for cluster, n in s.state_rows.items():
        yield cluster, "kmon_stream_state_rows", {}, n
    if s.batch_duration_s is not None:
        # one pipeline serves every cluster: each cluster's series shows its batch duration
        for cluster in sorted(set(views) | set(s.state_rows)):
            yield cluster, "kmon_stream_batch_duration_seconds", {}, s.batch_duration_s
