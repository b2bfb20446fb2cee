"""The ZooKeeper collector's model of Kafka's tree: pure, no I/O.

:class:`ZkTree` knows the last valid read of every watched znode and turns reads into events:
it combines znodes into entities (``/controller`` + ``/controller_epoch`` -> controller,
``/brokers/topics/<t>`` + ``/config/topics/<t>`` -> topic), skips unchanged re-reads,
computes zxids and version gaps, says what to read next (a new topic's partitions, a
listing's new children) and what a read's result means (:meth:`ZkTree.on_read`).
collectors/zk/collector.py does the reads.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterable, NamedTuple

from kazoo.protocol.states import ZnodeStat

from collectors.resync import Resync
from collectors.zk.znodes import (
    MalformedZnode,
    ZkPaths,
    parse_broker,
    parse_controller,
    parse_controller_epoch,
    parse_isr_change,
    parse_partition_state,
    parse_preferred_election,
    parse_reassignment,
    parse_topic,
    parse_topic_config,
)
from kmon.events import (
    ControllerState,
    Event,
    SnapshotMarker,
    TopicDeletionState,
    ZnodeMeta,
    entity_key,
    remaining_replicas,
    snapshot_order,
)

SOURCE = "zk"


class EntityId(NamedTuple):
    """An entity of the tree: EntityId("partition", "orders", 3), EntityId("controller") ..."""
    kind: str
    name: str | int | None = None   # a topic, broker id, isr_change sequence or marker's source
    partition: int | None = None    # of a partition entity, whose name is its topic

    @property
    def parts(self) -> tuple[str | int, ...]:
        """What follows the kind in its entity key (kmon.events.entity_key)."""
        return tuple(p for p in (self.name, self.partition) if p is not None)


class Role(enum.Enum):
    """What a znode is to the collector; the value labels kmon_collector_malformed_total{kind}."""
    CONTROLLER = "controller"
    CONTROLLER_EPOCH = "controller_epoch"
    REASSIGNMENT = "reassignment"
    PREFERRED_ELECTION = "preferred_election"
    BROKER_IDS = "broker_ids"
    TOPICS = "topics"
    DELETE_TOPICS = "delete_topics"
    ISR_CHANGES = "isr_changes"
    BROKER = "broker"
    TOPIC = "topic"
    TOPIC_CONFIG = "topic_config"
    PARTITION = "partition"
    TOPIC_DELETION = "topic_deletion"
    ISR_CHANGE = "isr_change"


_LISTINGS = (Role.BROKER_IDS, Role.TOPICS, Role.DELETE_TOPICS, Role.ISR_CHANGES)
_FIXED_DATA = (Role.CONTROLLER, Role.CONTROLLER_EPOCH, Role.REASSIGNMENT, Role.PREFERRED_ELECTION)


class Read(enum.Enum):
    """How to read a znode, decided by what the tree knows."""
    LIST = "list"                  # children + child watch; an exists-watch while it is missing
    WATCH = "watch"                # data + data watch; when missing, its listing reports the deletion
    WATCH_CREATE = "watch_create"  # data + data watch; an exists-watch while it is missing
    ONCE = "once"                  # data, no watch: written once, then only deleted (its listing says when)
    IGNORE = "ignore"              # no longer part of the tree (e.g. a deleted topic's partition)


@dataclass
class Round:
    """One pass of reads: a batch of notifications, or a whole snapshot (``full``)."""
    full: bool
    todo: dict[str, None] = field(default_factory=dict)      # paths to read, in order, once each
    done: set[str] = field(default_factory=set)
    touched: dict[EntityId, None] = field(default_factory=dict)
    # states the reads prove existed between two of them though no read saw them: (entity, state, zxid)
    unseen: list[tuple[EntityId, Any, int]] = field(default_factory=list)
    malformed: list[tuple[Role, MalformedZnode]] = field(default_factory=list)

    def follow(self, path: str) -> None:
        if path not in self.done:
            self.todo[path] = None

    def retry(self, path: str) -> None:
        """Read again: the znode changed between two reads of this round."""
        self.todo[path] = None

    def take(self, limit: int) -> list[str]:
        batch = list(self.todo)[:limit]
        for path in batch:
            del self.todo[path]
        self.done.update(batch)
        return batch


def version_gap(last: tuple[int, int] | None, czxid: int, version: int, live: bool) -> int:
    """Versions of a znode that never made it into an event: ZooKeeper coalesced them.

    ``last`` is the (czxid, version) of the znode's previous event. A znode seen for the
    first time while watching (``live``) was created at version 0; one first seen in a
    snapshot has an unknown history, so nothing is claimed.
    """
    if last is None:
        return version if live else 0
    last_czxid, last_version = last
    if czxid != last_czxid:   # deleted and created again: the new znode started at version 0
        return version
    return max(0, version - last_version - 1)


@dataclass(frozen=True)
class _Node:
    """The last valid read of a znode."""
    czxid: int
    mzxid: int
    version: int
    mtime_ms: int
    value: Any


class ZkTree:
    """What the collector knows of the Kafka tree, and the events that follow from it. No I/O."""

    def __init__(self, paths: ZkPaths, cluster: str) -> None:
        self.paths = paths
        self.cluster = cluster
        self._fixed: dict[str, tuple[Role, EntityId | None]] = {
            paths.controller: (Role.CONTROLLER, EntityId("controller")),
            paths.controller_epoch: (Role.CONTROLLER_EPOCH, EntityId("controller")),
            paths.reassign_partitions: (Role.REASSIGNMENT, EntityId("reassignment")),
            paths.preferred_replica_election: (Role.PREFERRED_ELECTION, EntityId("preferred_election")),
            paths.broker_ids: (Role.BROKER_IDS, None),
            paths.topics: (Role.TOPICS, None),
            paths.delete_topics: (Role.DELETE_TOPICS, None),
            paths.isr_change_notification: (Role.ISR_CHANGES, None),
        }
        self._nodes: dict[str, _Node] = {}
        self._absent: dict[str, int] = {}          # path -> a zxid at which it was known missing
        self._unparsed: set[str] = set()           # malformed, and no valid read to fall back on
        self._children: dict[str, set[str]] = {}   # listing path -> child names
        self._published: dict[EntityId, tuple[int | None, ...]] = {}   # -> mzxids of its parts
        self._emitted: dict[str, tuple[int, int]] = {}   # path -> (czxid, version) of its last event

    # ------------------------------------------------------------------ what to read
    def roots(self) -> list[str]:
        """Everything a snapshot starts from; deletions first, so partitions of a topic being
        deleted get no exists-watches."""
        return sorted(self._fixed, key=lambda p: self._fixed[p][0] is not Role.DELETE_TOPICS)

    def classify(self, path: str) -> tuple[Role, EntityId | None]:
        """Raises MalformedZnode for paths outside the watched tree (or with a bad id in them)."""
        if path in self._fixed:
            return self._fixed[path]
        p = self.paths
        parent, _, name = path.rpartition("/")
        if parent == p.broker_ids:
            return Role.BROKER, EntityId("broker", p.split_broker(path))
        if parent == p.topics:
            return Role.TOPIC, EntityId("topic", name)
        if parent == p.config_topics:
            return Role.TOPIC_CONFIG, EntityId("topic", name)
        if parent == p.delete_topics:
            return Role.TOPIC_DELETION, EntityId("topic_deletion", name)
        if parent == p.isr_change_notification:
            return Role.ISR_CHANGE, EntityId("isr_change", p.split_isr_change(path))
        return Role.PARTITION, EntityId("partition", *p.split_partition_state(path))

    def read_mode(self, path: str) -> Read:
        try:
            role, entity = self.classify(path)
        except MalformedZnode:
            return Read.IGNORE
        if role in _FIXED_DATA:
            return Read.WATCH_CREATE
        if role in _LISTINGS:
            return Read.LIST
        if role in (Role.BROKER, Role.TOPIC, Role.TOPIC_DELETION, Role.ISR_CHANGE):
            parent, _, name = path.rpartition("/")
            if name not in self._children.get(parent, ()):
                return Read.IGNORE
            return Read.WATCH if role in (Role.BROKER, Role.TOPIC) else Read.ONCE
        assert entity is not None
        topic = entity.name
        if topic not in self._children.get(self.paths.topics, ()):
            return Read.IGNORE
        if role is Role.PARTITION and entity.partition not in self._assigned(topic):
            return Read.IGNORE
        # while a topic is being deleted its znodes only disappear: no exists-watches left behind
        return Read.WATCH if self._deleting(topic) else Read.WATCH_CREATE

    def _deleting(self, topic: str) -> bool:
        """Queued for deletion. The marker's listing is read before any ISR write the deletion
        makes: one session sees ZooKeeper's changes in zxid order."""
        return topic in self._children.get(self.paths.delete_topics, ())

    def _assigned(self, topic: str) -> Iterable[int]:
        node = self._nodes.get(self.paths.topic(topic))
        return node.value.replicas if node else ()

    def _remaining(self, topic: str, partition: int) -> tuple[int, ...] | None:
        """The replicas the partition keeps. The controller takes a moving partition's removing
        replicas out of its ISR before it writes the new assignment, so the assignment read before
        that ISR write still names them as removing (one session sees the changes in zxid order)."""
        node = self._nodes.get(self.paths.topic(topic))
        replicas = node.value.replicas.get(partition) if node else None
        return None if replicas is None else remaining_replicas(replicas, node.value.removing.get(partition, ()))

    # ------------------------------------------------------------------ observations
    def on_read(self, path: str, mode: Read, result: tuple[Any, ZnodeStat] | None, rnd: Round) -> bool:
        """What one read of ``path`` with ``mode`` found: (data or children, stat), or None if the znode
        is missing. Returns whether a missing znode must be confirmed gone, with the zxid of its
        deletion (``on_absent``), before it counts as deleted: a listed child that is gone needs no
        such check, the listing's own watch reports it."""
        if result is None:
            return mode not in (Read.WATCH, Read.ONCE)
        value, stat = result
        if mode is Read.LIST:
            self.on_children(path, value, stat.pzxid, rnd)
        else:
            self.on_data(path, value, stat, rnd)
        return False

    def on_data(self, path: str, data: bytes, stat: ZnodeStat, rnd: Round) -> None:
        role, entity = self.classify(path)
        assert entity is not None
        try:
            value = self._parse(role, path, data)
        except MalformedZnode as e:
            rnd.malformed.append((role, e))
            if path not in self._nodes:
                self._unparsed.add(path)
            return   # the previous valid read stands; the watch is armed for the next write
        previous = self._nodes.get(path)
        if role is Role.CONTROLLER and previous is not None and previous.czxid != stat.czxid:
            # made again since its last read, its deletion unseen (a ZooKeeper restart can hide one
            # from the watch): told at the latest zxid the deletion can have, before the new registration
            self._without_controller(stat.czxid - 1, self._nodes.get(self.paths.controller_epoch), rnd)
        gone = self._absent.get(self.paths.controller)
        if role is Role.CONTROLLER_EPOCH and gone is not None and gone < stat.mzxid:
            # Kafka elects in one multi-op (the registration and the epoch bump at one zxid): the
            # registration read missing before this epoch was written may be there now. An absence
            # and the next election's epoch together are no state the cluster was in, and told at
            # the election's zxid two collectors' reads of one election could interleave into more
            # controller changes than it made. So the spell without a controller is told as it was,
            # at the absence's zxid with the epoch of then, and the registration is read again.
            if previous is not None:
                self._without_controller(gone, previous, rnd)
            rnd.retry(self.paths.controller)
        self._unparsed.discard(path)
        self._absent.pop(path, None)
        self._nodes[path] = _Node(stat.czxid, stat.mzxid, stat.version, stat.mtime, value)
        self._touch(entity, rnd)
        if role is Role.TOPIC:
            before = set(previous.value.replicas) if previous else set()
            for partition in value.replicas:
                if rnd.full or partition not in before:
                    rnd.follow(self.paths.partition_state(entity.name, partition))
            for partition in before - set(value.replicas):   # Kafka never shrinks a topic; stay exact anyway
                self._drop(self.paths.partition_state(entity.name, partition), stat.mzxid, rnd)

    @staticmethod
    def _without_controller(zxid: int, epoch: _Node | None, rnd: Round) -> None:
        """A spell without a controller the reads prove but no event told, a change as real as the
        election after it: told at ``zxid``, with ``epoch``'s value if it was written by then."""
        before = epoch.value if epoch is not None and epoch.mzxid <= zxid else None
        rnd.unseen.append((EntityId("controller"), ControllerState(-1, before), zxid))

    def on_absent(self, path: str, zxid: int, rnd: Round) -> None:
        """A znode read with WATCH_CREATE is missing; ``zxid`` is at or after its deletion."""
        self._drop(path, zxid, rnd)
        entity = self.classify(path)[1]
        if entity is not None:
            self._touch(entity, rnd)

    def _touch(self, entity: EntityId, rnd: Round) -> None:
        """Mark an entity changed, and read its other parts in the same round: one change often
        writes several (a new controller bumps /controller_epoch in the same transaction)."""
        rnd.touched[entity] = None
        for part in self._parts(entity):
            rnd.follow(part)

    def on_children(self, path: str, children: list[str], pzxid: int, rnd: Round) -> None:
        """A listing; ``pzxid`` (read with it) is at or after the deletion of any child missing from it."""
        before = self._children.get(path, set())
        now = set(children)
        self._children[path] = now
        for name in sorted(now if rnd.full else now - before):
            child = f"{path}/{name}"
            try:
                role, _ = self.classify(child)
            except MalformedZnode as e:
                rnd.malformed.append((self._fixed[path][0], e))
                continue
            rnd.follow(child)
            if role is Role.TOPIC:
                rnd.follow(self.paths.topic_config(name))
        for name in sorted(before - now):
            with contextlib.suppress(MalformedZnode):   # a badly named child never became an entity
                self._drop(f"{path}/{name}", pzxid, rnd)

    def _drop(self, path: str, zxid: int, rnd: Round) -> None:
        role, entity = self.classify(path)
        if role in _LISTINGS:
            self.on_children(path, [], zxid, rnd)
            return
        assert entity is not None
        if role is Role.TOPIC:   # its partitions and config go with it, partitions first
            for partition in self._assigned(entity.name):
                self._drop(self.paths.partition_state(entity.name, partition), zxid, rnd)
            self._drop(self.paths.topic_config(entity.name), zxid, rnd)
        self._nodes.pop(path, None)
        self._unparsed.discard(path)
        self._absent[path] = zxid
        rnd.touched[entity] = None

    def _parse(self, role: Role, path: str, data: bytes) -> Any:
        if role is Role.TOPIC_DELETION:
            return TopicDeletionState(topic=path.rpartition("/")[2])   # presence is the whole state
        return _PARSERS[role](path, data)

    # ------------------------------------------------------------------ events
    def changes(self, rnd: Round, now_ms: int) -> list[Event]:
        """The states the round proves unseen, then one event per entity it changed; unchanged
        re-reads give nothing."""
        return [*self._unseen(rnd, now_ms),
                *(e for entity in rnd.touched if (e := self._event(entity, now_ms, None)) is not None)]

    def snapshot(self, rnd: Round, snapshot_id: str, reason: str, begun_ms: int, now_ms: int) -> list[Event]:
        """The states the round proves unseen (before the snapshot: they are older than it), begin
        marker (observed when the reads began), every entity's state, deletions of published
        entities now gone, end marker."""
        resync = Resync(snapshot_id, reason, begun_ms)
        current = {EntityId("controller")} | {self.classify(path)[1] for path in self._nodes}
        body = resync.body(current | set(self._published), _order, lambda e: self._event(e, now_ms, snapshot_id))
        newest = max((e.zxid or 0 for e in body), default=None)
        return [*self._unseen(rnd, now_ms), resync.begin(partial(self._marker, zxid=None)), *body,
                resync.end(partial(self._marker, zxid=newest), sum(e.op == "upsert" for e in body), now_ms)]

    def _unseen(self, rnd: Round, now_ms: int) -> list[Event]:
        return [self._envelope(entity, "upsert", now_ms, state, zxid, None, None) for entity, state, zxid in rnd.unseen]

    def _event(self, entity: EntityId, now_ms: int, snapshot_id: str | None) -> Event | None:
        parts = self._parts(entity)
        if any(p in self._unparsed for p in parts):   # a part never parsed: unknown, neither emitted nor deleted
            return None
        state = self._state(entity, [self._nodes.get(p) for p in parts])
        if state is not None and entity.kind == "partition":
            state = dataclasses.replace(state, deleting=self._deleting(entity.name),
                                        remaining=self._remaining(entity.name, entity.partition))
        nodes = {p: self._nodes[p] for p in parts if p in self._nodes}
        zxid = max(nodes[p].mzxid if p in nodes else self._absent.get(p, 0) for p in parts)
        if state is None:
            for p in parts:   # gone: nothing to remember about its znodes
                self._absent.pop(p, None)
                self._emitted.pop(p, None)
            if self._published.pop(entity, None) is None:
                return None
            return self._envelope(entity, "delete", now_ms, None, zxid, None, snapshot_id)
        signature = tuple(nodes[p].mzxid if p in nodes else None for p in parts)
        if snapshot_id is None and self._published.get(entity) == signature:
            return None
        self._published[entity] = signature
        meta = None
        if nodes:   # the part written last is the one this event reports
            newest, node = max(nodes.items(), key=lambda item: item[1].mzxid)
            gap = version_gap(self._emitted.get(newest), node.czxid, node.version, live=snapshot_id is None)
            meta = ZnodeMeta(newest, node.mzxid, node.version, node.mtime_ms, gap)
        self._emitted.update((p, (node.czxid, node.version)) for p, node in nodes.items())
        return self._envelope(entity, "upsert", now_ms, state, zxid, meta, snapshot_id)

    def _parts(self, entity: EntityId) -> list[str]:
        """The znodes an entity is made of."""
        p = self.paths
        match entity:
            case EntityId("controller"):
                return [p.controller, p.controller_epoch]
            case EntityId("broker", broker_id):
                return [p.broker(broker_id)]
            case EntityId("topic", topic):
                return [p.topic(topic), p.topic_config(topic)]
            case EntityId("partition", topic, partition):
                return [p.partition_state(topic, partition)]
            case EntityId("reassignment"):
                return [p.reassign_partitions]
            case EntityId("preferred_election"):
                return [p.preferred_replica_election]
            case EntityId("topic_deletion", topic):
                return [p.topic_deletion(topic)]
            case EntityId("isr_change", sequence):
                return [f"{p.isr_change_notification}/isr_change_{sequence}"]
        raise ValueError(f"not a zk entity: {entity!r}")

    @staticmethod
    def _state(entity: EntityId, nodes: list[_Node | None]) -> Any:
        """The entity's state from its parts' last valid reads; None when it does not exist."""
        if entity.kind == "controller":   # a singleton: "no controller" is a state, not a deletion
            registration, epoch = nodes
            broker_id, timestamp, kraft_epoch = registration.value if registration else (-1, None, None)
            return ControllerState(broker_id, epoch.value if epoch else None, timestamp, kraft_epoch)
        if entity.kind == "topic":
            topic, config = nodes
            return dataclasses.replace(topic.value, config=config.value if config else {}) if topic else None
        if entity.kind == "broker" and nodes[0]:
            return dataclasses.replace(nodes[0].value, registration_zxid=nodes[0].czxid)
        return nodes[0].value if nodes[0] else None

    def _envelope(self, entity: EntityId, op: str, now_ms: int, data: Any, zxid: int | None,
                  znode: ZnodeMeta | None, snapshot_id: str | None) -> Event:
        return Event(cluster=self.cluster, source=SOURCE, kind=entity.kind,
                     entity=entity_key(entity.kind, *entity.parts), op=op, observed_ms=now_ms, data=data, zxid=zxid,
                     znode=znode, snapshot_id=snapshot_id)

    def _marker(self, kind: str, marker: SnapshotMarker, now_ms: int, zxid: int | None) -> Event:
        return self._envelope(EntityId(kind, SOURCE), "marker", now_ms, marker, zxid, None, marker.snapshot_id)


_PARSERS: dict[Role, Callable[[str, bytes], Any]] = {
    Role.CONTROLLER: parse_controller,
    Role.CONTROLLER_EPOCH: parse_controller_epoch,
    Role.REASSIGNMENT: parse_reassignment,
    Role.PREFERRED_ELECTION: parse_preferred_election,
    Role.BROKER: parse_broker,
    Role.TOPIC: parse_topic,
    Role.TOPIC_CONFIG: parse_topic_config,
    Role.PARTITION: parse_partition_state,
    Role.ISR_CHANGE: parse_isr_change,
}


def _order(entity: EntityId) -> tuple[int, tuple[str, ...]]:
    return snapshot_order(entity.kind, entity.parts)
