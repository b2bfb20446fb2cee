"""The KRaft collector's model of the cluster: the metadata log replayed into kmon's entities. Pure.

As Kafka's own MetadataImage is built from the log's records, :class:`MetadataImage` replays each
committed record into the brokers, topics (by id: a name deleted and created again is a new topic),
partitions, topic configs, feature levels and the controller (the quorum leader, from the raft
layer's LeaderChange records), and says what changed as kmon events whose ordering key is the
metadata offset (``Event.log``). Every partition record is one event, so no ISR step or election is
lost; a topic's assignment is sent once per replay (a fetch's records), so a topic of a thousand
partitions is not a thousand topic events. Records of a metadata transaction take effect at its end,
and not at all when it is aborted. A snapshot is replayed silently and then sent whole, bracketed by
markers, with the deletions of what it no longer holds (:meth:`snapshot_events`). The image holds the
cluster only: a replay's events come back from it (:class:`Replayed`), and what was sent is the caller's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

from collectors.kraft.records import (KRAFT_VERSION, NO_LEADER_CHANGE, TOPIC_RESOURCE, AbortTransactionRecord,
                                      BeginTransactionRecord, BrokerRegistrationChangeRecord, ClearElrRecord,
                                      ConfigRecord, EndTransactionRecord, FeatureLevelRecord, MetadataRecord,
                                      PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, RemoveTopicRecord,
                                      TopicRecord, Unknown, UnregisterBrokerRecord)
from collectors.resync import Envelope, Resync, entity_order
from kmon.construct import constructor, replace
from kmon.events import (BrokerState, ControllerState, Endpoint, Event, LogMeta, PartitionState, SnapshotMarker,
                         TopicState, entity_key, remaining_replicas)

SOURCE = "kraft"
# Kafka's SecurityProtocol ids, as RegisterBrokerRecord writes them
PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
# built once per partition record: without the frozen __init__ (kmon/construct.py)
_partition_state, _event = constructor(PartitionState), constructor(Event)


@dataclass
class _Topic:
    name: str
    topic_id: str
    replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)
    partition_keys: str = field(init=False, default="")   # its partitions' entity keys less the partition's number

    def __post_init__(self) -> None:
        self.partition_keys = entity_key("partition", self.name, "")

    def partition_key(self, partition: int) -> str:
        """``entity_key("partition", name, partition)``, made without its lookups: one per partition record."""
        return f"{self.partition_keys}{partition}"

    def remaining(self, partition: int) -> tuple[int, ...]:
        """The replicas the partition keeps: the record that completes a move drops its removing
        replicas from the replicas and the ISR at once."""
        return remaining_replicas(self.replicas[partition], self.removing.get(partition, ()))


@dataclass
class MetadataImage:
    cluster: str
    brokers: dict[int, BrokerState] = field(default_factory=dict)
    topics: dict[str, _Topic] = field(default_factory=dict)                  # by topic id
    names: dict[str, str] = field(default_factory=dict)                     # topic name -> id
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)   # (topic id, p)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)        # topic name -> its settings
    features: dict[str, int] = field(default_factory=lambda: {KRAFT_VERSION: 0})   # a static quorum, until told
    controller: ControllerState | None = None
    # entity -> where it last changed
    changed_at: dict[str, LogMeta] = field(default_factory=dict)
    _pending_tx: list[tuple[MetadataRecord, LogMeta]] | None = None

    # ------------------------------------------------------------------ replaying
    def replay(self, records: Iterable[tuple[MetadataRecord | ControllerState, LogMeta]], now_ms: int,
               published: set[str], silent: bool = False) -> Replayed:
        """Committed records, each with where it is in the log (a ControllerState for a LeaderChange
        control record: the quorum's leader from that epoch on), replayed as Kafka's MetadataDelta
        does; what they changed comes back as events, each changed topic's assignment once, after the
        records that changed it. ``published``: the entities sent and not deleted since, kept up to
        date (only those are deleted). ``silent`` (a snapshot's records): the image changes, no events."""
        delta = _Delta(now_ms, published, silent)
        for record, at in records:
            if isinstance(record, ControllerState):
                self._set_controller(record, at, delta)
            else:
                self._apply(record, at, delta)
        for name, at in delta.dirty_topics.items():
            self._flush_topic(name, at, delta)
        return delta.replayed

    def _apply(self, record: MetadataRecord, at: LogMeta, delta: _Delta) -> None:
        if isinstance(record, BeginTransactionRecord):
            self._pending_tx = []
            return
        if self._pending_tx is not None:
            if isinstance(record, EndTransactionRecord):
                pending, self._pending_tx = self._pending_tx, None
                for held, where in pending:
                    self._replay_record(held, where, delta)
            elif isinstance(record, AbortTransactionRecord):
                self._pending_tx = None
            else:
                self._pending_tx.append((record, at))
            return
        self._replay_record(record, at, delta)

    def in_transaction(self) -> bool:
        return self._pending_tx is not None

    def _replay_record(self, record: MetadataRecord, at: LogMeta, delta: _Delta) -> None:
        match record:
            case PartitionRecord():
                self._partition(record, at, delta)
            case PartitionChangeRecord():
                self._partition_change(record, at, delta)
            case RegisterBrokerRecord():
                self._register(record, at, delta)
            case BrokerRegistrationChangeRecord():
                self._broker_change(record, at, delta)
            case UnregisterBrokerRecord():
                if self.brokers.pop(record.broker_id, None) is not None:
                    self._send(entity_key("broker", record.broker_id), "broker", None, at, delta)
            case TopicRecord():
                self._topic(record, at, delta)
            case RemoveTopicRecord():
                self._remove_topic(record.topic_id, at, delta)
            case ConfigRecord() if record.resource_type == TOPIC_RESOURCE:
                self._config(record, at, delta)
            case FeatureLevelRecord():
                self.features[record.name] = record.level
            case ClearElrRecord():
                self._clear_elr(record.topic, at, delta)
            case Unknown():
                delta.replayed.unknown.append((record.api_key, record.version, at.offset))

    def _set_controller(self, state: ControllerState, at: LogMeta, delta: _Delta) -> None:
        if state != self.controller:
            self.controller = state
            self._send("controller", "controller", state, at, delta)

    def _register(self, r: RegisterBrokerRecord, at: LogMeta, delta: _Delta) -> None:
        plain = next((e for e in r.endpoints if PROTOCOLS.get(e.security_protocol) == "PLAINTEXT"), None)
        first = plain or (r.endpoints[0] if r.endpoints else None)
        state = BrokerState(
            broker_id=r.broker_id, host=first.host if first else None, port=plain.port if plain else -1, rack=r.rack,
            endpoints=tuple(Endpoint(e.listener, e.host, e.port, PROTOCOLS.get(e.security_protocol, "UNKNOWN"))
                            for e in r.endpoints),
            features={name: {"min_version": lo, "max_version": hi} for name, (lo, hi) in sorted(r.features.items())},
            fenced=r.fenced, in_controlled_shutdown=r.in_controlled_shutdown, incarnation_id=r.incarnation_id,
            broker_epoch=r.broker_epoch)
        # a new process of the broker replaces the registration (its new incarnation says so): the
        # broker was not gone, it restarted
        self.brokers[r.broker_id] = state
        self._send(entity_key("broker", r.broker_id), "broker", state, at, delta)

    def _broker_change(self, r: BrokerRegistrationChangeRecord, at: LogMeta, delta: _Delta) -> None:
        old = self.brokers.get(r.broker_id)
        if old is None:
            delta.replayed.unmatched.append(("broker_change", at.offset))
            return
        if old.broker_epoch is not None and r.broker_epoch != old.broker_epoch:
            return   # a change of a registration that was replaced
        new = dataclasses.replace(
            old, fenced=old.fenced if r.fenced is None else r.fenced,
            # fenced again or unfenced: a controlled shutdown ends with the broker's fencing
            in_controlled_shutdown=(r.in_controlled_shutdown if r.in_controlled_shutdown is not None
                                    else old.in_controlled_shutdown and r.fenced is None))
        if new != old:
            self.brokers[r.broker_id] = new
            self._send(entity_key("broker", r.broker_id), "broker", new, at, delta)

    def _topic(self, r: TopicRecord, at: LogMeta, delta: _Delta) -> None:
        if r.name in self.names:   # a topic of that name exists: it was removed unseen
            self._remove_topic(self.names[r.name], at, delta)
        if r.topic_id in self.topics:   # so was the topic that had this id under another name
            self._remove_topic(r.topic_id, at, delta)
        self.topics[r.topic_id] = _Topic(r.name, r.topic_id)
        self.names[r.name] = r.topic_id
        delta.dirty_topics[r.name] = at

    def _remove_topic(self, topic_id: str, at: LogMeta, delta: _Delta) -> None:
        topic = self.topics.get(topic_id)
        if topic is None:
            return
        if topic.name in delta.dirty_topics:   # created (or changed) since the last events: tell it first
            self._flush_topic(topic.name, delta.dirty_topics.pop(topic.name), delta)
        del self.topics[topic_id]
        del self.names[topic.name]
        self.configs.pop(topic.name, None)
        for p in sorted(topic.replicas):
            self.partitions.pop((topic_id, p), None)
            self._send(topic.partition_key(p), "partition", None, at, delta)
        self._send(entity_key("topic", topic.name), "topic", None, at, delta)

    def _config(self, r: ConfigRecord, at: LogMeta, delta: _Delta) -> None:
        settings = self.configs.setdefault(r.resource_name, {})
        if r.value is None:
            settings.pop(r.name, None)
        else:
            settings[r.name] = r.value
        if r.resource_name in self.names:
            delta.dirty_topics[r.resource_name] = at

    def _assign(self, topic: _Topic, partition: int, replicas: tuple[int, ...], adding: tuple[int, ...],
                removing: tuple[int, ...], at: LogMeta, delta: _Delta) -> None:
        changed = topic.replicas.get(partition) != replicas
        topic.replicas[partition] = replicas
        if adding or removing or partition in topic.adding or partition in topic.removing:   # a move
            for table, value in ((topic.adding, adding), (topic.removing, removing)):
                changed = changed or table.get(partition) != (value or None)
                if value:
                    table[partition] = value
                else:
                    table.pop(partition, None)
        if changed:
            delta.dirty_topics[topic.name] = at

    def _partition(self, r: PartitionRecord, at: LogMeta, delta: _Delta) -> None:
        topic = self.topics.get(r.topic_id)
        if topic is None:
            return   # of a topic already removed
        self._assign(topic, r.partition, r.replicas, r.adding, r.removing, at, delta)
        self._set_partition(topic, r.partition, _partition_state(
            topic=topic.name, partition=r.partition, leader=r.leader, leader_epoch=r.leader_epoch, isr=r.isr,
            controller_epoch=at.epoch, leader_recovery_state=r.leader_recovery_state,
            partition_epoch=r.partition_epoch, elr=r.elr or (), last_known_elr=r.last_known_elr or (),
            remaining=remaining_replicas(r.replicas, r.removing)), at, delta)

    def _partition_change(self, r: PartitionChangeRecord, at: LogMeta, delta: _Delta) -> None:
        topic = self.topics.get(r.topic_id)
        old = self.partitions.get((r.topic_id, r.partition))
        if topic is None or old is None:
            delta.replayed.unmatched.append(("partition_change", at.offset))
            return
        if r.replicas is not None or r.adding is not None or r.removing is not None:
            self._assign(topic, r.partition, r.replicas if r.replicas is not None else topic.replicas[r.partition],
                         r.adding if r.adding is not None else topic.adding.get(r.partition, ()),
                         r.removing if r.removing is not None else topic.removing.get(r.partition, ()), at, delta)
        # as Kafka's PartitionRegistration.merge: a record that sets the leader (even the same one)
        # bumps the leader epoch; every record bumps the partition epoch
        same = r.leader == NO_LEADER_CHANGE
        self._set_partition(topic, r.partition, replace(
            old, leader=old.leader if same else r.leader, leader_epoch=old.leader_epoch + (not same),
            isr=old.isr if r.isr is None else r.isr,
            controller_epoch=at.epoch,
            leader_recovery_state=old.leader_recovery_state if r.leader_recovery_state is None
            else r.leader_recovery_state,
            partition_epoch=(old.partition_epoch or 0) + 1,
            elr=old.elr if r.elr is None else r.elr,
            last_known_elr=old.last_known_elr if r.last_known_elr is None else r.last_known_elr,
            remaining=topic.remaining(r.partition)), at, delta)

    def _clear_elr(self, topic_name: str, at: LogMeta, delta: _Delta) -> None:
        # a topic the image does not hold (its TopicRecord was unreadable) has no ELR to clear here
        ids = [self.names[topic_name]] if topic_name in self.names else [] if topic_name else list(self.topics)
        for topic_id in ids:
            topic = self.topics.get(topic_id)
            for p in sorted(topic.replicas) if topic else ():
                old = self.partitions.get((topic_id, p))
                if old is not None and (old.elr or old.last_known_elr):
                    self._set_partition(topic, p, replace(old, elr=(), last_known_elr=()), at, delta)

    def _set_partition(self, topic: _Topic, partition: int, state: PartitionState, at: LogMeta,
                       delta: _Delta) -> None:
        self.partitions[(topic.topic_id, partition)] = state
        self._send(topic.partition_key(partition), "partition", state, at, delta)

    # ------------------------------------------------------------------ events
    def _send(self, entity: str, kind: str, state: Any, at: LogMeta, delta: _Delta) -> None:
        self.changed_at[entity] = at
        if delta.silent:
            return
        if state is None:
            self.changed_at.pop(entity, None)
            if entity not in delta.published:
                return
            delta.published.discard(entity)
        else:
            delta.published.add(entity)
        delta.replayed.events.append(self._event(entity, kind, state, at, delta.now_ms, None))

    def _event(self, entity: str, kind: str, state: Any, at: LogMeta, now_ms: int, snapshot_id: str | None) -> Event:
        return _event(cluster=self.cluster, source=SOURCE, kind=kind, entity=entity,
                      op="upsert" if state is not None else "delete", observed_ms=now_ms, data=state, log=at,
                      snapshot_id=snapshot_id)

    def _flush_topic(self, name: str, at: LogMeta, delta: _Delta) -> None:
        self._send(entity_key("topic", name), "topic", self._topic_state(name), at, delta)

    def _topic_state(self, name: str) -> TopicState:
        t = self.topics[self.names[name]]
        return TopicState(topic=name, topic_id=t.topic_id, replicas=dict(sorted(t.replicas.items())),
                          adding=dict(sorted(t.adding.items())), removing=dict(sorted(t.removing.items())),
                          config=dict(sorted(self.configs.get(name, {}).items())))

    def snapshot_events(self, resync: Resync, at: LogMeta, now_ms: int, published: set[str]) -> list[Event]:
        """The begin marker, every entity's state, and the deletions of what ``published`` holds that
        the image no longer does (the controller is no record of a snapshot: the last one known stands
        until the log says more); ``published`` becomes what the snapshot sent. The end marker follows
        (:meth:`end_marker`) once the log after the snapshot has been read up to the high watermark."""
        current: dict[str, tuple[str, Any]] = {}
        if self.controller is not None:
            current["controller"] = ("controller", self.controller)
        for b, state in self.brokers.items():
            current[entity_key("broker", b)] = ("broker", state)
        for name in self.names:
            current[entity_key("topic", name)] = ("topic", self._topic_state(name))
        for (topic_id, p), state in self.partitions.items():
            current[self.topics[topic_id].partition_key(p)] = ("partition", state)

        def event(entity: str) -> Event:
            kind, state = current.get(entity) or (entity.partition(":")[0], None)
            return self._event(entity, kind, state, self.changed_at.get(entity, at) if state is not None else at,
                               now_ms, resync.snapshot_id)

        body = resync.body(current.keys() | (published - {"controller"}), entity_order, event)
        published.clear()
        published.update(current)
        return [resync.begin(self._marker(at)), *body]

    def end_marker(self, resync: Resync, at: LogMeta, now_ms: int) -> Event:
        entities = (self.controller is not None) + len(self.brokers) + len(self.topics) + len(self.partitions)
        return resync.end(self._marker(at), entities, now_ms)

    def _marker(self, at: LogMeta) -> Envelope:
        def envelope(kind: str, marker: SnapshotMarker, observed_ms: int) -> Event:
            return dataclasses.replace(self._event(entity_key(kind, SOURCE), kind, marker, at, observed_ms,
                                                   marker.snapshot_id), op="marker")
        return envelope


@dataclass
class Replayed:
    """What a replay gave: its events in the log's order, the unknown record types met ((api key,
    version, offset)), and the changes of a broker or partition the image does not hold ((what,
    offset): a record kmon could not read before them, or a log that is not Kafka's), counted, not
    applied."""
    events: list[Event] = field(default_factory=list)
    unknown: list[tuple[int, int, int]] = field(default_factory=list)
    unmatched: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class _Delta:
    """One replay's changes, which the image does not keep: what it gives, and each changed topic (name
    -> its last change) whose assignment goes out at the replay's end."""
    now_ms: int
    published: set[str]
    silent: bool
    replayed: Replayed = field(default_factory=Replayed)
    dirty_topics: dict[str, LogMeta] = field(default_factory=dict)
