"""Decode records of Kafka's internal ``__consumer_offsets`` topic.

The wire format is Kafka's generated message format (big-endian), as written by
brokers 2.x-3.9 and read back by the group coordinator:

* key: ``int16`` record type (historically called the key "version"), then the key
  struct: 0/1 = OffsetCommitKey(group, topic, partition), 2 = GroupMetadataKey(group),
  3 = ConsumerGroupMetadataKey(group id) of KIP-848; higher types (KIP-848 member,
  assignment and partition records, share and streams groups) come back as
  :class:`UnknownRecord` for the caller to count.
* value: ``int16`` version, then the value struct, or no value at all (a tombstone:
  the group, or the committed offset, was deleted).

Versions 0-3 of GroupMetadataValue and OffsetCommitValue are non-flexible (int16-length
strings, int32-length bytes and arrays); version 4 of both (KIP-915) and every KIP-848
value are flexible (unsigned-varint "compact" lengths plus tagged fields).

:func:`decode_record` is the only entry point; on any bytes it returns a record or
raises :class:`MalformedRecord`, whose message says which field at which byte failed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "ConsumerGroupMetadata",
    "GroupMember",
    "GroupMetadata",
    "GroupTombstone",
    "MalformedRecord",
    "OffsetCommit",
    "OffsetTombstone",
    "Record",
    "TopicPartition",
    "UnknownRecord",
    "decode_record",
]

_GROUP_METADATA_MAX_VERSION = 4
_OFFSET_COMMIT_MAX_VERSION = 4
_FIRST_FLEXIBLE_VERSION = 4  # same for GroupMetadataValue and OffsetCommitValue
_CONSUMER_PROTOCOL = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class MalformedRecord(ValueError):
    """The bytes are not a valid __consumer_offsets record of a known version."""


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None  # static membership (v3+), None otherwise
    client_id: str
    client_host: str
    rebalance_timeout_ms: int  # v0 has none: the broker uses the session timeout
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes
    # Decoded from `assignment` for the "consumer" protocol; empty if it is another
    # protocol, not yet assigned, or undecodable (a best effort, never an error).
    assigned_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupMetadata:
    """A classic group's state after a rebalance step (GroupMetadataValue)."""

    group: str
    version: int
    protocol_type: str
    generation: int
    protocol: str | None  # the chosen assignor; None while the group is empty
    leader: str | None
    current_state_timestamp_ms: int  # -1 before v2, as Kafka's default
    members: tuple[GroupMember, ...]


@dataclass(frozen=True)
class OffsetCommit:
    group: str
    topic: str
    partition: int
    version: int
    offset: int
    leader_epoch: int  # -1 when unknown or before v3, as Kafka's default
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int  # only v1 carries it; -1 otherwise


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """A KIP-848 consumer group's epoch (ConsumerGroupMetadataValue)."""

    group: str
    epoch: int


@dataclass(frozen=True)
class GroupTombstone:
    """The group (classic or KIP-848) was deleted."""

    group: str


