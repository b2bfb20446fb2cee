"""One cluster's entity records as the view families read them, kept up to date batch by batch.

The driver applies each micro-batch's changed records (see streaming.fold.entity). What the
families derive per topic or per entity is memoised here and recomputed only for what a
batch touched, so a batch costs what changed in it, not the size of the cluster. A broker
failure touches every topic but only the partitions that broker held: a partition is judged
again only when its own inputs changed, and a family's sums over a topic's partitions
(:class:`Tally`) take the difference of the partitions that changed instead of being summed
again.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Literal, Mapping, Protocol, TypeVar

from kmon.events import MARKER_KINDS, BrokerState, PartitionState, TopicState
from streaming.fold.entity import EntityRecord
from streaming.fold.transitions import NO_LEADER

Detail = Literal["unhealthy", "all", "none"]
_NONE: frozenset[int] = frozenset()
T = TypeVar("T")


@dataclass(frozen=True)
class ViewOptions:
    detail: Detail = "unhealthy"   # which partitions get per-partition series
    # min.insync.replicas of topics without that config (the brokers' default, which
    # ZooKeeper does not hold)
    default_min_isr: int = 1


@dataclass(slots=True)   # not frozen: a refresh builds one per partition, and a frozen __init__ costs more
class PartitionView:
    """One assigned partition and its health, judged once when built (again when its state, whether
    its leader serves, a reassignment naming it or its topic's record changes). No family
    writes to it: each reads the same memoised list."""
    topic: str
    partition: int
    replicas: tuple[int, ...]      # assigned, preferred first
    adding: frozenset[int]
    reassigning: bool
    deleting: bool                 # topic queued for deletion
    min_isr: int                   # min.insync.replicas, capped by the replication factor
    state: PartitionState | None   # None until its state znode was seen
    counters: Mapping[str, int]
    broker_counters: Mapping[str, Mapping[int, int]]   # ISR shrinks and expands per broker
    preferred: int | None
    under_replicated: bool
    under_min_isr: bool
    at_min_isr: bool
    offline: bool
    imbalanced: bool

    @property
    def pending(self) -> int:
        """Replicas a reassignment adds that have not joined the ISR yet (caught up)."""
        return len(self.adding.difference(self.state.isr)) if self.state is not None else len(self.adding)


def judge(topic: str, partition: int, replicas: tuple[int, ...], adding: frozenset[int], reassigning: bool,
          deleting: bool, configured_min_isr: int, record: EntityRecord | None,
          serving: Collection[int]) -> PartitionView:
    """Pure: a partition's health by Kafka's rules (``serving``: the brokers that are registered
    and, under KRaft, not fenced)."""
    # during a reassignment, the replication factor is the size of the original replica set
    replication_factor = len(replicas) - len(adding)
    min_isr = min(configured_min_isr, replication_factor)
    preferred = replicas[0] if replicas else None
    if record is None or record.state is None:   # its state znode not seen yet
        return PartitionView(topic, partition, replicas, adding, reassigning, deleting, min_isr, None, {}, {}, preferred,
                         under_replicated=False, under_min_isr=False, at_min_isr=False, offline=False,
                         imbalanced=False)
    state: PartitionState = record.state
    isr = len(state.isr)
    return PartitionView(
        topic, partition, replicas, adding, reassigning, deleting, min_isr, state, record.counters,
        record.broker_counters, preferred, under_replicated=isr < replication_factor, under_min_isr=isr < min_isr, at_min_isr=isr == min_isr,
        # Kafka does not count topics being deleted as offline
        offline=not deleting and (state.leader == NO_LEADER or state.leader not in serving),
        imbalanced=_imbalanced(state, deleting, preferred, adding))


class Tally(Protocol):
    """A family's sums over one topic's partitions, kept by difference: ``add(p, 1)`` for each
    partition, then ``move(old, new)`` when one is judged again, which must leave the sums
    ``add(old, -1)`` and ``add(new, 1)`` would (it may skip what a partition's assignment
    decides when that did not change: a broker failure changes states, not assignments). A sum
    that comes back to 0 must read as one never added (the same tally is built from scratch too)."""
    def add(self, p: PartitionView, sign: int) -> None: ...

    def move(self, old: PartitionView, new: PartitionView) -> None: ...


class SplitTally:
    """A :class:`Tally` in two halves, the one a family fills in: ``_placement`` sums what a
    partition's assignment decides (its replicas, its topic's deletion), ``_judgement`` the
    rest. ``move`` leaves the first half as it is unless the placement differs."""

    def _placement(self, p: PartitionView, sign: int) -> None:
        pass

    def _judgement(self, p: PartitionView, sign: int) -> None:
        pass

    def add(self, p: PartitionView, sign: int) -> None:
        self._placement(p, sign)
        self._judgement(p, sign)

    def move(self, old: PartitionView, new: PartitionView) -> None:
        if old.replicas != new.replicas or old.deleting != new.deleting:
            self._placement(old, -1)
            self._placement(new, 1)
        self._judgement(old, -1)
        self._judgement(new, 1)


Tallied = TypeVar("Tallied", bound=Tally)


def _imbalanced(state: PartitionState, deleting: bool, preferred: int | None, adding: frozenset[int]) -> bool:
    """Kafka's preferred-replica imbalance (ControllerContext.hasPreferredLeader): a reassignment
    whose new preferred replica is still joining does not count until it is in the ISR; topics
    being deleted and partitions without a leader state never."""
    if deleting or preferred is None:
        return False
    if preferred in adding:
        return preferred in state.isr
    return state.leader != preferred


class ClusterModel:
    """The live records of one cluster: not deleted, and not swept by a completed resync (an
    entity last seen before a snapshot began and absent from it was deleted while the
    collector was blind). Used by one thread, the driver's."""

    def __init__(self, name: str, options: ViewOptions):
        self.name = name
        self.options = options
        self.records: dict[str, EntityRecord] = {}   # entity -> record, tombstones too
        self.registered: dict[int, BrokerState] = {}
        # registered and serving: not fenced (KRaft keeps a dead or stopped broker's registration, fenced)
        self.serving: frozenset[int] = frozenset()
        self._live: defaultdict[str, dict[str, EntityRecord]] = defaultdict(dict)   # kind -> entity -> record
        # indexes by what the states say (an entity id is not checked against its state)
        self._topics: dict[str, EntityRecord] = {}                                   # topic -> record
        self._states: defaultdict[str, dict[int, EntityRecord]] = defaultdict(dict)  # topic -> partition -> record
        # leader -> the partition entities it leads: a broker coming or going names its partitions (the
        # records' own keys: no object of its own per partition)
        self._led: defaultdict[int, set[str]] = defaultdict(set)
        self._completed: dict[str, tuple[str | None, int | None]] = {}  # source -> its last completed snapshot
        self._per_topic: dict[Callable[..., Any], dict[str, Any]] = {}
        self._per_entity: dict[Callable[..., Any], dict[str, Any]] = {}
        self._judged: dict[str, dict[int, PartitionView]] = {}   # topic -> partition -> its health, in order
        self._stale: dict[str, set[int] | None] = {}          # topic -> partitions to judge again (None: all)
        self._tallies: dict[Callable[[], Tally], dict[str, Tally]] = {}   # kind of tally -> topic -> tally

    def apply(self, changed: Mapping[str, EntityRecord | None]) -> None:
        """Take a batch's changed records (entity -> record; None: gone) and forget what was
        derived from them."""
        resweep = False
        olds = {entity: self.records.get(entity) for entity in changed}
        for entity, record in changed.items():
            if record is None:
                self.records.pop(entity, None)
            else:
                self.records[entity] = record
            for r in (olds[entity], record):
                if r is not None:
                    resweep |= r.kind in MARKER_KINDS
                    self._mark(r)
        if resweep:   # a completed snapshot may sweep any entity of its source
            self._completed = {r.source: (r.snapshot_id, r.state_since_ms) for r in self.records.values()
                               if r.kind in MARKER_KINDS and r.snapshot_id is not None}
            self._live.clear()
            self._topics.clear()
            self._states.clear()
            self._led.clear()
            for entity, record in self.records.items():
                self._place(entity, None, record)
            self._per_topic.clear()
            self._per_entity.clear()
            self._judged.clear()
            self._stale.clear()
            self._tallies.clear()
        else:
            for entity, record in changed.items():
                self._place(entity, olds[entity], record)
            for memo in self._per_entity.values():
                for entity in changed:
                    memo.pop(entity, None)
        self.registered = {r.state.broker_id: r.state for r in self.live("broker")}
        before, self.serving = self.serving, frozenset(b for b, s in self.registered.items() if not s.fenced)
        for broker in before ^ self.serving:   # a partition is offline when its leader does not serve
            for entity in self._led.get(broker, ()):
                state = self._live["partition"][entity].state
                self._mark_partition(state.topic, state.partition)
        for memo in self._per_topic.values():
            for topic in self._stale:
                memo.pop(topic, None)
        for topic in [t for t in self._stale if t not in self._topics]:   # no assignment, no partitions
            del self._stale[topic]
            self._forget(topic)

    def _mark(self, record: EntityRecord) -> None:
        """Note what a record's change makes stale (a tombstone feeds nothing: the record before
        it, which had a state, names it)."""
        state = record.state
        if state is None:
            return
        if record.kind == "partition":
            self._mark_partition(state.topic, state.partition)
        elif record.kind in ("topic", "topic_deletion"):
            self._stale[state.topic] = None
        elif record.kind == "reassignment":
            for key in state.partitions:
                topic, _, p = key.rpartition(":")
                if p.isdigit():
                    self._mark_partition(topic, int(p))

    def _mark_partition(self, topic: str, partition: int) -> None:
        if topic not in self._stale:
            self._stale[topic] = {partition}
        elif (partitions := self._stale[topic]) is not None:
            partitions.add(partition)

    def _forget(self, topic: str) -> None:
        self._judged.pop(topic, None)
        for tallies in self._tallies.values():
            tallies.pop(topic, None)

    def _place(self, entity: str, old: EntityRecord | None, new: EntityRecord | None) -> None:
        if old is not None and self._live[old.kind].pop(entity, None) is not None:
            if old.kind == "topic" and self._topics.get(old.state.topic) is old:
                del self._topics[old.state.topic]
            if old.kind == "partition":
                self._led[old.state.leader].discard(entity)
                if self._states[old.state.topic].get(old.state.partition) is old:
                    del self._states[old.state.topic][old.state.partition]
        if new is None or new.deleted or new.kind in MARKER_KINDS:
            return
        snapshot_id, begun_ms = self._completed.get(new.source, (None, None))
        if begun_ms is not None and new.snapshot_id != snapshot_id and new.last_observed_ms < begun_ms:
            return
        self._live[new.kind][entity] = new
        if new.kind == "topic":
            self._topics[new.state.topic] = new
        if new.kind == "partition":
            self._states[new.state.topic][new.state.partition] = new
            self._led[new.state.leader].add(entity)

    def live(self, kind: str) -> Iterable[EntityRecord]:
        return self._live[kind].values()

    def per_topic(self, derive: Callable[[ClusterModel, str], T]) -> dict[str, T]:
        """``derive(self, topic)`` of every topic, memoised until a record of the topic (its
        assignment, partition states, deletion, reassignment) or whether one of its leaders
        serves changes: ``derive`` must read nothing else."""
        memo = self._per_topic.setdefault(derive, {})
        return {topic: _memoised(memo, topic, derive, self, topic) for topic in self.topics()}

    def topics(self) -> list[str]:
        """Every topic with an assignment, in order."""
        return sorted(self._topics)

    def per_entity(self, kind: str, derive: Callable[[ClusterModel, EntityRecord], T]) -> dict[str, T]:
        """``derive(self, record)`` of every live record of ``kind``, memoised until that
        record changes: ``derive`` must read nothing else."""
        memo = self._per_entity.setdefault(derive, {})
        return {entity: _memoised(memo, entity, derive, self, record)
                for entity, record in sorted(self._live[kind].items())}

    def partitions(self, topic: str) -> list[PartitionView]:
        """The topic's assigned partitions, in order, each judged again only when it is stale."""
        return list(self._judge_stale(topic).values())

    def tally(self, make: Callable[[], Tallied], topic: str) -> Tallied:
        """The ``make()`` tally of the topic's partitions, kept by difference as they are judged
        again (``make`` must be the same object at each call: it names the kind of tally)."""
        judged = self._judge_stale(topic)
        tallies = self._tallies.setdefault(make, {})
        tally = tallies.get(topic)
        if tally is None:
            tally = tallies[topic] = make()
            for p in judged.values():
                tally.add(p, 1)
        return tally  # type: ignore[return-value]

    def _judge_stale(self, topic: str) -> dict[int, PartitionView]:
        judged = self._judged.get(topic)
        if judged is not None and topic not in self._stale:
            return judged
        stale = self._stale.pop(topic, None)
        record = self._topics.get(topic)
        if record is None:
            return {}
        state: TopicState = record.state
        min_isr = _min_isr(state.config, self.options.default_min_isr)
        reassigning = {key for r in self.live("reassignment") for key in r.state.partitions}
        deleting = any(r.state.topic == topic for r in self.live("topic_deletion"))
        states = self._states.get(topic, {})
        serving = self.serving

        def judged_now(p: int) -> PartitionView:
            adding = frozenset(state.adding[p]) if p in state.adding else _NONE
            return judge(topic, p, state.replicas[p], adding,
                         bool(adding or state.removing.get(p)) or (bool(reassigning) and f"{topic}:{p}" in reassigning),
                         deleting, min_isr, states.get(p), serving)

        # Judged again whole when its assignment, config or deletion changed, or when most of
        # it changed (a difference per partition costs two sums where one would do)
        if judged is None or stale is None or 2 * len(stale) > len(judged):
            self._forget(topic)
            judged = self._judged[topic] = {p: judged_now(p) for p in sorted(state.replicas)}
            return judged
        tallies = [t for by_topic in self._tallies.values() if (t := by_topic.get(topic)) is not None]
        for p in stale:
            old = judged.get(p)
            if old is None:   # the state of a partition the assignment does not have
                continue
            judged[p] = new = judged_now(p)
            for tally in tallies:
                tally.move(old, new)
        return judged


def _memoised(memo: dict[str, Any], key: str, derive: Callable[..., T], *args: Any) -> T:
    if key not in memo:
        memo[key] = derive(*args)
    return memo[key]


def _min_isr(config: Mapping[str, str], default: int) -> int:
    try:
        return int(config.get("min.insync.replicas", default))
    except ValueError:  # a garbage config value: Kafka would refuse it, use the default
        return default
