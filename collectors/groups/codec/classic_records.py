"""Records of classic groups and committed offsets: types 0-2 of ``__consumer_offsets``.

* 0/1 OffsetCommitKey(group, topic, partition) -> OffsetCommitValue v0-4; type 0 is the
  legacy key of the same value, as the coordinator reads it.
* 2 GroupMetadataKey(group) -> GroupMetadataValue v0-4, a classic group after a rebalance step.

Versions 0-3 are non-flexible; version 4 of both (KIP-915) is flexible, and 4.1+ adds a
tagged topic id to OffsetCommitValue v4, skipped here.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.groups.codec.record_specs import GroupTombstone, GroupType, Key, RecordSpec, RecordType, string_key
from collectors.kafka_encoding import MalformedRecord, Reader

_MAX_VERSION = 4  # GroupMetadataValue and OffsetCommitValue alike
_FIRST_FLEXIBLE_VERSION = 4
_CONSUMER_PROTOCOL = "consumer"


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
class OffsetTombstone:
    """The committed offset of the group for this partition was deleted."""

    group: str
    topic: str
    partition: int


def _offset_key(reader: Reader) -> Key:
    return reader.string("group"), reader.string("topic"), reader.int32("partition")


def _offset_commit(key: Key, reader: Reader, version: int) -> OffsetCommit:
    offset = reader.int64("offset")
    leader_epoch = reader.int32("leader_epoch") if version >= 3 else -1
    metadata = reader.string("metadata")
    commit_timestamp = reader.int64("commit_timestamp")
    expire_timestamp = reader.int64("expire_timestamp") if version == 1 else -1
    reader.skip_tagged_fields("value")
    return OffsetCommit(
        group=key[0],
        topic=key[1],
        partition=key[2],
        version=version,
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp_ms=commit_timestamp,
        expire_timestamp_ms=expire_timestamp,
    )


def _group_metadata(key: Key, reader: Reader, version: int) -> GroupMetadata:
    protocol_type = reader.string("protocol_type")
    generation = reader.epoch("generation")
    protocol = reader.nullable_string("protocol")
    leader = reader.nullable_string("leader")
    state_timestamp = reader.int64("current_state_timestamp") if version >= 2 else -1
    members = reader.array("members", lambda r: _member(r, version, protocol_type))
    reader.skip_tagged_fields("value")
    return GroupMetadata(
        group=key[0],
        version=version,
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp_ms=state_timestamp,
        members=members,
    )


def _member(reader: Reader, version: int, protocol_type: str) -> GroupMember:
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


def _assigned_partitions(assignment: bytes) -> tuple[TopicPartition, ...]:
    """Topic-partitions of a ConsumerProtocolAssignment; () when it cannot be read."""
    if not assignment:  # members have no assignment until SyncGroup completes
        return ()
    reader = Reader(assignment, "ConsumerProtocolAssignment")
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


def _offset_spec() -> RecordSpec[OffsetCommit]:
    return RecordSpec(
        "OffsetCommit",
        _offset_key,
        lambda key: OffsetTombstone(*key),
        (_offset_commit,),
        _MAX_VERSION,
        _FIRST_FLEXIBLE_VERSION,
    )


CLASSIC_SPECS: dict[int, RecordSpec] = {
    RecordType.LEGACY_OFFSET_COMMIT: _offset_spec(),
    RecordType.OFFSET_COMMIT: _offset_spec(),
    RecordType.GROUP_METADATA: RecordSpec(
        "GroupMetadata",
        string_key("group"),
        lambda key: GroupTombstone(key[0], GroupType.CLASSIC),
        (_group_metadata,),
        _MAX_VERSION,
        _FIRST_FLEXIBLE_VERSION,
    ),
}