@dataclass(frozen=True)
class OffsetTombstone:
    """The committed offset of the group for this partition was deleted."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class UnknownRecord:
    """A record type this decoder does not interpret (KIP-848 details, share groups...)."""

    key_version: int


Record = (
    GroupMetadata
    | OffsetCommit
    | ConsumerGroupMetadata
    | GroupTombstone
    | OffsetTombstone
    | UnknownRecord
)


class _Reader:
    """Cursor over one struct's bytes; every read checks bounds before unpacking."""

    def __init__(self, data: bytes, what: str, flexible: bool = False) -> None:
        self._data = data
        self._pos = 0
        self.what = what
        self.flexible = flexible

    def fail(self, reason: str) -> MalformedRecord:
        return MalformedRecord(f"{self.what}: {reason}")

    def _take(self, n: int, field: str) -> bytes:
        if n > len(self._data) - self._pos:
            raise self.fail(f"truncated at byte {self._pos} reading {field}")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def int16(self, field: str) -> int:
        return _INT16.unpack(self._take(2, field))[0]

    def int32(self, field: str) -> int:
        return _INT32.unpack(self._take(4, field))[0]

    def int64(self, field: str) -> int:
        return _INT64.unpack(self._take(8, field))[0]

    def uvarint(self, field: str) -> int:
        # Kafka's unsigned varints hold 32-bit values: at most 5 bytes.
        value = 0
        for shift in range(0, 35, 7):
            byte = self._take(1, field)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise self.fail(f"varint longer than 5 bytes at byte {self._pos} reading {field}")

    def _length(self, field: str, wide: bool) -> int | None:
        """A length prefix; None encodes null (-1, or 0 in compact form)."""
        start = self._pos
        if self.flexible:
            length = self.uvarint(field) - 1
        else:
            length = self.int32(field) if wide else self.int16(field)
        if length == -1:
            return None
        if length < 0:
            raise self.fail(f"negative length {length} at byte {start} reading {field}")
        return length

    def _non_null(self, length: int | None, field: str) -> int:
        if length is None:
            raise self.fail(f"null {field} at byte {self._pos}")
        return length

    def nullable_string(self, field: str) -> str | None:
        length = self._length(field, wide=False)
        if length is None:
            return None
        start = self._pos
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"invalid UTF-8 at byte {start} reading {field}") from None

    def string(self, field: str) -> str:
        value = self.nullable_string(field)
        if value is None:
            raise self.fail(f"null {field} at byte {self._pos}")
        return value

    def blob(self, field: str) -> bytes:
        return self._take(self._non_null(self._length(field, wide=True), field), field)

    def nullable_blob(self, field: str) -> bytes | None:
        length = self._length(field, wide=True)
        return None if length is None else self._take(length, field)

    def array_length(self, field: str) -> int:
        start = self._pos
        count = self._non_null(self._length(field, wide=True), field)
        # Every element takes at least one byte: rejects absurd counts before looping.
        if count > len(self._data) - self._pos:
            raise self.fail(f"{field} count {count} at byte {start} exceeds the record")
        return count

    def skip_tagged_fields(self, field: str) -> None:
        """Skip a flexible struct's tagged fields: this decoder needs none of them."""
        if not self.flexible:
            return
        for _ in range(self.uvarint(f"{field} tag count")):
            self.uvarint(f"{field} tag")
            self._take(self.uvarint(f"{field} tag size"), f"{field} tagged field")

    def end(self) -> None:
        if self._pos != len(self._data):
            extra = len(self._data) - self._pos
            raise self.fail(f"{extra} trailing bytes at byte {self._pos}")


def decode_record(key: bytes | None, value: bytes | None) -> Record:
    """Decode one ``__consumer_offsets`` record; ``value=None`` is a tombstone."""
    if key is None:
        raise MalformedRecord("record has no key")
    reader = _Reader(key, "key")
    key_version = reader.int16("key version")
    if key_version in (0, 1):
        return _decode_offset_record(reader, value)
    if key_version == 2:
        return _decode_group_record(reader, value)
    if key_version == 3:
        return _decode_consumer_group_record(reader, value)
    if key_version < 0:
        raise MalformedRecord(f"key: negative key version {key_version}")
    return UnknownRecord(key_version)


def _decode_offset_record(key: _Reader, value: bytes | None) -> OffsetCommit | OffsetTombstone:
    key.what = "OffsetCommitKey"
    group, topic = key.string("group"), key.string("topic")
    partition = key.int32("partition")
    key.end()
    if value is None:
        return OffsetTombstone(group, topic, partition)
    reader, version = _value_reader(value, "OffsetCommitValue", _OFFSET_COMMIT_MAX_VERSION)
    offset = reader.int64("offset")
    leader_epoch = reader.int32("leader_epoch") if version >= 3 else -1
    metadata = reader.string("metadata")
    commit_timestamp = reader.int64("commit_timestamp")
    expire_timestamp = reader.int64("expire_timestamp") if version == 1 else -1
    reader.skip_tagged_fields("value")
    reader.end()
    return OffsetCommit(
        group=group,
        topic=topic,
        partition=partition,
        version=version,
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp_ms=commit_timestamp,
        expire_timestamp_ms=expire_timestamp,
    )


