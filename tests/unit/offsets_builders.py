"""Encoders of ``__consumer_offsets`` and ``__share_group_state`` records, for the group
collector's tests, byte by byte.

Written from Kafka's schemas (group-coordinator/ and share-coordinator/
src/main/resources/common/message/*.json of the 4.3 line, and of 3.7 and 4.0 for their
early-access layouts), independently of the decoders under test: a decoder reading a field
in the wrong place or width fails here. Every key is ``int16 record type`` + its fields
(never flexible); every value ``int16 version`` + its fields, flexible from v0 for the group
and share-state records (compact lengths, tagged fields ending every struct) and from v4 for
the classic ones.

Also sample classic records (sample_offset, sample_group, all_valid_records) and
decode_or_malformed, what a decoder makes of any bytes, for the decoders' fuzz tests.
"""

from __future__ import annotations

import struct
import uuid
from typing import Callable, Sequence, TypeVar, get_args

from collectors.groups.codec.offsets_codec import (
    ConsumerGroupMember,
    ConsumerGroupMetadata,
    CurrentAssignment,
    GroupMember,
    GroupMetadata,
    GroupTombstone,
    GroupTopicMetadata,
    GroupType,
    OffsetCommit,
    Record,
    ResolvedRegularExpression,
    ShareGroupMember,
    ShareGroupMetadata,
    ShareGroupStatePartitions,
    ShareStateTopic,
    StreamsCurrentAssignment,
    StreamsGroupMember,
    StreamsGroupMetadata,
    StreamsResolvedTopicIds,
    StreamsTargetAssignment,
    StreamsTasks,
    StreamsTopology,
    SubRecord,
    SubRecordTombstone,
    SubtopologyTasks,
    TargetAssignment,
    TargetAssignmentMetadata,
    TopicPartition,
    TopicPartitions,
    decode_record,
)
from collectors.groups.codec.share_state_codec import ShareSnapshot, ShareUpdate, StateBatch
from collectors.kafka_encoding import MalformedRecord

T = TypeVar("T")

EARLY_ACCESS = "early access"  # 3.7's consumer-group layouts, 4.0's share-group and share-state ones
CURRENT = "current"  # 4.3's


class Writer:
    """Kafka's generated-message encoding; `flexible` selects compact lengths + tags."""

    def __init__(self, flexible: bool = False) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def int8(self, v: int) -> Writer:
        self.buf += struct.pack(">b", v)
        return self

    def int16(self, v: int) -> Writer:
        self.buf += struct.pack(">h", v)
        return self

    def uint16(self, v: int) -> Writer:
        self.buf += struct.pack(">H", v)
        return self

    def int32(self, v: int) -> Writer:
        self.buf += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> Writer:
        self.buf += struct.pack(">q", v)
        return self

    def uuid(self, u: str) -> Writer:
        self.buf += uuid.UUID(u).bytes
        return self

    def uvarint(self, v: int) -> Writer:
        while v >= 0x80:
            self.buf.append(v & 0x7F | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def _length(self, n: int | None, wide: bool) -> None:
        if self.flexible:
            self.uvarint(0 if n is None else n + 1)
        elif wide:
            self.int32(-1 if n is None else n)
        else:
            self.int16(-1 if n is None else n)

    def string(self, s: str | None) -> Writer:
        raw = None if s is None else s.encode()
        self._length(None if raw is None else len(raw), wide=False)
        self.buf += raw or b""
        return self

    def blob(self, b: bytes | None) -> Writer:
        self._length(None if b is None else len(b), wide=True)
        self.buf += b or b""
        return self

    def array(self, n: int | None) -> Writer:
        self._length(n, wide=True)
        return self

    def each(self, items: Sequence[T], write: Callable[[Writer, T], object]) -> Writer:
        """An array: its length, then every item."""
        self.array(len(items))
        for item in items:
            write(self, item)
        return self

    def strings(self, items: Sequence[str]) -> Writer:
        return self.each(items, Writer.string)

    def int32s(self, items: Sequence[int]) -> Writer:
        return self.each(items, Writer.int32)

    def tags(self, tagged: dict[int, bytes] | None = None) -> Writer:
        if self.flexible:
            tagged = tagged or {}
            self.uvarint(len(tagged))
            for tag, data in sorted(tagged.items()):
                self.uvarint(tag).uvarint(len(data))
                self.buf += data
        return self

    def done(self) -> bytes:
        return bytes(self.buf)


def flexible() -> Writer:
    return Writer(flexible=True)


# --- classic records: types 0-2 --------------------------------------------------------


def offset_key(group: str, topic: str, partition: int, key_version: int = 1) -> bytes:
    return Writer().int16(key_version).string(group).string(topic).int32(partition).done()


def group_key(group: str) -> bytes:
    return Writer().int16(2).string(group).done()


def offset_value(r: OffsetCommit, tagged: dict[int, bytes] | None = None) -> bytes:
    w = Writer(flexible=r.version >= 4).int16(r.version).int64(r.offset)
    if r.version >= 3:
        w.int32(r.leader_epoch)
    w.string(r.metadata).int64(r.commit_timestamp_ms)
    if r.version == 1:
        w.int64(r.expire_timestamp_ms)
    return w.tags(tagged).done()


def group_value(r: GroupMetadata) -> bytes:
    w = Writer(flexible=r.version >= 4).int16(r.version)
    w.string(r.protocol_type).int32(r.generation).string(r.protocol).string(r.leader)
    if r.version >= 2:
        w.int64(r.current_state_timestamp_ms)
    w.array(len(r.members))
    for m in r.members:
        w.string(m.member_id)
        if r.version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id).string(m.client_host)
        if r.version >= 1:
            w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms).blob(m.subscription).blob(m.assignment).tags()
    return w.tags().done()


