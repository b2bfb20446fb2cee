"""Records of KIP-1071 streams groups: types 17-24, value v0 (flexible) each.

Streams groups first ran in 4.1 (early access); 4.1-4.3 share every layout, later
additions being tagged fields. Type 18 (the subscribed topics) lived only on trunk between
4.0 and 4.1, replaced by a hash in type 17; type 24 is trunk's (after 4.3). A member's work
is tasks: a subtopology and the partitions of its input topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from collectors.groups.codec.modern_records import group_topic_metadata, target_assignment_metadata
from collectors.groups.codec.record_specs import (
    MEMBER_KEY,
    GroupType,
    Key,
    RecordSpec,
    RecordType,
    SubRecord,
    group_spec,
)
from collectors.kafka_encoding import Reader, tagged

_STREAMS = GroupType.STREAMS


@dataclass(frozen=True)
class StreamsGroupMetadata:
    group: str
    epoch: int
    metadata_hash: int
    # The topology epoch whose topics were found valid (4.2+): the group is NotReady until
    # it is its topology's. Kafka's default -1 when absent, as 4.1 never writes it.
    validated_topology_epoch: int
    group_type: ClassVar[GroupType] = _STREAMS


@dataclass(frozen=True)
class UserEndpoint:
    host: str
    port: int


@dataclass(frozen=True)
class StreamsGroupMember:
    group: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str  # the Streams instance, which may run several members
    user_endpoint: UserEndpoint | None  # for interactive queries
    client_tags: tuple[tuple[str, str], ...]
    group_type: ClassVar[GroupType] = _STREAMS


@dataclass(frozen=True)
class SubtopologyTasks:
    subtopology_id: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class StreamsTasks:
    active: tuple[SubtopologyTasks, ...] = ()
    standby: tuple[SubtopologyTasks, ...] = ()
    warmup: tuple[SubtopologyTasks, ...] = ()


@dataclass(frozen=True)
class StreamsTargetAssignment:
    group: str
    member_id: str
    tasks: StreamsTasks
    group_type: ClassVar[GroupType] = _STREAMS


@dataclass(frozen=True)
class StreamsCurrentAssignment:
    group: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's streams MemberState byte
    assigned: StreamsTasks
    pending_revocation: StreamsTasks
    group_type: ClassVar[GroupType] = _STREAMS


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[str, ...]


@dataclass(frozen=True)
class StreamsTopology:
    group: str
    epoch: int
    subtopologies: tuple[Subtopology, ...]
    group_type: ClassVar[GroupType] = _STREAMS


@dataclass(frozen=True)
class SubtopologyTopicIds:
    subtopology_id: str
    topic_ids: tuple[str, ...]


@dataclass(frozen=True)
class StreamsResolvedTopicIds:
    """The topic ids each subtopology's input resolved to for one assignment epoch."""

    group: str
    assignment_epoch: int
    subtopologies: tuple[SubtopologyTopicIds, ...]
    group_type: ClassVar[GroupType] = _STREAMS


def _group_metadata(key: Key, reader: Reader, _version: int) -> StreamsGroupMetadata:
    epoch, metadata_hash = reader.epoch("epoch"), reader.int64("metadata_hash")
    validated = tagged(reader.tagged_fields("value"), 0, lambda r: r.int32("validated_topology_epoch"), -1)
    return StreamsGroupMetadata(key[0], epoch, metadata_hash, validated)


def _member(key: Key, reader: Reader, _version: int) -> StreamsGroupMember:
    instance_id, rack_id = reader.nullable_string("instance_id"), reader.nullable_string("rack_id")
    client_id, client_host = reader.string("client_id"), reader.string("client_host")
    rebalance_timeout, topology_epoch = reader.int32("rebalance_timeout_ms"), reader.int32("topology_epoch")
    process_id = reader.string("process_id")
    endpoint = _endpoint(reader) if reader.int8("user_endpoint presence") >= 0 else None
    client_tags = reader.array("client_tags", _key_value)
    reader.skip_tagged_fields("value")
    return StreamsGroupMember(
        group=key[0],
        member_id=key[1],
        instance_id=instance_id,
        rack_id=rack_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=rebalance_timeout,
        topology_epoch=topology_epoch,
        process_id=process_id,
        user_endpoint=endpoint,
        client_tags=client_tags,
    )


def _endpoint(reader: Reader) -> UserEndpoint:
    endpoint = UserEndpoint(reader.string("user_endpoint host"), reader.uint16("user_endpoint port"))
    reader.skip_tagged_fields("user_endpoint")
    return endpoint


def _key_value(reader: Reader) -> tuple[str, str]:
    pair = reader.string("key"), reader.string("value")
    reader.skip_tagged_fields("key value")
    return pair


def _tasks(reader: Reader) -> SubtopologyTasks:
    tasks = SubtopologyTasks(reader.string("subtopology_id"), reader.int32s("partitions"))
    reader.skip_tagged_fields("task ids")  # 4.3's assignment epochs of active tasks
    return tasks


