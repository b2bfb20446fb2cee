"""Record shapes that consumer (KIP-848) and share (KIP-932) groups have in common, with
one value version each (v0, flexible): topic metadata, target assignment metadata, a
member's target and current assignment. Partitions are named by topic id, as the records
name them (a topic's name comes from the cluster's metadata).
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.groups.codec.record_specs import GroupType, Key, Layout
from collectors.kafka_encoding import Reader, tagged


@dataclass(frozen=True)
class TopicPartitions:
    topic_id: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: str
    name: str
    partition_count: int


@dataclass(frozen=True)
class GroupTopicMetadata:
    """The subscribed topics a group's assignment was computed from (types 4, 9, 18).
    Replaced in 4.1 by a hash in the group's metadata (KIP-1101): 4.1+ only deletes them."""

    group: str
    group_type: GroupType
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True)
class TargetAssignmentMetadata:
    """The epoch of the group's target assignment (types 6, 12, 20)."""

    group: str
    group_type: GroupType
    assignment_epoch: int
    assignment_timestamp_ms: int  # 4.3+ (KIP-1263); 0 before, as Kafka's default


@dataclass(frozen=True)
class TargetAssignment:
    """The partitions the assignor gave one member: what it reconciles towards (7, 13)."""

    group: str
    group_type: GroupType
    member_id: str
    partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class CurrentAssignment:
    """A member's epoch and the partitions it owns now (types 8, 14)."""

    group: str
    group_type: GroupType
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int | None  # Kafka's MemberState byte; None in 3.7's layout, which has none
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]  # always () for share groups


def topic_partitions(reader: Reader) -> TopicPartitions:
    topic_id = reader.uuid("topic_id")
    partitions = reader.int32s("partitions")
    reader.skip_tagged_fields("topic partitions")  # 4.3's assignment epochs (KIP-1251)
    return TopicPartitions(topic_id, partitions)


def topic_metadata(reader: Reader, with_racks: bool = True) -> TopicMetadata:
    topic = TopicMetadata(
        reader.uuid("topic_id"), reader.string("topic_name"), reader.int32("num_partitions")
    )
    if with_racks:  # partition racks: unused since 4.0, still in the schema
        reader.array("partition_metadata", _partition_racks)
    reader.skip_tagged_fields("topic metadata")
    return topic


def _partition_racks(reader: Reader) -> None:
    reader.int32("partition")
    reader.strings("racks")
    reader.skip_tagged_fields("partition metadata")


def group_topic_metadata(
    group_type: GroupType, with_epoch: bool = False, with_racks: bool = True
) -> Layout[GroupTopicMetadata]:
    """Layout of a topic metadata value; 3.7's began with the group epoch (removed in 3.8)."""

    def layout(key: Key, reader: Reader, _version: int) -> GroupTopicMetadata:
        if with_epoch:
            reader.int32("epoch")
        topics = reader.array("topics", lambda r: topic_metadata(r, with_racks))
        reader.skip_tagged_fields("value")
        return GroupTopicMetadata(key[0], group_type, topics)

    return layout


def target_assignment_metadata(group_type: GroupType) -> Layout[TargetAssignmentMetadata]:
    def layout(key: Key, reader: Reader, _version: int) -> TargetAssignmentMetadata:
        epoch = reader.epoch("assignment_epoch")
        timestamp = tagged(reader.tagged_fields("value"), 0, lambda r: r.int64("assignment_timestamp"), 0)
        return TargetAssignmentMetadata(key[0], group_type, epoch, timestamp)

    return layout


def target_assignment(group_type: GroupType, early_access: bool = False) -> Layout[TargetAssignment]:
    """Layout of a member's target assignment; 3.7's had an error and assignor metadata around
    the partitions (removed in 3.8)."""

    def layout(key: Key, reader: Reader, _version: int) -> TargetAssignment:
        if early_access:
            reader.int8("error")
        partitions = reader.array("topic_partitions", topic_partitions)
        if early_access:
            reader.int16("metadata_version")
            reader.blob("metadata_bytes")
        reader.skip_tagged_fields("value")
        return TargetAssignment(key[0], group_type, key[1], partitions)

    return layout


def current_assignment(group_type: GroupType, with_revocation: bool = True) -> Layout[CurrentAssignment]:
    """Layout of a member's current assignment (3.8+ for consumer groups, 4.0+ for share)."""

    def layout(key: Key, reader: Reader, _version: int) -> CurrentAssignment:
        epoch, previous = reader.member_epoch("member_epoch"), reader.member_epoch("previous_member_epoch")
        state = reader.int8("state")
        assigned = reader.array("assigned_partitions", topic_partitions)
        pending = reader.array("partitions_pending_revocation", topic_partitions) if with_revocation else ()
        reader.skip_tagged_fields("value")
        return CurrentAssignment(key[0], group_type, key[1], epoch, previous, state, assigned, pending)

    return layout
