"""Records of KIP-932 share groups: types 9-15, value v0 (flexible) each.

Share groups were early access in 4.0, whose v0 layouts of types 11 and 15 differ from
4.1's (which 4.1-4.3 keep, adding only tagged fields); both are read, 4.1's first. Type 9
(the subscribed topics) is 4.0's only: 4.1 replaced it by a hash in type 11.

Type 15 says which share-partitions have state in the share coordinator: the state itself
(start offsets, in-flight batches) lives in ``__share_group_state``, which
:mod:`share_state_codec` reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from collectors.groups.codec.modern_records import (
    current_assignment,
    group_topic_metadata,
    target_assignment,
    target_assignment_metadata,
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
from collectors.kafka_encoding import Reader

_SHARE = GroupType.SHARE


@dataclass(frozen=True)
class ShareGroupMetadata:
    group: str
    epoch: int
    metadata_hash: int  # of the subscribed topics (4.1+); 0 in 4.0's layout
    group_type: ClassVar[GroupType] = _SHARE


@dataclass(frozen=True)
class ShareGroupMember:
    group: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    group_type: ClassVar[GroupType] = _SHARE


@dataclass(frozen=True)
class ShareStateTopic:
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]  # () for a topic being deleted: the record names no partitions


@dataclass(frozen=True)
class ShareGroupStatePartitions:
    """The share-partitions whose state the share coordinator is initializing (4.1+), holds,
    or is deleting, for one share group."""

    group: str
    initializing: tuple[ShareStateTopic, ...]  # () in 4.0's layout
    initialized: tuple[ShareStateTopic, ...]
    deleting: tuple[ShareStateTopic, ...]


def _group_metadata(with_hash: bool) -> Layout[ShareGroupMetadata]:
    def layout(key: Key, reader: Reader, _version: int) -> ShareGroupMetadata:
        epoch = reader.epoch("epoch")
        metadata_hash = reader.int64("metadata_hash") if with_hash else 0
        reader.skip_tagged_fields("value")
        return ShareGroupMetadata(key[0], epoch, metadata_hash)

    return layout


def _member(key: Key, reader: Reader, _version: int) -> ShareGroupMember:
    rack_id = reader.nullable_string("rack_id")
    client_id, client_host = reader.string("client_id"), reader.string("client_host")
    topic_names = reader.strings("subscribed_topic_names")
    reader.skip_tagged_fields("value")
    return ShareGroupMember(key[0], key[1], rack_id, client_id, client_host, topic_names)


def _state_partitions(with_initializing: bool) -> Layout[ShareGroupStatePartitions]:
    def layout(key: Key, reader: Reader, _version: int) -> ShareGroupStatePartitions:
        initializing = reader.array("initializing_topics", _topic_partitions) if with_initializing else ()
        initialized = reader.array("initialized_topics", _topic_partitions)
        deleting = reader.array("deleting_topics", _deleting_topic)
        reader.skip_tagged_fields("value")
        return ShareGroupStatePartitions(key[0], initializing, initialized, deleting)

    return layout


def _topic_partitions(reader: Reader) -> ShareStateTopic:
    topic = ShareStateTopic(reader.uuid("topic_id"), reader.string("topic_name"), reader.int32s("partitions"))
    reader.skip_tagged_fields("topic partitions")
    return topic


def _deleting_topic(reader: Reader) -> ShareStateTopic:
    topic = ShareStateTopic(reader.uuid("topic_id"), reader.string("topic_name"), ())
    reader.skip_tagged_fields("topic")
    return topic


SHARE_SPECS: dict[int, RecordSpec] = {
    RecordType.SHARE_GROUP_PARTITION_METADATA: group_spec(
        "ShareGroupPartitionMetadata", _SHARE, (group_topic_metadata(_SHARE),), SubRecord.TOPIC_METADATA
    ),
    RecordType.SHARE_GROUP_MEMBER_METADATA: group_spec(
        "ShareGroupMemberMetadata", _SHARE, (_member,), SubRecord.MEMBER, MEMBER_KEY
    ),
    RecordType.SHARE_GROUP_METADATA: group_spec(
        "ShareGroupMetadata", _SHARE, (_group_metadata(with_hash=True), _group_metadata(with_hash=False))
    ),
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: group_spec(
        "ShareGroupTargetAssignmentMetadata",
        _SHARE,
        (target_assignment_metadata(_SHARE),),
        SubRecord.TARGET_ASSIGNMENT_METADATA,
    ),
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: group_spec(
        "ShareGroupTargetAssignmentMember",
        _SHARE,
        (target_assignment(_SHARE),),
        SubRecord.TARGET_ASSIGNMENT,
        MEMBER_KEY,
    ),
    RecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: group_spec(
        "ShareGroupCurrentMemberAssignment",
        _SHARE,
        (current_assignment(_SHARE, with_revocation=False),),
        SubRecord.CURRENT_ASSIGNMENT,
        MEMBER_KEY,
    ),
    RecordType.SHARE_GROUP_STATE_PARTITION_METADATA: group_spec(
        "ShareGroupStatePartitionMetadata",
        _SHARE,
        (_state_partitions(with_initializing=True), _state_partitions(with_initializing=False)),
        SubRecord.SHARE_STATE_PARTITIONS,
    ),
}