def assignment(
    partitions: dict[str, list[int]], version: int = 0, user_data: bytes | None = None
) -> bytes:
    w = Writer().int16(version).array(len(partitions))
    for topic, ps in partitions.items():
        w.string(topic).int32s(ps)
    return w.blob(user_data).done()


# --- modern group records: types 3-24 ---------------------------------------------------

TYPES = {  # (group type, part) -> record type, from each schema's apiKey
    (GroupType.CONSUMER, "metadata"): 3,
    (GroupType.CONSUMER, "topics"): 4,
    (GroupType.CONSUMER, "member"): 5,
    (GroupType.CONSUMER, "target metadata"): 6,
    (GroupType.CONSUMER, "target"): 7,
    (GroupType.CONSUMER, "current"): 8,
    (GroupType.SHARE, "topics"): 9,
    (GroupType.SHARE, "member"): 10,
    (GroupType.SHARE, "metadata"): 11,
    (GroupType.SHARE, "target metadata"): 12,
    (GroupType.SHARE, "target"): 13,
    (GroupType.SHARE, "current"): 14,
    (GroupType.SHARE, "state partitions"): 15,
    (GroupType.CONSUMER, "regex"): 16,
    (GroupType.STREAMS, "metadata"): 17,
    (GroupType.STREAMS, "topics"): 18,
    (GroupType.STREAMS, "member"): 19,
    (GroupType.STREAMS, "target metadata"): 20,
    (GroupType.STREAMS, "target"): 21,
    (GroupType.STREAMS, "current"): 22,
    (GroupType.STREAMS, "topology"): 23,
    (GroupType.STREAMS, "resolved topic ids"): 24,
}


def key(record_type: int, *fields: str) -> bytes:
    w = Writer().int16(record_type)
    for field in fields:
        w.string(field)
    return w.done()


# a tombstone's part -> the TYPES part its key is of
_TOMBSTONED = {SubRecord.TOPIC_METADATA: "topics", SubRecord.MEMBER: "member",
               SubRecord.TARGET_ASSIGNMENT_METADATA: "target metadata", SubRecord.TARGET_ASSIGNMENT: "target",
               SubRecord.CURRENT_ASSIGNMENT: "current", SubRecord.SHARE_STATE_PARTITIONS: "state partitions",
               SubRecord.REGULAR_EXPRESSION: "regex", SubRecord.TOPOLOGY: "topology",
               SubRecord.RESOLVED_TOPIC_IDS: "resolved topic ids"}


