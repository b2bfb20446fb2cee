"""The modern groups' tests' builders: consumer-group records (member, target, join...), an offsets reader to feed."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterable

from confluent_kafka import TIMESTAMP_CREATE_TIME as TIMESTAMP_TYPE_CREATE_TIME, KafkaError

from collectors.groups.book import GroupBook, ModernStates
from collectors.groups.config import GroupsConfig
from collectors.groups.codec.offsets_codec import (
    ClassicMemberProtocol,
    ConsumerGroupMember,
    ConsumerGroupMetadata,
    CurrentAssignment,
    GroupTombstone,
    GroupType,
    SubRecord,
    SubRecordTombstone,
    TargetAssignment,
    TargetAssignmentMetadata,
    TopicPartitions,
)
from collectors.groups.offsets_reader import OffsetsReader
from collectors.groups.outputs import Emitter
from collectors.telemetry import Telemetry
from tests.unit.fakes import ListSink

CONSUMER, SHARE, STREAMS = GroupType.CONSUMER, GroupType.SHARE, GroupType.STREAMS
G = "orders-app"
T = "5f1c2a3e-8b4d-4e6f-9a0b-1c2d3e4f5a6b"
STABLE, UNREVOKED = 0, 1  # consumer MemberState bytes
TOPIC_NAMES = {T: "orders"}


def parts(*partitions: int) -> tuple[TopicPartitions, ...]:
    return (TopicPartitions(T, partitions),) if partitions else ()


def member(member_id: str, classic: bool = False) -> ConsumerGroupMember:
    protocol = ClassicMemberProtocol(45_000, ("range",)) if classic else None
    return ConsumerGroupMember(G, member_id, None, "rack-a", f"client-{member_id}", "/10.0.0.1", ("orders",),
                               None, 300_000, "uniform", protocol)


def epoch(e: int) -> ConsumerGroupMetadata:
    return ConsumerGroupMetadata(G, e, 0)


def target(member_id: str, *partitions: int) -> TargetAssignment:
    return TargetAssignment(G, CONSUMER, member_id, parts(*partitions))


def target_epoch(e: int) -> TargetAssignmentMetadata:
    return TargetAssignmentMetadata(G, CONSUMER, e, 0)


def current(member_id: str, e: int, *partitions: int, state: int | None = STABLE,
            revoking: tuple[int, ...] = ()) -> CurrentAssignment:
    return CurrentAssignment(G, CONSUMER, member_id, e, e - 1, state, parts(*partitions), parts(*revoking))


def gone(sub_record: SubRecord, member_id: str | None = None, group_type: GroupType = CONSUMER) -> SubRecordTombstone:
    return SubRecordTombstone(G, group_type, sub_record, member_id=member_id)


def join(member_id: str, e: int, *partitions: int, classic: bool = False) -> list[object]:
    """One member's first heartbeat up to its reconciled assignment, as Kafka writes it:
    the member, the bumped epoch, the target assignment and its epoch, the current assignment."""
    return [member(member_id, classic), epoch(e), target(member_id, *partitions), target_epoch(e),
            current(member_id, e, *partitions)]


def deletion(*member_ids: str) -> list[object]:
    """The records of a consumer group's deletion (ConsumerGroup.createGroupTombstoneRecords)."""
    records: list[object] = [gone(SubRecord.CURRENT_ASSIGNMENT, m) for m in member_ids]
    records += [gone(SubRecord.TARGET_ASSIGNMENT, m) for m in member_ids]
    records.append(gone(SubRecord.TARGET_ASSIGNMENT_METADATA))
    records += [gone(SubRecord.MEMBER, m) for m in member_ids]
    return records + [gone(SubRecord.TOPIC_METADATA), GroupTombstone(G, CONSUMER)]


# --- the offsets reader, over messages built by hand --------------------------------------


@dataclass(frozen=True)
class Record:
    """The part of a confluent_kafka.Message the reader reads (Message has no constructor)."""
    key_: bytes | None
    value_: bytes | None
    offset_: int = 0
    error_: KafkaError | None = None
    partition_: int = 0
    topic_: str = "__consumer_offsets"
    # the coordinator's write it belongs to: each message its own write unless told
    timestamp_: int = field(default_factory=itertools.count(1_700_000_000_000).__next__)

    def key(self) -> bytes | None: return self.key_
    def value(self) -> bytes | None: return self.value_
    def offset(self) -> int: return self.offset_
    def partition(self) -> int: return self.partition_
    def topic(self) -> str: return self.topic_
    def error(self) -> KafkaError | None: return self.error_
    def timestamp(self) -> tuple[int, int]: return TIMESTAMP_TYPE_CREATE_TIME, self.timestamp_


def reader(**settings: object) -> tuple[OffsetsReader, GroupBook, ListSink, Telemetry]:
    book, sink, telemetry = GroupBook(), ListSink(), Telemetry("c")
    config = GroupsConfig("h:9092", "c", **settings)  # type: ignore[arg-type]
    emitter = Emitter("c", sink, telemetry)
    return OffsetsReader(config, book, emitter, ModernStates(emitter), named), book, sink, telemetry


def named(ids: Iterable[str]) -> dict[str, str]:
    """Topic ids as the tests' builders make them, and their names."""
    return {i: TOPIC_NAMES.get(i, i) for i in ids}


def sample(telemetry: Telemetry, name: str, **labels: str) -> float | None:
    return telemetry.registry.get_sample_value(name, {"cluster": "c", "source": "groups", **labels})