def _decode_group_record(key: _Reader, value: bytes | None) -> GroupMetadata | GroupTombstone:
    key.what = "GroupMetadataKey"
    group = key.string("group")
    key.end()
    if value is None:
        return GroupTombstone(group)
    reader, version = _value_reader(value, "GroupMetadataValue", _GROUP_METADATA_MAX_VERSION)
    protocol_type = reader.string("protocol_type")
    generation = reader.int32("generation")
    protocol = reader.nullable_string("protocol")
    leader = reader.nullable_string("leader")
    state_timestamp = reader.int64("current_state_timestamp") if version >= 2 else -1
    count = reader.array_length("members")
    members = tuple(_read_member(reader, version, protocol_type) for _ in range(count))
    reader.skip_tagged_fields("value")
    reader.end()
    return GroupMetadata(
        group=group,
        version=version,
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp_ms=state_timestamp,
        members=members,
    )


def _read_member(reader: _Reader, version: int, protocol_type: str) -> GroupMember:
    member_id = reader.string("member member_id")
    instance_id = reader.nullable_string("member group_instance_id") if version >= 3 else None
    client_id = reader.string("member client_id")
    client_host = reader.string("member client_host")
    rebalance_timeout = reader.int32("member rebalance_timeout") if version >= 1 else None
    session_timeout = reader.int32("member session_timeout")
    subscription = reader.blob("member subscription")
    assignment = reader.blob("member assignment")
    reader.skip_tagged_fields("member")
    partitions = _assigned_partitions(assignment) if protocol_type == _CONSUMER_PROTOCOL else ()
    return GroupMember(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=session_timeout if rebalance_timeout is None else rebalance_timeout,
        session_timeout_ms=session_timeout,
        subscription=subscription,
        assignment=assignment,
        assigned_partitions=partitions,
    )


def _decode_consumer_group_record(
    key: _Reader, value: bytes | None
) -> ConsumerGroupMetadata | GroupTombstone:
    key.what = "ConsumerGroupMetadataKey"
    group = key.string("group_id")
    key.end()
    if value is None:
        return GroupTombstone(group)
    reader, _ = _value_reader(value, "ConsumerGroupMetadataValue", 0, first_flexible=0)
    epoch = reader.int32("epoch")
    reader.skip_tagged_fields("value")  # MetadataHash (4.1+) and later additions
    reader.end()
    return ConsumerGroupMetadata(group, epoch)


def _value_reader(
    value: bytes, name: str, max_version: int, first_flexible: int = _FIRST_FLEXIBLE_VERSION
) -> tuple[_Reader, int]:
    reader = _Reader(value, name)
    version = reader.int16("version")
    if not 0 <= version <= max_version:
        raise reader.fail(f"unknown version {version}")
    reader.what = f"{name} v{version}"
    reader.flexible = version >= first_flexible
    return reader, version


def _assigned_partitions(assignment: bytes) -> tuple[TopicPartition, ...]:
    """Topic-partitions of a ConsumerProtocolAssignment; () when it cannot be read."""
    if not assignment:  # members have no assignment until SyncGroup completes
        return ()
    reader = _Reader(assignment, "ConsumerProtocolAssignment")
    try:
        # Every version (0-2 so far, newer ones promised compatible) starts with the
        # v0 fields, so any non-negative version is read as v0 and the rest ignored,
        # as Kafka's own consumer does.
        if reader.int16("version") < 0:
            return ()
        result: list[TopicPartition] = []
        for _ in range(reader.array_length("assigned_partitions")):
            topic = reader.string("topic")
            count = reader.array_length("partitions")
            result.extend(TopicPartition(topic, reader.int32("partition")) for _ in range(count))
        reader.nullable_blob("user_data")
    except MalformedRecord:
        return ()
    return tuple(result)