def tombstone(record: GroupTombstone | SubRecordTombstone) -> tuple[bytes, None]:
    """Key and (no) value of a modern group's tombstone."""
    if isinstance(record, GroupTombstone):
        return key(TYPES[record.group_type, "metadata"], record.group), None
    part = TYPES[record.group_type, _TOMBSTONED[record.sub_record]]
    return key(part, record.group, *filter(None, (record.member_id, record.regex))), None


def tag_int32(v: int) -> bytes:
    return struct.pack(">i", v)


def tag_int64(v: int) -> bytes:
    return struct.pack(">q", v)


def encode(record: object, layout: str = CURRENT, tags: dict[int, bytes] | None = None) -> tuple[bytes, bytes]:
    """Key and value of a modern group record; `tags` are added to the value's own."""
    early = layout == EARLY_ACCESS
    w = flexible().int16(0)
    extra = dict(tags or {})
    match record:
        case ConsumerGroupMetadata(group=g, epoch=epoch, metadata_hash=h):
            k = key(3, g)
            w.int32(epoch)
            if h:
                extra[0] = tag_int64(h)
        case GroupTopicMetadata(group=g, group_type=t, topics=topics):
            k = key(TYPES[t, "topics"], g)
            if early:
                w.int32(7)  # 3.7's group epoch
            for_streams = t is GroupType.STREAMS
            w.each(topics, lambda w, tm: _topic_metadata(w, tm, racks=not for_streams))
        case ConsumerGroupMember() as m:
            k = key(5, m.group, m.member_id)
            w.string(m.instance_id).string(m.rack_id).string(m.client_id).string(m.client_host)
            w.strings(m.subscribed_topic_names).string(m.subscribed_topic_regex)
            w.int32(m.rebalance_timeout_ms).string(m.server_assignor)
            if early:
                w.each(["uniform"], _client_assignor)
            if m.classic_protocol is not None:
                c = flexible().uvarint(1).int32(m.classic_protocol.session_timeout_ms)
                c.each(m.classic_protocol.protocols, lambda w, name: w.string(name).blob(b"\x00\x03meta").tags())
                extra[0] = c.tags().done()
        case TargetAssignmentMetadata(group=g, group_type=t, assignment_epoch=epoch, assignment_timestamp_ms=ts):
            k = key(TYPES[t, "target metadata"], g)
            w.int32(epoch)
            if ts:
                extra[0] = tag_int64(ts)
        case TargetAssignment(group=g, group_type=t, member_id=m, partitions=ps):
            k = key(TYPES[t, "target"], g, m)
            if early:
                w.int8(0)  # 3.7's error
            w.each(ps, _topic_partitions)
            if early:
                w.int16(1).blob(b"assignor metadata")
        case CurrentAssignment() as a:
            k = key(TYPES[a.group_type, "current"], a.group, a.member_id)
            w.int32(a.member_epoch).int32(a.previous_member_epoch)
            if early:
                w.int32(a.member_epoch)  # 3.7's target member epoch
            else:
                w.int8(a.state if a.state is not None else 0)
            epochs = not early  # 4.3 adds each partition's assignment epoch (KIP-1251) as a tag
            w.each(a.assigned_partitions, lambda w, tp: _topic_partitions(w, tp, epochs))
            if a.group_type is GroupType.CONSUMER:
                w.each(a.partitions_pending_revocation, lambda w, tp: _topic_partitions(w, tp, epochs))
            if early:
                w.each([], _topic_partitions).int8(0).int16(0).blob(b"")  # pending assignment, error, metadata
        case ResolvedRegularExpression(group=g, regex=regex, topics=topics, version=v, timestamp_ms=ts):
            k = key(16, g, regex)
            w.strings(topics).int64(v).int64(ts)
        case ShareGroupMember() as m:
            k = key(10, m.group, m.member_id)
            w.string(m.rack_id).string(m.client_id).string(m.client_host).strings(m.subscribed_topic_names)
        case ShareGroupMetadata(group=g, epoch=epoch, metadata_hash=h):
            k = key(11, g)
            w.int32(epoch)
            if not early:
                w.int64(h)
        case ShareGroupStatePartitions() as s:
            k = key(15, s.group)
            if not early:
                w.each(s.initializing, _share_topic)
            w.each(s.initialized, _share_topic)
            w.each(s.deleting, lambda w, t: w.uuid(t.topic_id).string(t.topic_name).tags())
        case StreamsGroupMetadata(group=g, epoch=epoch, metadata_hash=h, validated_topology_epoch=validated):
            k = key(17, g)
            w.int32(epoch).int64(h)
            if validated != -1:
                extra[0] = tag_int32(validated)
            # tag 1: the last assignment configs, a nullable array
            extra[1] = flexible().each([("num.standby.replicas", "1")], _key_value).done()
        case StreamsGroupMember() as m:
            k = key(19, m.group, m.member_id)
            w.string(m.instance_id).string(m.rack_id).string(m.client_id).string(m.client_host)
            w.int32(m.rebalance_timeout_ms).int32(m.topology_epoch).string(m.process_id)
            if m.user_endpoint is None:
                w.int8(-1)
            else:
                w.int8(1).string(m.user_endpoint.host).uint16(m.user_endpoint.port).tags()
            w.each(m.client_tags, _key_value)
        case StreamsTargetAssignment(group=g, member_id=m, tasks=tasks):
            k = key(21, g, m)
            _task_lists(w, tasks)
        case StreamsCurrentAssignment() as a:
            k = key(22, a.group, a.member_id)
            w.int32(a.member_epoch).int32(a.previous_member_epoch).int8(a.state)
            _task_lists(w, a.assigned)
            _task_lists(w, a.pending_revocation)
        case StreamsTopology(group=g, epoch=epoch, subtopologies=subs):
            k = key(23, g)
            w.int32(epoch).each(subs, _subtopology)
        case StreamsResolvedTopicIds(group=g, assignment_epoch=epoch, subtopologies=subs):
            k = key(24, g)
            w.int32(epoch).each(subs, lambda w, s: w.string(s.subtopology_id).each(s.topic_ids, Writer.uuid).tags())
        case _:
            raise TypeError(f"no encoder for {record!r}")
    return k, w.tags(extra).done()


