"""Pure mappings to kmon's GroupState: from a __consumer_offsets GroupMetadata record, from a
group of Kafka 4's protocols as the records fold into it (collectors.groups.modern_groups), from an
Admin API group description, and lag per topic from offsets and samples."""
from __future__ import annotations

from typing import Callable, Collection, Iterable, Mapping

from confluent_kafka import ConsumerGroupState, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import ConsumerGroupDescription

from collectors.groups.consumer_status import PartitionKey
from collectors.groups.lag import LagTable
from collectors.groups.modern_groups import ModernGroup, ModernMember
from collectors.groups.codec.modern_records import TopicPartitions
from collectors.groups.codec.offsets_codec import GroupMetadata
from collectors.groups.codec.streams_records import StreamsTasks
from kmon.events import GroupMember, GroupState, TopicLag

# what a member of Kafka 4's protocols that names no server-side assignor gets: the coordinator's
# first of group.consumer.assignors (uniform, unless the cluster says otherwise)
DEFAULT_ASSIGNOR = "default"
# topic ids -> their names (collectors.groups.topic_names.TopicNames)
TopicNamer = Callable[[Iterable[str]], Mapping[str, str]]


# Kafka's own state names (what `kafka-consumer-groups --describe --state` prints).
_ADMIN_STATES = {
    ConsumerGroupState.EMPTY: "Empty",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
}


def state_from_metadata(record: GroupMetadata) -> GroupState:
    """The group as a GroupMetadata record describes it.

    The record carries no state. The coordinator writes one when a generation
    completes its SyncGroup (the group turns Stable, members with their assignment)
    and when the last member leaves (the group turns Empty, no members, a new
    generation). So: members -> Stable, no members -> Empty.
    """
    since = record.current_state_timestamp_ms
    return GroupState(
        group=record.group,
        state="Stable" if record.members else "Empty",
        generation=record.generation,
        protocol_type=record.protocol_type,
        protocol=record.protocol or "",
        leader=record.leader,
        members=_sorted_members(
            GroupMember(member_id=m.member_id, client_id=m.client_id, host=m.client_host,
                        group_instance_id=m.group_instance_id,
                        assignment=_partition_names((p.topic, p.partition) for p in m.assigned_partitions))
            for m in record.members),
        state_since_ms=since if since >= 0 else None,
        origin="offsets",
    )


def state_from_modern(group: ModernGroup, names: TopicNamer) -> GroupState:
    """A consumer, share or streams group as its records describe it: its state derived as the
    coordinator derives it, its group epoch as the generation, the target assignment's epoch and
    each member's own epoch and state. The members' partitions are by topic id in the records."""
    ids = {tp.topic_id for m in group.members for tps in (m.assigned_partitions, m.partitions_pending_revocation)
           for tp in tps}
    named = names(ids) if ids else {}
    assignors = sorted({m.server_assignor or DEFAULT_ASSIGNOR for m in group.members})
    return GroupState(
        group=group.group_id,
        state=group.state,
        generation=group.group_epoch,
        protocol_type=group.group_type.value,
        protocol=",".join(assignors),
        members=_sorted_members(_modern_member(m, named) for m in group.members),
        group_type=group.group_type.value,
        origin="offsets",
        assignment_epoch=group.target_assignment_epoch,
        reconciling=group.reconciling_members,
    )


def _modern_member(m: ModernMember, named: Mapping[str, str]) -> GroupMember:
    return GroupMember(
        member_id=m.member_id, client_id=m.client_id, host=m.client_host, group_instance_id=m.instance_id,
        assignment=_partitions(m.assigned_partitions, named) or _tasks(m.assigned_tasks),
        member_epoch=m.member_epoch, member_state=m.state, rack=m.rack_id,
        subscribed_topics=m.subscribed_topic_names, subscribed_regex=m.subscribed_topic_regex,
        pending_revocation=_partitions(m.partitions_pending_revocation, named) or _tasks(m.tasks_pending_revocation),
        classic_protocol=m.classic_protocol)


def _partitions(assigned: Iterable[TopicPartitions], named: Mapping[str, str]) -> tuple[str, ...]:
    return _partition_names((named.get(tp.topic_id, tp.topic_id), p) for tp in assigned for p in tp.partitions)


