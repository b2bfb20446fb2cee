"""Decode records of Kafka's internal ``__consumer_offsets`` topic, as brokers 2.x-4.3 write
them and their group coordinator reads them back.

* key: ``int16`` record type (Kafka's CoordinatorRecordType), then the key struct:
  0-2 committed offsets and classic groups (:mod:`classic_records`), 3-8 and 16 KIP-848
  consumer groups (:mod:`consumer_records`), 9-15 share groups (:mod:`share_records`),
  17-24 streams groups (:mod:`streams_records`).
* value: ``int16`` version, then the value struct, or no value at all: a tombstone, which
  says what was deleted (:class:`GroupTombstone`, :class:`SubRecordTombstone`,
  :class:`OffsetTombstone`).

:func:`decode_record` is the only entry point; on any bytes it returns a record or raises
:class:`collectors.kafka_encoding.MalformedRecord`, whose message says which field at which byte
failed. A record type or value version newer than these comes back as :class:`UnknownRecord`, for
the caller to count.
"""

from __future__ import annotations

from collectors.groups.codec.classic_records import (
    CLASSIC_SPECS,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    OffsetTombstone,
    TopicPartition,
)
from collectors.groups.codec.consumer_records import (
    CONSUMER_SPECS,
    ClassicMemberProtocol,
    ConsumerGroupMember,
    ConsumerGroupMetadata,
    ResolvedRegularExpression,
)
from collectors.groups.codec.modern_records import (
    CurrentAssignment,
    GroupTopicMetadata,
    TargetAssignment,
    TargetAssignmentMetadata,
    TopicMetadata,
    TopicPartitions,
)
from collectors.groups.codec.record_specs import (
    GroupTombstone,
    GroupType,
    RecordSpec,
    RecordType,
    SubRecord,
    SubRecordTombstone,
    UnknownRecord,
    decode_by_spec,
)
from collectors.groups.codec.share_records import (
    SHARE_SPECS,
    ShareGroupMember,
    ShareGroupMetadata,
    ShareGroupStatePartitions,
    ShareStateTopic,
)
from collectors.groups.codec.streams_records import (
    STREAMS_SPECS,
    UserEndpoint,
    StreamsCurrentAssignment,
    StreamsGroupMember,
    StreamsGroupMetadata,
    StreamsResolvedTopicIds,
    StreamsTargetAssignment,
    StreamsTasks,
    StreamsTopology,
    Subtopology,
    SubtopologyTasks,
    SubtopologyTopicIds,
)

__all__ = [
    "ClassicMemberProtocol",
    "ConsumerGroupMember",
    "ConsumerGroupMetadata",
    "CurrentAssignment",
    "UserEndpoint",
    "GroupMember",
    "GroupMetadata",
    "GroupTombstone",
    "GroupTopicMetadata",
    "GroupType",
    "OffsetCommit",
    "OffsetTombstone",
    "Record",
    "RecordType",
    "ResolvedRegularExpression",
    "ShareGroupMember",
    "ShareGroupMetadata",
    "ShareGroupStatePartitions",
    "ShareStateTopic",
    "StreamsCurrentAssignment",
    "StreamsGroupMember",
    "StreamsGroupMetadata",
    "StreamsResolvedTopicIds",
    "StreamsTargetAssignment",
    "StreamsTasks",
    "StreamsTopology",
    "SubRecord",
    "SubRecordTombstone",
    "Subtopology",
    "SubtopologyTasks",
    "SubtopologyTopicIds",
    "TargetAssignment",
    "TargetAssignmentMetadata",
    "TopicMetadata",
    "TopicPartition",
    "TopicPartitions",
    "UnknownRecord",
    "decode_record",
]


Record = (
    GroupMetadata
    | OffsetCommit
    | OffsetTombstone
    | GroupTombstone
    | SubRecordTombstone
    | ConsumerGroupMetadata
    | ConsumerGroupMember
    | ResolvedRegularExpression
    | GroupTopicMetadata
    | TargetAssignmentMetadata
    | TargetAssignment
    | CurrentAssignment
    | ShareGroupMetadata
    | ShareGroupMember
    | ShareGroupStatePartitions
    | StreamsGroupMetadata
    | StreamsGroupMember
    | StreamsTargetAssignment
    | StreamsCurrentAssignment
    | StreamsTopology
    | StreamsResolvedTopicIds
    | UnknownRecord
)

_SPECS: dict[int, RecordSpec] = {**CLASSIC_SPECS, **CONSUMER_SPECS, **SHARE_SPECS, **STREAMS_SPECS}


def decode_record(key: bytes | None, value: bytes | None) -> Record:
    """Decode one ``__consumer_offsets`` record; ``value=None`` is a tombstone."""
    return decode_by_spec(_SPECS, key, value)