def _topic_metadata(w: Writer, t: object, racks: bool) -> None:
    w.uuid(t.topic_id).string(t.name).int32(t.partition_count)
    if racks:  # one partition's racks, which the decoder skips
        w.array(1).int32(0).strings(["rack-a", "rack-b"]).tags()
    w.tags()


def _client_assignor(w: Writer, name: str) -> None:
    w.string(name).int16(0).int16(1).int8(0).int16(1).blob(b"").tags()


def _topic_partitions(w: Writer, tp: TopicPartitions, assignment_epochs: bool = False) -> None:
    w.uuid(tp.topic_id).int32s(tp.partitions)
    # the tagged nullable array of each partition's assignment epoch (4.3)
    w.tags({0: flexible().int32s([3] * len(tp.partitions)).done()} if assignment_epochs else None)


def _share_topic(w: Writer, t: ShareStateTopic) -> None:
    w.uuid(t.topic_id).string(t.topic_name).int32s(t.partitions).tags()


def _key_value(w: Writer, pair: tuple[str, str]) -> None:
    w.string(pair[0]).string(pair[1]).tags()


def _tasks(w: Writer, t: SubtopologyTasks) -> None:
    w.string(t.subtopology_id).int32s(t.partitions).tags()


def _task_lists(w: Writer, tasks: StreamsTasks) -> None:
    for kind in (tasks.active, tasks.standby, tasks.warmup):
        w.each(kind, _tasks)


def _subtopology(w: Writer, s: object) -> None:
    w.string(s.subtopology_id).strings(s.source_topics).strings(s.source_topic_regex)
    w.each(s.state_changelog_topics, _topic_info)
    w.strings(s.repartition_sink_topics)
    w.each(s.repartition_source_topics, _topic_info)
    # one copartition group of the first two source topics (indexes), skipped by the decoder
    w.array(1).each([0, 1], Writer.int16).each([], Writer.int16).each([], Writer.int16).tags()
    w.tags()


def _topic_info(w: Writer, name: str) -> None:
    w.string(name).int32(0).int16(3).each([("cleanup.policy", "compact")], _key_value).tags()