def _tasks(tasks: StreamsTasks) -> tuple[str, ...]:
    """A streams member's active tasks, "subtopology:partition"."""
    return _partition_names((t.subtopology_id, p) for t in tasks.active for p in t.partitions)


def state_from_description(desc: ConsumerGroupDescription) -> GroupState:
    """The group as describe_consumer_groups reports it; the client does not expose
    the generation, so it is -1 (unknown) and the stream keeps the one it knows."""
    return GroupState(
        group=desc.group_id,
        state=_ADMIN_STATES.get(desc.state, "Unknown"),
        generation=-1,
        # a "simple" group only commits offsets: it has no protocol type
        protocol_type="" if desc.is_simple_consumer_group else "consumer",
        protocol=desc.partition_assignor or "",
        members=_sorted_members(
            GroupMember(member_id=m.member_id, client_id=m.client_id, host=m.host,
                        group_instance_id=m.group_instance_id,
                        assignment=_partition_names(_tps(m.assignment.topic_partitions if m.assignment else ())))
            for m in desc.members),
        coordinator=desc.coordinator.id if desc.coordinator is not None else None,
        group_type="consumer" if desc.type == ConsumerGroupType.CONSUMER else "classic",
        origin="admin",
    )


def topic_lags(committed: Mapping[PartitionKey, int], end_offsets: Mapping[PartitionKey, int],
               samples: LagTable, now: float, record_times: Mapping[tuple[str, int, int], float] | None = None,
               wall_now: float = 0.0, unreadable: Collection[str] = (),
               log_starts: Mapping[PartitionKey, int] | None = None) -> dict[str, TopicLag]:
    """Lag per topic of one group: messages summed over its partitions, seconds its worst partition's.
    A partition's seconds are ``wall_now`` minus the time of the record at its committed offset where
    ``record_times`` has it (the oldest unread record's age), else the estimate from the end-offset
    samples at monotonic ``now``. A topic's are "interpolated" if any of its partitions' were, or if its
    records are not read (``record_times`` None, or the topic ``unreadable``: then a caught-up group's 0 is
    too, so that its series keeps its label). Each partition's committed offset, and its log start offset
    where ``log_starts`` has it, go with it (what the stream counts lost records from). Partitions without a
    known end offset are left out."""
    per_topic: dict[str, dict[int, int]] = {}
    seconds: dict[str, float | None] = {}
    interpolated = set(unreadable) if record_times is not None else {t for t, _ in committed}
    times = record_times or {}
    for (topic, partition), offset in sorted(committed.items()):
        end = end_offsets.get((topic, partition))
        if end is None:
            continue
        per_topic.setdefault(topic, {})[partition] = max(0, end - offset)
        if offset >= end:
            estimate: float | None = 0.0
        elif (written := times.get((topic, partition, offset))) is not None:
            estimate = max(0.0, wall_now - written)   # a producer's clock ahead of ours is no lag
        else:
            estimate = samples.lag_seconds(topic, partition, offset, now)
            interpolated.add(topic)
        if estimate is not None:
            seconds[topic] = max(seconds.get(topic) or 0.0, estimate)
        else:
            seconds.setdefault(topic, None)
    starts = log_starts or {}
    return {topic: TopicLag(lag=sum(parts.values()), lag_seconds=seconds[topic], partitions=parts,
                            lag_seconds_method=None if seconds[topic] is None
                            else "interpolated" if topic in interpolated else "record",
                            committed={p: committed[(topic, p)] for p in parts},
                            log_start={p: starts[(topic, p)] for p in parts if (topic, p) in starts})
            for topic, parts in per_topic.items()}


def _tps(topic_partitions: Iterable[TopicPartition]) -> Iterable[PartitionKey]:
    return ((tp.topic, tp.partition) for tp in topic_partitions)


def _partition_names(partitions: Iterable[PartitionKey]) -> tuple[str, ...]:
    return tuple(f"{t}:{p}" for t, p in sorted(partitions))


def _sorted_members(members: Iterable[GroupMember]) -> tuple[GroupMember, ...]:
    # sorted, so that two observations of the same membership compare equal
    return tuple(sorted(members, key=lambda m: m.member_id))
