"""The exact-history half: reads ``__consumer_offsets`` (manual assignment of every
partition, no group membership, nothing committed) and folds every group record into the
group it describes (collectors.groups.modern_groups: classic groups, and Kafka 4's consumer,
share and streams groups), each change a GroupState event, so every generation or group epoch
is seen even between two polls.

The coordinator writes one change of a group (a member joining: its subscription, the new
group epoch, the target assignment, the members' assignments) as one batch of records with
one timestamp, and an upgrade or downgrade between protocols as one batch too (one side's
tombstone, the other's records). A group's records are therefore folded up to the next
record of another timestamp before its state is emitted: one event per write, never a state
half written.

Until a partition has been read to its end once, its records are history the stream may
already hold: only each group's outcome there (its last state, or its deletion) is emitted,
at the partition's end. Replaying every old generation would make a restarted collector
revive a group deleted later in the same log and count its rebalances again (the
generation steps between the stream's state and the outcome still count).

Offset commits only update the committed offsets lag is computed from (no event per
commit). A share group commits none: its lag is behind its share-partitions' start offsets, which
the share coordinator keeps in ``__share_group_state``, read here beside it (from its beginning:
it is state, not history). Records that cannot be decoded are counted, logged with partition and offset,
and skipped. The consumer reads committed transactions only (``read_committed``), so an
aborted transactional offset commit never counts.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Message, TopicPartition

from collectors.client_logs import LibrdkafkaLog
from collectors.groups.book import GroupBook, ModernStates
from collectors.groups.config import GroupsConfig
from collectors.groups.modern_groups import GroupFold, ModernGroup, apply, group_of, view
from collectors.groups.codec.offsets_codec import (GroupMetadata, OffsetCommit, OffsetTombstone, UnknownRecord,
                                                   decode_record)
from collectors.groups.outputs import SOURCE, Emitter
from collectors.groups.share_delivery import ShareProgress, SharePartition, delivered_to, progress_after
from collectors.groups.codec.share_state_codec import ShareSnapshot, ShareStateTombstone, ShareUpdate, decode_share_state
from collectors.groups.states import TopicNamer, state_from_metadata, state_from_modern
from collectors.kafka_encoding import MalformedRecord
from kmon.events import GroupState

log = logging.getLogger("kmon.collector.groups")

OFFSETS_TOPIC = "__consumer_offsets"
SHARE_STATE_TOPIC = "__share_group_state"   # KIP-932: made with the first share group's state


class OffsetsReader:
    def __init__(self, config: GroupsConfig, book: GroupBook, emitter: Emitter, modern: ModernStates,
                 names: TopicNamer, error_cb: Callable[[KafkaError], None] | None = None) -> None:
        self._config = config
        self._error_cb = error_cb
        self._book = book
        self._emitter = emitter
        self._modern = modern
        self._names = names
        self._folds: dict[str, GroupFold] = {}   # every group the records describe
        self._writing: dict[str, tuple[int, int]] = {}   # group -> (partition, timestamp) of its write being read
        self._unknown: set[tuple[str, int, int | None]] = set()   # topic, record type and version said once
        self._shares: dict[SharePartition, ShareProgress] = {}
        self._unbooked: set[SharePartition] = set()   # changed since the book last had them
        self._share_state_read = False   # its partitions assigned
        self._last: dict[str, GroupState] = {}   # last state emitted per group: no repeats
        self._at_end: set[int] = set()           # partitions read up to their end once
        # partition -> group -> its outcome so far in that partition's history (None: deleted)
        self._catching_up: dict[int, dict[str, GroupState | None]] = {}
        self._partitions = 0
        # set when every partition has been read to its end once: from then on the
        # reader holds every committed offset (the poller stops asking the Admin API)
        self.caught_up = threading.Event()

    def run(self, stop: threading.Event) -> None:
        consumer = Consumer(self._config.client(**{
            # never joins nor commits: the id only names the client's requests
            "group.id": f"kmon-groups-collector-{self._config.cluster}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,     # tells when the history has been read
            "isolation.level": "read_committed",
            "logger": LibrdkafkaLog(log),
            **({"error_cb": self._error_cb} if self._error_cb else {}),
        }))
        try:
            if self._assign(consumer, stop):
                self._consume(consumer, stop)
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer, stop: threading.Event) -> bool:
        """Assign every partition of the topic, once it exists (it is created with the
        first group); False if stopped first."""
        absent = False   # seen not to exist: created while kmon watched
        while not stop.is_set():
            try:
                topic = consumer.list_topics(OFFSETS_TOPIC, timeout=self._config.request_timeout_s) \
                    .topics.get(OFFSETS_TOPIC)
            except Exception as e:
                log.warning("metadata of %s: %s", OFFSETS_TOPIC, e)
                stop.wait(self._config.poll_interval_s)
                continue
            if topic is not None and topic.error is None and topic.partitions:
                start = OFFSET_BEGINNING if self._config.offsets_start == "beginning" else OFFSET_END
                self._partitions = len(topic.partitions)
                consumer.assign([TopicPartition(OFFSETS_TOPIC, p, start) for p in topic.partitions])
                if absent:
                    # nothing in it is history the stream may hold, so every write is emitted (its
                    # first groups' first epochs too)
                    self._at_end.update(topic.partitions)
                log.info("reading %d partitions of %s from the %s", self._partitions, OFFSETS_TOPIC,
                         self._config.offsets_start)
                return True
            absent = absent or topic is None or (topic.error is not None and
                                                 topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART)
            stop.wait(self._config.poll_interval_s)
        return False

    def _read_share_state(self, consumer: Consumer) -> None:
        """Add the share coordinator's topic to what is read, once it exists."""
        try:
            topic = consumer.list_topics(SHARE_STATE_TOPIC, timeout=self._config.request_timeout_s) \
                .topics.get(SHARE_STATE_TOPIC)
        except Exception as e:
            log.debug("metadata of %s: %s", SHARE_STATE_TOPIC, e)
            return
        if topic is not None and topic.error is None and topic.partitions:
            consumer.incremental_assign([TopicPartition(SHARE_STATE_TOPIC, p, OFFSET_BEGINNING)
                                         for p in topic.partitions])
            self._share_state_read = True
            log.info("reading %d partitions of %s: the share groups' delivery", len(topic.partitions),
                     SHARE_STATE_TOPIC)

    def _consume(self, consumer: Consumer, stop: threading.Event) -> None:
        look_for_share_state = 0.0
        while not stop.is_set():
            if not self._share_state_read and time.monotonic() >= look_for_share_state:
                look_for_share_state = time.monotonic() + self._config.poll_interval_s
                self._read_share_state(consumer)
            for message in consumer.consume(num_messages=500, timeout=0.5):
                try:
                    self.handle(message)
                except Exception:  # a defect must not end the history
                    self._emitter.telemetry.survived(SOURCE, f"handling {OFFSETS_TOPIC} partition "
                                                     f"{message.partition()} offset {message.offset()}", log)
            self.flush()

    def handle(self, message: Message) -> None:
        """One consumed message: a record, an end-of-partition notice or a fetch error."""
        error = message.error()
        if error is None and message.topic() == SHARE_STATE_TOPIC:
            self._share_state(message)
            return
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                if message.topic() == SHARE_STATE_TOPIC:
                    return
                self.flush()
                self._at_end.add(message.partition())
                self._emit_outcomes(message.partition())
                if len(self._at_end) >= self._partitions and not self.caught_up.is_set():
                    log.info("read the history of %s to its end: %d groups known; live from here",
                             OFFSETS_TOPIC, len(self._last))
                    self.caught_up.set()
            else:
                log.warning("%s: %s", OFFSETS_TOPIC, error)
            return
        try:
            record = decode_record(message.key(), message.value())
        except MalformedRecord as e:
            self._skip(message, "malformed", str(e))
            return
        match record:
            case OffsetCommit(group=g, topic=t, partition=p, offset=offset):
                if self._config.groups(g) and self._config.topics(t):
                    self._book.commit(g, (t, p), offset)
            case OffsetTombstone(group=g, topic=t, partition=p):
                self._book.uncommit(g, (t, p))
            case UnknownRecord():
                self._unknown_record(message, "", record)
            case _ if (group := group_of(record)) is not None and self._config.groups(group):
                self._fold(message, group, record)
            # the rest (subscribed topics' metadata, regular expressions, share-partition state
            # lists) changes nothing kmon shows

    def _fold(self, message: Message, group: str, record: object) -> None:
        """One record of ``group``'s write: the group's previous write is complete when this one
        has another timestamp."""
        write = (message.partition(), message.timestamp()[1])
        if self._writing.get(group, write) != write:
            self._written(group)
        self._writing[group] = write
        fold = apply(self._folds.get(group), record)   # type: ignore[arg-type]
        if fold is None:
            self._folds.pop(group, None)
        else:
            self._folds[group] = fold

    def flush(self) -> None:
        """Emit the groups whose writes were read (the end of a fetch ends every write in it), and
        book the share-partitions' progress."""
        for group in list(self._writing):
            self._written(group)
        if self._unbooked:
            self._book_shares()

    def _written(self, group: str) -> None:
        partition, _ = self._writing.pop(group)
        fold = self._folds.get(group)
        current = view(fold) if fold is not None else None
        if isinstance(current, ModernGroup):
            self._outcome(partition, group, state_from_modern(current, self._names))
        elif isinstance(current, GroupMetadata):
            self._outcome(partition, group, state_from_metadata(current))
        else:
            self._outcome(partition, group, None)

    def _outcome(self, partition: int, group: str, state: GroupState | None) -> None:
        if partition in self._at_end:
            self._emit(group, state)
        else:
            self._catching_up.setdefault(partition, {})[group] = state

    def _emit_outcomes(self, partition: int) -> None:
        for group, state in self._catching_up.pop(partition, {}).items():
            self._emit(group, state)

    def _emit(self, group: str, state: GroupState | None) -> None:
        if state is None:
            self._last.pop(group, None)
            self._modern.forget(group)
            if self._book.delete(group):
                self._emitter.delete(group)
            return
        self._book.revive(group)
        if self._last.get(group) == state:
            return
        self._last[group] = state
        if state.group_type == "classic":
            self._modern.forget(group)   # a downgrade: the poller describes it again
            self._emitter.upsert(state)
        else:
            self._modern.upsert(state)

    def _share_state(self, message: Message) -> None:
        """One record of a share-partition's state: the first offset whose delivery is not done is
        the share group's committed offset there, as far as lag is concerned."""
        try:
            record = decode_share_state(message.key(), message.value())
        except MalformedRecord as e:
            self._skip(message, "malformed", str(e))
            return
        if isinstance(record, UnknownRecord):
            self._unknown_record(message, "share_state_", record)
            return
        assert isinstance(record, ShareSnapshot | ShareUpdate | ShareStateTombstone)
        key = (record.group, record.topic_id, record.partition)
        progress = progress_after(self._shares.get(key), record)
        if progress is None:
            self._shares.pop(key, None)
        else:
            self._shares[key] = progress
        self._unbooked.add(key)

    def _book_shares(self) -> None:
        """Give the book the share-partitions' progress read since, by topic name: one whose topic's
        name is not known yet (a topic just created) waits for the next time."""
        named = self._names({topic_id for _, topic_id, _ in self._unbooked})
        for key in [k for k in self._unbooked if named[k[1]] != k[1]]:
            self._unbooked.discard(key)
            group, topic, partition = key[0], named[key[1]], key[2]
            progress = self._shares.get(key)
            done = delivered_to(progress) if progress is not None else None
            if done is None:   # deleted, or its start offset not chosen yet
                self._book.uncommit(group, (topic, partition))
            elif self._config.groups(group) and self._config.topics(topic):
                self._book.commit(group, (topic, partition), done)

    def _unknown_record(self, message: Message, kind: str, record: UnknownRecord) -> None:
        """A record type or version newer than this kmon: counted by type, said once."""
        seen = (message.topic(), record.key_version, record.value_version)
        self._emitter.telemetry.metric("kmon_collector_malformed_total", source=SOURCE,
                                       kind=f"unknown_{kind}record_{record.key_version}").inc()
        if seen not in self._unknown:
            self._unknown.add(seen)
            log.warning("%s partition %d offset %d: record type %d%s is unknown to this kmon: skipped (counted; "
                        "said once per type and version)", message.topic(), message.partition(), message.offset(),
                        record.key_version, "" if record.value_version is None else f" version {record.value_version}")

    def _skip(self, message: Message, kind: str, reason: str) -> None:
        self._emitter.telemetry.metric("kmon_collector_malformed_total", source=SOURCE, kind=kind).inc()
        log.warning("%s partition %d offset %d skipped: %s", message.topic(), message.partition(),
                    message.offset(), reason)
