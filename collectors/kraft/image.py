"""The KRaft collector's model of the cluster: the metadata log folded into kmon's entities. Pure.

As Kafka's own MetadataImage is built from the log's records, :class:`MetadataImage` folds each
committed record into the brokers, topics (by id: a name deleted and created again is a new topic),
partitions, topic configs, feature levels and the controller (the quorum leader, from the raft
layer's LeaderChange records), and says what changed as kmon events whose ordering key is the
metadata offset (``Event.log``). Every partition record is one event, so no ISR step or election is
lost; a topic's assignment is sent once per fetch (:meth:`take_events`), so a topic of a thousand
partitions is not a thousand topic events. Records of a metadata transaction take effect at its end,
and not at all when it is aborted. A snapshot is applied silently and then sent whole, bracketed by
markers, with the deletions of what it no longer holds (:meth:`snapshot_events`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from collectors.kraft.records import (NO_LEADER_CHANGE, TOPIC_RESOURCE, AbortTransactionRecord,
                                      BeginTransactionRecord, BrokerRegistrationChangeRecord, ClearElrRecord,
                                      ConfigRecord, EndTransactionRecord, FeatureLevelRecord, MetadataRecord,
                                      PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, RemoveTopicRecord,
                                      TopicRecord, Unknown, UnregisterBrokerRecord)
from kmon.events import (BrokerState, ControllerState, Endpoint, Event, LogMeta, PartitionState, SnapshotMarker,
                         TopicState, entity_key, remaining_replicas, snapshot_order)

SOURCE = "kraft"
# Kafka's SecurityProtocol ids, as RegisterBrokerRecord writes them
PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


@dataclass
class _Topic:
    name: str
    topic_id: str
    replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

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
    features: dict[str, int] = field(default_factory=dict)
    controller: ControllerState | None = None
    # entity -> where it last changed
    changed_at: dict[str, LogMeta] = field(default_factory=dict)
    # what a silent fold (a snapshot) does not send
    silent: bool = False
    unknown: list[Unknown] = field(default_factory=list)     # met since the caller last took them
    # changes of a broker or partition the image does not hold (a record kmon could not read before
    # them, or a log that is not Kafka's), met since the caller last took them: counted, not applied
    unmatched: list[str] = field(default_factory=list)
    _pending_tx: list[tuple[MetadataRecord, LogMeta]] | None = None
    _dirty_topics: dict[str, LogMeta] = field(default_factory=dict)   # topic name -> its last change
    _out: list[Event] = field(default_factory=list)
    _published: set[str] = field(default_factory=set)     # entities sent and not deleted since
    now_ms: int = 0

    # ------------------------------------------------------------------ folding
    def apply(self, record: MetadataRecord, at: LogMeta) -> None:
        """One committed metadata record at ``at``."""
        if isinstance(record, BeginTransactionRecord):
            self._pending_tx = []
            return
        if self._pending_tx is not None:
            if isinstance(record, EndTransactionRecord):
                pending, self._pending_tx = self._pending_tx, None
                for held, where in pending:
                    self._fold(held, where)
            elif isinstance(record, AbortTransactionRecord):
                self._pending_tx = None
            else:
                self._pending_tx.append((record, at))
            return
        self._fold(record, at)

    def in_transaction(self) -> bool:
        return self._pending_tx is not None

    def _fold(self, record: MetadataRecord, at: LogMeta) -> None:
        match record:
            case PartitionRecord():
                self._partition(record, at)
            case PartitionChangeRecord():
                self._partition_change(record, at)
            case RegisterBrokerRecord():
                self._register(record, at)
            case BrokerRegistrationChangeRecord():
                self._broker_change(record, at)
            case UnregisterBrokerRecord():
                if self.brokers.pop(record.broker_id, None) is not None:
                    self._send(entity_key("broker", record.broker_id), "broker", None, at)
            case TopicRecord():
                self._topic(record, at)
            case RemoveTopicRecord():
                self._remove_topic(record.topic_id, at)
            case ConfigRecord() if record.resource_type == TOPIC_RESOURCE:
                self._config(record, at)
            case FeatureLevelRecord():
                self.features[record.name] = record.level
            case ClearElrRecord():
                self._clear_elr(record.topic, at)
            case Unknown():
                self.unknown.append(record)

    def leader_change(self, leader_id: int, at: LogMeta) -> None:
        """A LeaderChange control record: ``leader_id`` leads from epoch ``at.epoch`` on."""
        self.set_controller(ControllerState(leader_id, at.epoch), at)

    def set_controller(self, state: ControllerState, at: LogMeta) -> None:
        if state != self.controller:
            self.controller = state
            self._send("controller", "controller", state, at)

    def _register(self, r: RegisterBrokerRecord, at: LogMeta) -> None:
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
        self._send(entity_key("broker", r.broker_id), "broker", state, at)

    def _broker_change(self, r: BrokerRegistrationChangeRecord, at: LogMeta) -> None:
        old = self.brokers.get(r.broker_id)
        if old is None:
            self.unmatched.append("broker_change")
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
            self._send(entity_key("broker", r.broker_id), "broker", new, at)

    def _topic(self, r: TopicRecord, at: LogMeta) -> None:
        if r.name in self.names:   # a topic of that name exists: it was removed unseen
            self._remove_topic(self.names[r.name], at)
        if r.topic_id in self.topics:   # so was the topic that had this id under another name
            self._remove_topic(r.topic_id, at)
        self.topics[r.topic_id] = _Topic(r.name, r.topic_id)
        self.names[r.name] = r.topic_id
        self._dirty_topics[r.name] = at

    def _remove_topic(self, topic_id: str, at: LogMeta) -> None:
        topic = self.topics.get(topic_id)
        if topic is None:
            return
        if topic.name in self._dirty_topics:   # created (or changed) since the last events: tell it first
            self._flush_topic(topic.name, self._dirty_topics.pop(topic.name))
        del self.topics[topic_id]
        del self.names[topic.name]
        self.configs.pop(topic.name, None)
        for p in sorted(topic.replicas):
            self.partitions.pop((topic_id, p), None)
            self._send(entity_key("partition", topic.name, p), "partition", None, at)
        self._send(entity_key("topic", topic.name), "topic", None, at)

    def _config(self, r: ConfigRecord, at: LogMeta) -> None:
        settings = self.configs.setdefault(r.resource_name, {})
        if r.value is None:
            settings.pop(r.name, None)
        else:
            settings[r.name] = r.value
        if r.resource_name in self.names:
            self._dirty_topics[r.resource_name] = at

    def _assign(self, topic: _Topic, partition: int, replicas: tuple[int, ...], adding: tuple[int, ...],
                removing: tuple[int, ...], at: LogMeta) -> None:
        before = (topic.replicas.get(partition), topic.adding.get(partition), topic.removing.get(partition))
        topic.replicas[partition] = replicas
        for table, value in ((topic.adding, adding), (topic.removing, removing)):
            if value:
                table[partition] = value
            else:
                table.pop(partition, None)
        if before != (replicas, adding or None, removing or None):
            self._dirty_topics[topic.name] = at

    def _partition(self, r: PartitionRecord, at: LogMeta) -> None:
        topic = self.topics.get(r.topic_id)
        if topic is None:
            return   # of a topic already removed
        self._assign(topic, r.partition, r.replicas, r.adding, r.removing, at)
        self._set_partition(topic, r.partition, PartitionState(
            topic=topic.name, partition=r.partition, leader=r.leader, leader_epoch=r.leader_epoch, isr=r.isr,
            controller_epoch=at.epoch, leader_recovery_state=r.leader_recovery_state,
            partition_epoch=r.partition_epoch, elr=r.elr or (), last_known_elr=r.last_known_elr or (),
            remaining=topic.remaining(r.partition)), at)

    def _partition_change(self, r: PartitionChangeRecord, at: LogMeta) -> None:
        topic = self.topics.get(r.topic_id)
        old = self.partitions.get((r.topic_id, r.partition))
        if topic is None or old is None:
            self.unmatched.append("partition_change")
            return
        if r.replicas is not None or r.adding is not None or r.removing is not None:
            self._assign(topic, r.partition, r.replicas if r.replicas is not None else topic.replicas[r.partition],
                         r.adding if r.adding is not None else topic.adding.get(r.partition, ()),
                         r.removing if r.removing is not None else topic.removing.get(r.partition, ()), at)
        # as Kafka's PartitionRegistration.merge: a record that sets the leader (even the same one)
        # bumps the leader epoch; every record bumps the partition epoch
        same = r.leader == NO_LEADER_CHANGE
        self._set_partition(topic, r.partition, dataclasses.replace(
            old, leader=old.leader if same else r.leader, leader_epoch=old.leader_epoch + (not same),
            isr=old.isr if r.isr is None else r.isr,
            controller_epoch=at.epoch,
            leader_recovery_state=old.leader_recovery_state if r.leader_recovery_state is None
            else r.leader_recovery_state,
            partition_epoch=(old.partition_epoch or 0) + 1,
            elr=old.elr if r.elr is None else r.elr,
            last_known_elr=old.last_known_elr if r.last_known_elr is None else r.last_known_elr,
            remaining=topic.remaining(r.partition)), at)

    def _clear_elr(self, topic_name: str, at: LogMeta) -> None:
        # a topic the image does not hold (its TopicRecord was unreadable) has no ELR to clear here
        ids = [self.names[topic_name]] if topic_name in self.names else [] if topic_name else list(self.topics)
        for topic_id in ids:
            topic = self.topics.get(topic_id)
            for p in sorted(topic.replicas) if topic else ():
                old = self.partitions.get((topic_id, p))
                if old is not None and (old.elr or old.last_known_elr):
                    self._set_partition(topic, p, dataclasses.replace(old, elr=(), last_known_elr=()), at)

    def _set_partition(self, topic: _Topic, partition: int, state: PartitionState, at: LogMeta) -> None:
        self.partitions[(topic.topic_id, partition)] = state
        self._send(entity_key("partition", topic.name, partition), "partition", state, at)

    # ------------------------------------------------------------------ events
    def _send(self, entity: str, kind: str, state: Any, at: LogMeta) -> None:
        self.changed_at[entity] = at
        if self.silent:
            return
        if state is None:
            self.changed_at.pop(entity, None)
            if entity not in self._published:
                return
            self._published.discard(entity)
        else:
            self._published.add(entity)
        self._out.append(self._event(entity, kind, state, at, None))

    def _event(self, entity: str, kind: str, state: Any, at: LogMeta, snapshot_id: str | None) -> Event:
        return Event(cluster=self.cluster, source=SOURCE, kind=kind, entity=entity,
                     op="upsert" if state is not None else "delete", observed_ms=self.now_ms, data=state, log=at,
                     snapshot_id=snapshot_id)

    def take_events(self) -> list[Event]:
        """The events since the last call, in the log's order; each changed topic's assignment last."""
        for name, at in self._dirty_topics.items():
            self._flush_topic(name, at)
        self._dirty_topics.clear()
        out, self._out = self._out, []
        return out

    def _flush_topic(self, name: str, at: LogMeta) -> None:
        self._send(entity_key("topic", name), "topic", self._topic_state(name), at)

    def _topic_state(self, name: str) -> TopicState:
        t = self.topics[self.names[name]]
        return TopicState(topic=name, topic_id=t.topic_id, replicas=dict(sorted(t.replicas.items())),
                          adding=dict(sorted(t.adding.items())), removing=dict(sorted(t.removing.items())),
                          config=dict(sorted(self.configs.get(name, {}).items())))

    @classmethod
    def after(cls, previous: "MetadataImage") -> "MetadataImage":
        """An empty image for a snapshot to be folded into, which remembers what ``previous`` sent, so
        that :meth:`snapshot_events` can delete what the snapshot no longer holds. The controller is no
        record of a snapshot: the last one known stands until the log says more."""
        return cls(previous.cluster, controller=previous.controller, _published=previous._published)

    def snapshot_events(self, snapshot_id: str, reason: str, begun_ms: int, at: LogMeta) -> list[Event]:
        """The begin marker, every entity's state, and the deletions of entities sent before that the
        image no longer holds; the end marker follows (:meth:`end_marker`) once the log after the
        snapshot has been read up to the high watermark."""
        self.take_events()
        current: dict[str, tuple[str, Any]] = {}
        if self.controller is not None:
            current["controller"] = ("controller", self.controller)
        for b, state in self.brokers.items():
            current[entity_key("broker", b)] = ("broker", state)
        for name in self.names:
            current[entity_key("topic", name)] = ("topic", self._topic_state(name))
        for (topic_id, p), state in self.partitions.items():
            current[entity_key("partition", state.topic, p)] = ("partition", state)
        begin = self._event(entity_key("snapshot_begin", SOURCE), "snapshot_begin",
                            SnapshotMarker(snapshot_id, reason), at, snapshot_id)
        events = [dataclasses.replace(begin, op="marker", observed_ms=begun_ms)]
        for entity in sorted(current, key=_order):
            kind, state = current[entity]
            events.append(self._event(entity, kind, state, self.changed_at.get(entity, at), snapshot_id))
        for entity in sorted(self._published - set(current) - {"controller"}, key=_order):
            events.append(self._event(entity, entity.partition(":")[0], None, at, snapshot_id))
        self._published = set(current)
        return events

    def end_marker(self, snapshot_id: str, reason: str, begun_ms: int, at: LogMeta) -> Event:
        entities = (self.controller is not None) + len(self.brokers) + len(self.topics) + len(self.partitions)
        end = SnapshotMarker(snapshot_id, reason, entities, begun_ms)
        return dataclasses.replace(self._event(entity_key("snapshot_end", SOURCE), "snapshot_end", end, at,
                                               snapshot_id), op="marker")


def _order(entity: str) -> tuple[int, tuple[str, ...]]:
    kind, _, parts = entity.partition(":")
    return snapshot_order(kind, parts.split(":") if parts else ())