def _task_lists(reader: Reader, what: str) -> StreamsTasks:
    return StreamsTasks(
        reader.array(f"active_tasks{what}", _tasks),
        reader.array(f"standby_tasks{what}", _tasks),
        reader.array(f"warmup_tasks{what}", _tasks),
    )


def _target_assignment(key: Key, reader: Reader, _version: int) -> StreamsTargetAssignment:
    tasks = _task_lists(reader, "")
    reader.skip_tagged_fields("value")
    return StreamsTargetAssignment(key[0], key[1], tasks)


def _current_assignment(key: Key, reader: Reader, _version: int) -> StreamsCurrentAssignment:
    epoch, previous = reader.member_epoch("member_epoch"), reader.member_epoch("previous_member_epoch")
    state = reader.int8("state")
    assigned, pending = _task_lists(reader, ""), _task_lists(reader, "_pending_revocation")
    reader.skip_tagged_fields("value")
    return StreamsCurrentAssignment(key[0], key[1], epoch, previous, state, assigned, pending)


def _topology(key: Key, reader: Reader, _version: int) -> StreamsTopology:
    epoch = reader.int32("epoch")
    subtopologies = reader.array("subtopologies", _subtopology)
    reader.skip_tagged_fields("value")
    return StreamsTopology(key[0], epoch, subtopologies)


def _subtopology(reader: Reader) -> Subtopology:
    subtopology_id = reader.string("subtopology_id")
    source_topics, source_regex = reader.strings("source_topics"), reader.strings("source_topic_regex")
    changelogs = reader.array("state_changelog_topics", _topic_info)
    sinks = reader.strings("repartition_sink_topics")
    repartition_sources = reader.array("repartition_source_topics", _topic_info)
    reader.array("copartition_groups", _copartition_group)
    reader.skip_tagged_fields("subtopology")
    return Subtopology(subtopology_id, source_topics, source_regex, changelogs, sinks, repartition_sources)


def _topic_info(reader: Reader) -> str:
    name = reader.string("topic name")
    reader.int32("topic partitions")
    reader.int16("topic replication_factor")
    reader.array("topic_configs", _key_value)
    reader.skip_tagged_fields("topic info")
    return name


def _copartition_group(reader: Reader) -> None:
    for field in ("source_topics", "source_topic_regex", "repartition_source_topics"):
        reader.array(f"copartition {field}", lambda r: r.int16(f"copartition {field}"))
    reader.skip_tagged_fields("copartition group")


def _resolved_topic_ids(key: Key, reader: Reader, _version: int) -> StreamsResolvedTopicIds:
    epoch = reader.int32("assignment_epoch")
    subtopologies = reader.array("resolved_topic_ids_by_subtopology", _subtopology_topic_ids)
    reader.skip_tagged_fields("value")
    return StreamsResolvedTopicIds(key[0], epoch, subtopologies)


def _subtopology_topic_ids(reader: Reader) -> SubtopologyTopicIds:
    subtopology_id = reader.string("subtopology_id")
    topic_ids = reader.array("topic_ids", lambda r: r.uuid("topic_id"))
    reader.skip_tagged_fields("resolved topic ids")
    return SubtopologyTopicIds(subtopology_id, topic_ids)


STREAMS_SPECS: dict[int, RecordSpec] = {
    RecordType.STREAMS_GROUP_METADATA: group_spec("StreamsGroupMetadata", _STREAMS, (_group_metadata,)),
    RecordType.STREAMS_GROUP_PARTITION_METADATA: group_spec(
        "StreamsGroupPartitionMetadata",
        _STREAMS,
        (group_topic_metadata(_STREAMS, with_racks=False),),
        SubRecord.TOPIC_METADATA,
    ),
    RecordType.STREAMS_GROUP_MEMBER_METADATA: group_spec(
        "StreamsGroupMemberMetadata", _STREAMS, (_member,), SubRecord.MEMBER, MEMBER_KEY
    ),
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: group_spec(
        "StreamsGroupTargetAssignmentMetadata",
        _STREAMS,
        (target_assignment_metadata(_STREAMS),),
        SubRecord.TARGET_ASSIGNMENT_METADATA,
    ),
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: group_spec(
        "StreamsGroupTargetAssignmentMember",
        _STREAMS,
        (_target_assignment,),
        SubRecord.TARGET_ASSIGNMENT,
        MEMBER_KEY,
    ),
    RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: group_spec(
        "StreamsGroupCurrentMemberAssignment",
        _STREAMS,
        (_current_assignment,),
        SubRecord.CURRENT_ASSIGNMENT,
        MEMBER_KEY,
    ),
    RecordType.STREAMS_GROUP_TOPOLOGY: group_spec(
        "StreamsGroupTopology", _STREAMS, (_topology,), SubRecord.TOPOLOGY
    ),
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_RESOLVED_TOPIC_IDS: group_spec(
        "StreamsGroupTargetAssignmentResolvedTopicIds",
        _STREAMS,
        (_resolved_topic_ids,),
        SubRecord.RESOLVED_TOPIC_IDS,
    ),
}
