"""The views: every value of the design brief's metric table, computed per cluster from
the merged entity records (see streaming.records). Pure: records in, ClusterViews out.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Literal, Mapping

from kmon.events import (MARKER_KINDS, BrokerState, ControllerState, GroupState, PartitionState,
                         TopicLag, TopicState)
from streaming.records import (CONTROLLER_CHANGES, ISR_EXPANDS, ISR_SHRINKS, LEADER_ELECTIONS,
                               REBALANCES, UNCLEAN_LEADER_ELECTIONS, EntityRecord)
from streaming.transitions import NO_LEADER

Detail = Literal["unhealthy", "all", "none"]
_Live = defaultdict[str, list[EntityRecord]]   # current records per kind; a missing kind is []


@dataclass(frozen=True)
class ControllerView:
    broker_id: int             # -1 if none
    epoch: int | None
    changes: int

    @property
    def active(self) -> int:
        return int(self.broker_id != NO_LEADER)


@dataclass(frozen=True)
class TopicIsr:
    partitions: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0
    offline: int = 0
    leader_elections: int = 0
    unclean_leader_elections: int = 0


@dataclass(frozen=True)
class PartitionDetail:
    topic: str
    partition: int
    isr_size: int
    replicas: int
    leader: int


@dataclass(frozen=True)
class BrokerBalance:
    leaders: int = 0
    preferred_leaders: int = 0
    imbalance_ratio: float = 0.0
    replicas: int = 0


@dataclass(frozen=True)
class GroupView:
    state: str
    members: int
    generation: int
    rebalances: int
    state_seconds: float
    lag: Mapping[str, TopicLag]


@dataclass(frozen=True)
class ClusterView:
    controller: ControllerView | None = None          # None until the collector reported one
    brokers: Mapping[int, BrokerState] = field(default_factory=dict)   # registered brokers
    broker_up: Mapping[int, int] = field(default_factory=dict)  # registered 1, holding replicas but not registered 0
    topics: Mapping[str, TopicIsr] = field(default_factory=dict)
    isr_shrinks: Mapping[tuple[str, int], int] = field(default_factory=dict)   # (topic, broker)
    isr_expands: Mapping[tuple[str, int], int] = field(default_factory=dict)
    partition_detail: tuple[PartitionDetail, ...] = ()
    balance: Mapping[int, BrokerBalance] = field(default_factory=dict)
    preferred_replica_imbalance: int = 0
    reassigning_partitions: int = 0
    groups: Mapping[str, GroupView] = field(default_factory=dict)
    # view family (MetricSpec.view) -> why building it raised: its fields above are left
    # empty, and the exporter serves none of its metrics rather than wrong ones
    failed: Mapping[str, Exception] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterViews:
    now_ms: int
    clusters: Mapping[str, ClusterView]


def build_views(records: Iterable[EntityRecord], now_ms: int, detail: Detail = "unhealthy",
                default_min_isr: int = 1) -> ClusterViews:
    """``default_min_isr``: min.insync.replicas of topics without that config (the
    brokers' default, which ZooKeeper does not hold)."""
    by_cluster: dict[str, list[EntityRecord]] = defaultdict(list)
    for r in records:
        by_cluster[r.cluster].append(r)
    return ClusterViews(now_ms, {c: _cluster_view(_Cluster(rs, now_ms, detail, default_min_isr))
                                 for c, rs in sorted(by_cluster.items())})


def _live(records: list[EntityRecord]) -> _Live:
    """Current entity records per kind: not deleted, and not swept by a completed resync
    (an entity last seen before a snapshot began and absent from it was deleted while
    the collector was blind)."""
    completed = {r.source: (r.snapshot_id, r.state_since_ms) for r in records
                 if r.kind in MARKER_KINDS and r.snapshot_id is not None}
    live: _Live = defaultdict(list)
    for r in records:
        if r.deleted or r.kind in MARKER_KINDS:
            continue
        snapshot_id, begun_ms = completed.get(r.source, (None, None))
        if begun_ms is not None and r.snapshot_id != snapshot_id and r.last_observed_ms < begun_ms:
            continue
        live[r.kind].append(r)
    return live


@dataclass(frozen=True)
class _Partition:
    """One assigned partition with what its health is judged by."""
    topic: str
    partition: int
    replicas: tuple[int, ...]      # assigned, preferred first
    adding: frozenset[int]
    reassigning: bool
    deleting: bool                 # topic queued for deletion
    configured_min_isr: int        # min.insync.replicas
    state: PartitionState | None   # None until its state znode was seen
    counters: Mapping[str, int]

    @property
    def replication_factor(self) -> int:
        # Kafka's rule: during a reassignment, the size of the original replica set
        return len(self.replicas) - len(self.adding)

    @property
    def min_isr(self) -> int:
        return min(self.configured_min_isr, self.replication_factor)

    def offline(self, registered: Mapping[int, BrokerState]) -> bool:
        # Kafka does not count topics being deleted as offline
        return (self.state is not None and not self.deleting
                and (self.state.leader == NO_LEADER or self.state.leader not in registered))

    @property
    def under_replicated(self) -> bool:
        return self.state is not None and len(self.state.isr) < self.replication_factor

    @property
    def under_min_isr(self) -> bool:
        return self.state is not None and len(self.state.isr) < self.min_isr

    @property
    def at_min_isr(self) -> bool:
        return self.state is not None and len(self.state.isr) == self.min_isr

    @property
    def preferred(self) -> int | None:
        return self.replicas[0] if self.replicas else None

    @property
    def imbalanced(self) -> bool:
        """Kafka's preferred-replica imbalance (ControllerContext.hasPreferredLeader): a
        reassignment whose new preferred replica is still joining does not count until
        it is in the ISR; topics being deleted and partitions without a leader state never."""
        if self.state is None or self.deleting or self.preferred is None:
            return False
        if self.preferred in self.adding:
            return self.preferred in self.state.isr
        return self.state.leader != self.preferred


def _partitions(live: _Live, default_min_isr: int) -> list[_Partition]:
    states = {(r.state.topic, r.state.partition): r for r in live["partition"]}
    znode_reassigning = {key for r in live["reassignment"] for key in r.state.partitions}
    deleting = {r.state.topic for r in live["topic_deletion"]}
    out = []
    for r in live["topic"]:
        topic: TopicState = r.state
        min_isr = _min_isr(topic.config, default_min_isr)
        for p, replicas in sorted(topic.replicas.items()):
            adding = frozenset(topic.adding.get(p, ()))
            state_record = states.get((topic.topic, p))
            reassigning = bool(adding or topic.removing.get(p)) or f"{topic.topic}:{p}" in znode_reassigning
            out.append(_Partition(
                topic=topic.topic, partition=p, replicas=replicas, adding=adding,
                reassigning=reassigning, deleting=topic.topic in deleting,
                configured_min_isr=min_isr,
                state=state_record.state if state_record is not None else None,
                counters=state_record.counters if state_record is not None else {}))
    return out


def _min_isr(config: Mapping[str, str], default: int) -> int:
    try:
        return int(config.get("min.insync.replicas", default))
    except ValueError:  # a garbage config value: Kafka would refuse it, use the default
        return default


@dataclass(frozen=True)
class _Cluster:
    """One cluster's records, and what several view families are built from, computed once
    by the first family that asks (and again by each that asks, if that raised)."""
    records: list[EntityRecord]
    now_ms: int
    detail: Detail
    default_min_isr: int

    @cached_property
    def live(self) -> _Live:
        return _live(self.records)

    @cached_property
    def registered(self) -> dict[int, BrokerState]:
        return {r.state.broker_id: r.state for r in self.live["broker"]}

    @cached_property
    def partitions(self) -> list[_Partition]:
        return _partitions(self.live, self.default_min_isr)


def _cluster_view(c: _Cluster) -> ClusterView:
    fields: dict[str, object] = {}
    failed: dict[str, Exception] = {}
    for family, build in _FAMILIES.items():
        try:
            fields.update(build(c))
        except Exception as e:   # a bug meeting odd data costs its family, not every metric of every cluster
            failed[family] = e
    return ClusterView(**fields, failed=failed)  # type: ignore[arg-type]


def _brokers(c: _Cluster) -> dict[str, object]:
    holding = {b for p in c.partitions for b in p.replicas}
    return {"brokers": c.registered,
            "broker_up": {b: int(b in c.registered) for b in sorted(holding | set(c.registered))}}


def _isr(c: _Cluster) -> dict[str, object]:
    shrinks, expands = _isr_changes(c.partitions)
    return {"topics": _topics(c.partitions, c.registered), "isr_shrinks": shrinks, "isr_expands": expands,
            "partition_detail": tuple(_detail(p) for p in c.partitions if _wants_detail(p, c.registered, c.detail))}


def _leader_balance(c: _Cluster) -> dict[str, object]:
    return {"balance": _balance(c.partitions, c.registered),
            "preferred_replica_imbalance": sum(p.imbalanced for p in c.partitions),
            "reassigning_partitions": sum(p.reassigning for p in c.partitions)}


# Each view family (MetricSpec.view) and the ClusterView fields it builds.
_FAMILIES: dict[str, Callable[[_Cluster], dict[str, object]]] = {
    "controller": lambda c: {"controller": _controller(c.live["controller"])},
    "brokers": _brokers,
    "isr": _isr,
    "balance": _leader_balance,
    "groups": lambda c: {"groups": {g.state.group: _group(g, c.now_ms) for g in c.live["group"]}},
}


def _controller(records: list[EntityRecord]) -> ControllerView | None:
    if not records:
        return None
    r = records[0]  # one key: "controller"
    state: ControllerState = r.state
    return ControllerView(state.broker_id, state.epoch, r.counters.get(CONTROLLER_CHANGES, 0))


def _topics(partitions: list[_Partition], registered: Mapping[int, BrokerState]) -> dict[str, TopicIsr]:
    by_topic: dict[str, list[_Partition]] = defaultdict(list)
    for p in partitions:
        by_topic[p.topic].append(p)
    return {t: TopicIsr(
        partitions=len(ps),
        under_replicated=sum(p.under_replicated for p in ps),
        under_min_isr=sum(p.under_min_isr for p in ps),
        at_min_isr=sum(p.at_min_isr for p in ps),
        offline=sum(p.offline(registered) for p in ps),
        leader_elections=sum(p.counters.get(LEADER_ELECTIONS, 0) for p in ps),
        unclean_leader_elections=sum(p.counters.get(UNCLEAN_LEADER_ELECTIONS, 0) for p in ps),
    ) for t, ps in by_topic.items()}


def _isr_changes(partitions: list[_Partition]) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(topic, broker) -> shrinks / expands. Every replica's pair starts at 0, so that an
    alert on increase() sees the first shrink."""
    totals = {name: Counter({(p.topic, b): 0 for p in partitions for b in p.replicas})
              for name in (ISR_SHRINKS, ISR_EXPANDS)}
    for p in partitions:
        for key, n in p.counters.items():
            name, _, broker = key.partition(":")
            if name in totals:
                totals[name][(p.topic, int(broker))] += n
    return dict(totals[ISR_SHRINKS]), dict(totals[ISR_EXPANDS])


def _wants_detail(p: _Partition, registered: Mapping[int, BrokerState], detail: Detail) -> bool:
    if p.state is None or detail == "none":
        return False
    return detail == "all" or p.offline(registered) or p.under_replicated or p.under_min_isr


def _detail(p: _Partition) -> PartitionDetail:
    assert p.state is not None
    return PartitionDetail(p.topic, p.partition, len(p.state.isr), len(p.replicas), p.state.leader)


def _balance(partitions: list[_Partition], registered: Mapping[int, BrokerState]) -> dict[int, BrokerBalance]:
    leaders: Counter[int] = Counter()
    preferred: Counter[int] = Counter()
    replicas: Counter[int] = Counter()
    should_lead: Counter[int] = Counter()   # Kafka's auto-rebalance: topics being deleted left out
    led_by_other: Counter[int] = Counter()
    for p in partitions:
        replicas.update(p.replicas)
        if p.state is not None and p.state.leader != NO_LEADER:
            leaders[p.state.leader] += 1
        if p.preferred is None:
            continue
        preferred[p.preferred] += 1
        if not p.deleting:
            should_lead[p.preferred] += 1
            # Kafka counts only partitions with a leader state here
            led_by_other[p.preferred] += p.state is not None and p.state.leader != p.preferred
    brokers = sorted(set(registered) | set(replicas))
    return {b: BrokerBalance(
        leaders=leaders[b], preferred_leaders=preferred[b], replicas=replicas[b],
        imbalance_ratio=led_by_other[b] / should_lead[b] if should_lead[b] else 0.0,
    ) for b in brokers}


def _group(r: EntityRecord, now_ms: int) -> GroupView:
    g: GroupState = r.state
    since = r.state_since_ms if r.state_since_ms is not None else now_ms
    return GroupView(state=g.state, members=len(g.members), generation=g.generation,
                     rebalances=r.counters.get(REBALANCES, 0),
                     state_seconds=max(0, now_ms - since) / 1000, lag=g.lag)
