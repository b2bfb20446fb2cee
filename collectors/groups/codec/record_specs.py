"""What every coordinator record type shares (``__consumer_offsets``'s and
``__share_group_state``'s): its number, the kind of group it belongs to, its tombstones, how
its key and value are read, and :func:`decode_by_spec`, which reads any of them by a table of specs.

The key starts with an int16 record type (Kafka's ``CoordinatorRecordType``, once called the
key "version"), then the key's fields; the value starts with an int16 version. One value
version can have several layouts when Kafka changed an early-access schema without bumping
its version (KIP-848's in 3.7, KIP-932's in 4.0): they are tried newest first, and the
record is malformed only when none reads every byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum, StrEnum
from typing import Any, Callable, Generic, Mapping, TypeVar

from collectors.kafka_encoding import MalformedRecord, Reader

R = TypeVar("R")
Key = tuple[Any, ...]  # the key's fields after its type, in schema order


class RecordType(IntEnum):
    """Kafka's CoordinatorRecordType, from each schema's apiKey (group-coordinator, 4.3)."""

    LEGACY_OFFSET_COMMIT = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_PARTITION_METADATA = 4
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    SHARE_GROUP_PARTITION_METADATA = 9
    SHARE_GROUP_MEMBER_METADATA = 10
    SHARE_GROUP_METADATA = 11
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
    SHARE_GROUP_STATE_PARTITION_METADATA = 15
    CONSUMER_GROUP_REGULAR_EXPRESSION = 16
    STREAMS_GROUP_METADATA = 17
    STREAMS_GROUP_PARTITION_METADATA = 18
    STREAMS_GROUP_MEMBER_METADATA = 19
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
    STREAMS_GROUP_TOPOLOGY = 23
    STREAMS_GROUP_TARGET_ASSIGNMENT_RESOLVED_TOPIC_IDS = 24


@dataclass(frozen=True)
class UnknownRecord:
    """A record type, or a value version of a known one, newer than this decoder."""

    key_version: int  # the record type
    value_version: int | None  # None for a tombstone, which has no value


class GroupType(StrEnum):
    CLASSIC = "classic"
    CONSUMER = "consumer"  # KIP-848
    SHARE = "share"  # KIP-932
    STREAMS = "streams"  # KIP-1071


class SubRecord(Enum):
    """The parts of a modern group that have records of their own besides its metadata."""

    TOPIC_METADATA = "topic metadata"  # 4, 9, 18: retired in 4.1 for a metadata hash
    MEMBER = "member metadata"  # 5, 10, 19
    TARGET_ASSIGNMENT_METADATA = "target assignment metadata"  # 6, 12, 20
    TARGET_ASSIGNMENT = "member target assignment"  # 7, 13, 21
    CURRENT_ASSIGNMENT = "member current assignment"  # 8, 14, 22
    SHARE_STATE_PARTITIONS = "share state partitions"  # 15
    REGULAR_EXPRESSION = "regular expression"  # 16
    TOPOLOGY = "topology"  # 23
    RESOLVED_TOPIC_IDS = "resolved topic ids"  # 24


@dataclass(frozen=True)
class GroupTombstone:
    """The group was deleted (its metadata record's tombstone): classic or modern."""

    group: str
    group_type: GroupType


@dataclass(frozen=True)
class SubRecordTombstone:
    """One part of a modern group was deleted: a member's (member_id), a regular
    expression's (regex), or the group's own (neither)."""

    group: str
    group_type: GroupType
    sub_record: SubRecord
    member_id: str | None = None
    regex: str | None = None


Layout = Callable[[Key, Reader, int], R]


@dataclass(frozen=True)
class RecordSpec(Generic[R]):
    """How to read one record type: ``name`` is Kafka's, without Key/Value."""

    name: str
    read_key: Callable[[Reader], Key]
    tombstone: Callable[[Key], object]
    layouts: tuple[Layout[R], ...]  # newest first
    max_version: int = 0
    first_flexible: int = 0

    def value(self, key: Key, value: bytes, version: int) -> R:
        """The value (whose version was checked) in the first layout that reads it whole."""
        first_error: MalformedRecord | None = None
        for layout in self.layouts:
            reader = Reader(value, f"{self.name}Value v{version}", version >= self.first_flexible)
            reader.int16("version")
            try:
                record = layout(key, reader, version)
                reader.end()
                return record
            except MalformedRecord as error:
                first_error = first_error or error
        assert first_error is not None  # every spec has a layout
        raise first_error


def decode_by_spec(specs: Mapping[int, RecordSpec], key: bytes | None, value: bytes | None) -> object:
    """One record by its type's spec; ``value=None`` is a tombstone. A type not in ``specs``,
    or a value version past its spec's, is an :class:`UnknownRecord`."""
    if key is None:
        raise MalformedRecord("record has no key")
    reader = Reader(key, "key")
    record_type = reader.int16("key version")
    if record_type < 0:
        raise MalformedRecord(f"key: negative key version {record_type}")
    spec = specs.get(record_type)
    if spec is None:
        return UnknownRecord(record_type, None if value is None else _value_version(value, "value"))
    reader.what = f"{spec.name}Key"
    fields = spec.read_key(reader)
    reader.end()
    if value is None:
        return spec.tombstone(fields)
    version = _value_version(value, f"{spec.name}Value")
    if version > spec.max_version:
        return UnknownRecord(record_type, version)
    return spec.value(fields, value, version)


def _value_version(value: bytes, what: str) -> int:
    version = Reader(value, what).int16("version")
    if version < 0:
        raise MalformedRecord(f"{what}: negative version {version}")
    return version


def string_key(*fields: str) -> Callable[[Reader], Key]:
    """A key of strings only (every group record's key but the offset commit's)."""
    return lambda reader: tuple(reader.string(field) for field in fields)


def group_spec(
    name: str,
    group_type: GroupType,
    layouts: tuple[Layout[R], ...],
    sub_record: SubRecord | None = None,
    key_fields: tuple[str, ...] = ("group_id",),
) -> RecordSpec[R]:
    """A modern group record; a key with a second field names the member (or the regex)."""

    def tombstone(key: Key) -> object:
        if sub_record is None:
            return GroupTombstone(key[0], group_type)
        if sub_record is SubRecord.REGULAR_EXPRESSION:
            return SubRecordTombstone(key[0], group_type, sub_record, regex=key[1])
        member_id = key[1] if len(key) > 1 else None
        return SubRecordTombstone(key[0], group_type, sub_record, member_id=member_id)

    return RecordSpec(name, string_key(*key_fields), tombstone, layouts)


MEMBER_KEY = ("group_id", "member_id")