# --- __share_group_state records: types 0-1 ---------------------------------------------


def share_state_key(record_type: int, group: str, topic_id: str, partition: int) -> bytes:
    return Writer().int16(record_type).string(group).uuid(topic_id).int32(partition).done()


def encode_share_state(
    record: ShareSnapshot | ShareUpdate, layout: str = CURRENT, tags: dict[int, bytes] | None = None
) -> tuple[bytes, bytes]:
    """Key and value of a ShareSnapshot (type 0) or ShareUpdate (1); 4.0's early-access layout
    has a uint16 snapshot epoch and no timestamps. `tags` are added to the value's own."""
    early = layout == EARLY_ACCESS
    snapshot = isinstance(record, ShareSnapshot)
    k = share_state_key(0 if snapshot else 1, record.group, record.topic_id, record.partition)
    w = flexible().int16(0)
    w.uint16(record.snapshot_epoch) if early else w.int32(record.snapshot_epoch)
    if snapshot:
        w.int32(record.state_epoch)
    w.int32(record.leader_epoch).int64(record.start_offset)
    if snapshot and not early:
        w.int64(record.create_timestamp_ms).int64(record.write_timestamp_ms)
    w.each(record.state_batches, _state_batch)
    extra = dict(tags or {})
    if record.delivery_complete_count != -1:  # 4.2's tag 0, default -1
        extra[0] = tag_int32(record.delivery_complete_count)
    return k, w.tags(extra).done()


def _state_batch(w: Writer, b: StateBatch) -> None:
    w.int64(b.first_offset).int64(b.last_offset).int8(b.delivery_state).int16(b.delivery_count).tags()


# --- sample classic records, and what a decoder makes of bytes ----------------------------


def sample_offset(version: int) -> OffsetCommit:
    return OffsetCommit(
        group="orders-app",
        topic="orders",
        partition=7,
        version=version,
        offset=123_456_789_012,
        leader_epoch=12 if version >= 3 else -1,
        metadata="committed by ünïcode client",
        commit_timestamp_ms=1_700_000_000_123,
        expire_timestamp_ms=1_700_086_400_123 if version == 1 else -1,
    )


def sample_member(version: int, n: int, assigned: dict[str, list[int]]) -> GroupMember:
    session = 45_000
    raw = assignment(assigned, user_data=b"\x00\x01")
    return GroupMember(
        member_id=f"consumer-{n}-5f0c",
        group_instance_id=f"static-{n}" if version >= 3 and n % 2 else None,
        client_id=f"consumer-{n}",
        client_host=f"/10.0.0.{n}",
        rebalance_timeout_ms=300_000 if version >= 1 else session,
        session_timeout_ms=session,
        subscription=b"\x00\x01subscription",
        assignment=raw,
        assigned_partitions=tuple(TopicPartition(t, p) for t, ps in assigned.items() for p in ps),
    )


def sample_group(version: int) -> GroupMetadata:
    members = (
        sample_member(version, 1, {"orders": [0, 1], "payments": [2]}),
        sample_member(version, 2, {"orders": [2]}),
        sample_member(version, 3, {}),
    )
    return GroupMetadata(
        group="orders-app",
        version=version,
        protocol_type="consumer",
        generation=42,
        protocol="cooperative-sticky",
        leader=members[0].member_id,
        current_state_timestamp_ms=1_700_000_000_000 if version >= 2 else -1,
        members=members,
    )


def all_valid_records() -> list[tuple[bytes, bytes]]:
    records = [encode(ConsumerGroupMetadata("kip848", 9, 99))]
    for v in range(5):
        records.append((offset_key("orders-app", "orders", 7), offset_value(sample_offset(v))))
        records.append((group_key("orders-app"), group_value(sample_group(v))))
    return records


def decode_or_malformed(
    key: bytes | None,
    value: bytes | None,
    decoder: Callable[[bytes | None, bytes | None], object] = decode_record,
    records: object = Record,
) -> object:
    """What `decoder` makes of the bytes: one of `records` (a union), or the MalformedRecord."""
    try:
        record = decoder(key, value)
    except MalformedRecord as error:
        return error
    assert isinstance(record, get_args(records))
    return record
