"""Records of KIP-848 consumer groups: types 3-8 and 16, value v0 (flexible) each.

Kafka 3.7 wrote them as an early-access preview whose v0 layouts of types 4, 5, 7 and 8
differ from 3.8's (which 3.8-4.3 keep, adding only tagged fields); both are read, 3.8's first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from collectors.groups.codec.modern_records import (
    CurrentAssignment,
    current_assignment,
    group_topic_metadata,
    target_assignment,
    target_assignment_metadata,
    topic_partitions,
)
from collectors.groups.codec.record_specs import (
    MEMBER_KEY,
    GroupType,
    Key,
    Layout,
    RecordSpec,
    RecordType,
    SubRecord,
    group_spec,
)
from collectors.kafka_encoding import Reader, tagged

_CONSUMER = GroupType.CONSUMER


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """A consumer group's epoch, bumped by every change of its members or subscriptions."""

    group: str
    epoch: int
    metadata_hash: int  # of the subscribed topics (4.1+, KIP-1101); 0 before
    group_type: ClassVar[GroupType] = _CONSUMER


@dataclass(frozen=True)
class ClassicMemberProtocol:
    """A member that joined the consumer group with the classic protocol (KIP-848's upgrade
    path), with the assignors (protocols) its JoinGroup offered."""

    session_timeout_ms: int
    protocols: tuple[str, ...]


@dataclass(frozen=True)
class ConsumerGroupMember:
    """A member's metadata and subscription."""

    group: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_protocol: ClassicMemberProtocol | None  # None: the member speaks KIP-848
    group_type: ClassVar[GroupType] = _CONSUMER


@dataclass(frozen=True)
class ResolvedRegularExpression:
    """The topics a subscribed regular expression matched, and when (4.0+)."""

    group: str
    regex: str
    topics: tuple[str, ...]
    version: int
    timestamp_ms: int
    group_type: ClassVar[GroupType] = _CONSUMER


def _group_metadata(key: Key, reader: Reader, _version: int) -> ConsumerGroupMetadata:
    epoch = reader.epoch("epoch")
    metadata_hash = tagged(reader.tagged_fields("value"), 0, lambda r: r.int64("metadata_hash"), 0)
    return ConsumerGroupMetadata(key[0], epoch, metadata_hash)


def _member(early_access: bool) -> Layout[ConsumerGroupMember]:
    """3.7's member record listed client-side assignors where 3.8 has a tagged field."""

    def layout(key: Key, reader: Reader, _version: int) -> ConsumerGroupMember:
        instance_id, rack_id = reader.nullable_string("instance_id"), reader.nullable_string("rack_id")
        client_id, client_host = reader.string("client_id"), reader.string("client_host")
        topic_names = reader.strings("subscribed_topic_names")
        regex = reader.nullable_string("subscribed_topic_regex")
        rebalance_timeout = reader.int32("rebalance_timeout_ms")
        server_assignor = reader.nullable_string("server_assignor")
        if early_access:
            reader.array("assignors", _client_assignor)
        classic = tagged(reader.tagged_fields("value"), 0, _classic_protocol, None)
        return ConsumerGroupMember(
            group=key[0],
            member_id=key[1],
            instance_id=instance_id,
            rack_id=rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=topic_names,
            subscribed_topic_regex=regex,
            rebalance_timeout_ms=rebalance_timeout,
            server_assignor=server_assignor,
            classic_protocol=classic,
        )

    return layout


def _classic_protocol(reader: Reader) -> ClassicMemberProtocol | None:
    if reader.uvarint("classic_member_metadata presence") == 0:  # a tagged nullable struct
        return None
    session_timeout = reader.int32("session_timeout_ms")
    protocols = reader.array("supported_protocols", _protocol_name)
    reader.skip_tagged_fields("classic_member_metadata")
    return ClassicMemberProtocol(session_timeout, protocols)


def _protocol_name(reader: Reader) -> str:
    name = reader.string("protocol name")
    reader.blob("protocol metadata")
    reader.skip_tagged_fields("protocol")
    return name


def _client_assignor(reader: Reader) -> None:
    reader.string("assignor name")
    reader.int16("assignor minimum_version")
    reader.int16("assignor maximum_version")
    reader.int8("assignor reason")
    reader.int16("assignor version")
    reader.blob("assignor metadata")
    reader.skip_tagged_fields("assignor")


def _early_access_current_assignment(key: Key, reader: Reader, _version: int) -> CurrentAssignment:
    """3.7's layout: a target epoch and pending assignments, no member state."""
    epoch, previous = reader.member_epoch("member_epoch"), reader.member_epoch("previous_member_epoch")
    reader.int32("target_member_epoch")
    assigned = reader.array("assigned_partitions", topic_partitions)
    pending = reader.array("partitions_pending_revocation", topic_partitions)
    reader.array("partitions_pending_assignment", topic_partitions)
    reader.int8("error")
    reader.int16("metadata_version")
    reader.blob("metadata_bytes")
    reader.skip_tagged_fields("value")
    return CurrentAssignment(key[0], _CONSUMER, key[1], epoch, previous, None, assigned, pending)


def _regular_expression(key: Key, reader: Reader, _version: int) -> ResolvedRegularExpression:
    topics = reader.strings("topics")
    version, timestamp = reader.int64("version"), reader.int64("timestamp")
    reader.skip_tagged_fields("value")
    return ResolvedRegularExpression(key[0], key[1], topics, version, timestamp)


CONSUMER_SPECS: dict[int, RecordSpec] = {
    RecordType.CONSUMER_GROUP_METADATA: group_spec(
        "ConsumerGroupMetadata", _CONSUMER, (_group_metadata,)
    ),
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: group_spec(
        "ConsumerGroupPartitionMetadata",
        _CONSUMER,
        (group_topic_metadata(_CONSUMER), group_topic_metadata(_CONSUMER, with_epoch=True)),
        SubRecord.TOPIC_METADATA,
    ),
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: group_spec(
        "ConsumerGroupMemberMetadata",
        _CONSUMER,
        (_member(early_access=False), _member(early_access=True)),
        SubRecord.MEMBER,
        MEMBER_KEY,
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: group_spec(
        "ConsumerGroupTargetAssignmentMetadata",
        _CONSUMER,
        (target_assignment_metadata(_CONSUMER),),
        SubRecord.TARGET_ASSIGNMENT_METADATA,
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: group_spec(
        "ConsumerGroupTargetAssignmentMember",
        _CONSUMER,
        (target_assignment(_CONSUMER), target_assignment(_CONSUMER, early_access=True)),
        SubRecord.TARGET_ASSIGNMENT,
        MEMBER_KEY,
    ),
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: group_spec(
        "ConsumerGroupCurrentMemberAssignment",
        _CONSUMER,
        (current_assignment(_CONSUMER), _early_access_current_assignment),
        SubRecord.CURRENT_ASSIGNMENT,
        MEMBER_KEY,
    ),
    RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION: group_spec(
        "ConsumerGroupRegularExpression",
        _CONSUMER,
        (_regular_expression,),
        SubRecord.REGULAR_EXPRESSION,
        ("group_id", "regular_expression"),
    ),
}
