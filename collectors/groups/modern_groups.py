"""A pure model of consumer (KIP-848), share (KIP-932) and streams (KIP-1071) groups as the
group coordinator derives them from its ``__consumer_offsets`` records, and of which protocol,
classic or modern, holds each group id.

Fold one group's decoded records in offset order with :func:`apply` (or a whole log with
:func:`fold_records`), then :func:`view` the result. The rules, after the replay methods of
Kafka's GroupMetadataManager (4.3):

* Existence. A modern group exists from its metadata record (types 3, 11, 17: the group
  epoch) to that record's tombstone, which deletes it with all it held. Other records
  (members, assignments, topology) never make a group visible: Kafka writes a new group's
  first member before its first epoch, in one batch, so records that come after a deletion
  are held for the group's next incarnation and shown once its metadata record arrives. A
  deleted group is thus never revived by a stray later sub-record; a re-created group starts
  at its new epoch (Kafka starts again at 1), never compared with the deleted one's.
* State. Consumer groups: Empty without members; Assigning while the target assignment epoch
  is behind the group epoch; Reconciling while a member is not reconciled (its state not
  STABLE, or its epoch not the target assignment epoch); else Stable. Streams groups are
  NotReady, before Assigning, while the topology is missing or is not the validated one
  (an epoch 4.2+ records; a group last written by 4.1 reads NotReady). Share groups are
  Empty or Stable only. ``reconciling_members`` counts the unreconciled members of all three.
* Protocol moves. A classic group (GroupMetadata, type 2) and a modern group may hold the same
  id in turn, never at once: the modern group wins while its metadata record stands (a
  classic record then is stale and ignored), and its metadata record drops the classic view
  (an online upgrade writes the classic tombstone first, in the same batch). After the modern
  group's tombstone, a classic GroupMetadata is a downgrade. Between the two halves of such a
  batch the id is briefly viewless: apply a batch whole before publishing what it changed.
  Consumer-group members that joined with the classic protocol are ``classic_protocol``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from collectors.groups.codec.classic_records import GroupMetadata
from collectors.groups.keyed_fold import fold_by_key
from collectors.groups.codec.consumer_records import ConsumerGroupMember, ConsumerGroupMetadata
from collectors.groups.codec.modern_records import (
    CurrentAssignment,
    TargetAssignment,
    TargetAssignmentMetadata,
    TopicPartitions,
)
from collectors.groups.codec.offsets_codec import Record
from collectors.groups.codec.record_specs import GroupTombstone, GroupType, SubRecord, SubRecordTombstone
from collectors.groups.codec.share_records import ShareGroupMember, ShareGroupMetadata
from collectors.groups.codec.streams_records import (
    StreamsCurrentAssignment,
    StreamsGroupMember,
    StreamsGroupMetadata,
    StreamsTargetAssignment,
    StreamsTasks,
    StreamsTopology,
)

STABLE = "STABLE"
# Kafka's MemberState values: consumer and share groups share one enum, streams has its own.
_MEMBER_STATES = {
    GroupType.CONSUMER: {0: STABLE, 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS"},
    GroupType.SHARE: {0: STABLE, 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS"},
    GroupType.STREAMS: {1: STABLE, 2: "UNREVOKED_TASKS", 3: "UNRELEASED_TASKS"},
}
_LEFT_EPOCH = -1  # a member whose current assignment was deleted: it is leaving
_NO_TASKS = StreamsTasks()

GroupMetadataRecord = ConsumerGroupMetadata | ShareGroupMetadata | StreamsGroupMetadata
MemberRecord = ConsumerGroupMember | ShareGroupMember | StreamsGroupMember
# The records the model folds; the others (committed offsets, subscribed topic metadata,
# regular expressions, share-partition state, resolved topic ids) do not change what it shows.
_FOLDED = (
    GroupMetadata, GroupTombstone, SubRecordTombstone, ConsumerGroupMetadata, ShareGroupMetadata,
    StreamsGroupMetadata, ConsumerGroupMember, ShareGroupMember, StreamsGroupMember, CurrentAssignment,
    StreamsCurrentAssignment, TargetAssignment, StreamsTargetAssignment, TargetAssignmentMetadata, StreamsTopology,
)


@dataclass(frozen=True)
class ModernMember:
    """A member as its records describe it. Partitions are by topic id; streams members'
    work is tasks. ``target_*`` is what the assignor gave it, which it reconciles towards."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    classic_protocol: bool = False  # joined a consumer group with the classic protocol
    process_id: str | None = None  # streams: the instance that runs it
    member_epoch: int = 0  # Kafka's defaults until its current assignment record
    previous_member_epoch: int = -1
    state: str | None = None  # Kafka's MemberState name; None without one (or in 3.7's records)
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()
    assigned_tasks: StreamsTasks = _NO_TASKS
    tasks_pending_revocation: StreamsTasks = _NO_TASKS
    target_partitions: tuple[TopicPartitions, ...] = ()
    target_tasks: StreamsTasks = _NO_TASKS

    def reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state in (None, STABLE) and self.member_epoch == assignment_epoch


@dataclass(frozen=True)
class ModernGroup:
    """A modern group as the coordinator derives it (Kafka's state names)."""

    group_id: str
    group_type: GroupType
    state: str  # Empty | Assigning | Reconciling | Stable; NotReady (streams)
    group_epoch: int
    target_assignment_epoch: int  # -1 before the first assignment
    members: tuple[ModernMember, ...]  # by member id
    reconciling_members: int
    classic_members: int
    topology_epoch: int | None  # streams groups' topology; None without one


@dataclass(frozen=True)
class ModernFold:
    """What one modern group's records said so far; ``epoch`` None until its metadata record."""

    group_type: GroupType
    epoch: int | None = None
    assignment_epoch: int = -1
    members: Mapping[str, ModernMember] = field(default_factory=dict)
    targets: Mapping[str, tuple[TopicPartitions, ...] | StreamsTasks] = field(default_factory=dict)
    topology_epoch: int | None = None
    validated_topology_epoch: int = -1


@dataclass(frozen=True)
class GroupFold:
    """Everything the model keeps of one group id: its classic and its modern side."""

    group_id: str
    classic: GroupMetadata | None = None
    modern: ModernFold | None = None

    @property
    def modern_live(self) -> bool:
        return self.modern is not None and self.modern.epoch is not None


def group_of(record: Record) -> str | None:
    """The group id of a record the model folds; None for the others."""
    return record.group if isinstance(record, _FOLDED) else None


def apply(fold: GroupFold | None, record: Record) -> GroupFold | None:
    """The group after one more of its records; None once nothing of it is left."""
    group = group_of(record)
    if group is None:
        return fold
    new = fold or GroupFold(group)
    match record:
        case GroupMetadata() if not new.modern_live:
            new = replace(new, classic=record)
        case GroupTombstone(group_type=GroupType.CLASSIC):
            new = replace(new, classic=None)
        case GroupTombstone() | SubRecordTombstone() if new.modern and new.modern.group_type is record.group_type:
            deleted = isinstance(record, GroupTombstone)
            new = replace(new, modern=None if deleted else _without(new.modern, record))
        case GroupMetadata() | GroupTombstone() | SubRecordTombstone():
            pass  # stale while a modern group stands, or a tombstone of nothing: ignored, as Kafka does
        case _ if (modern := _modern_side(new, record.group_type)) is not None:
            if isinstance(record, GroupMetadataRecord):
                new = replace(new, classic=None, modern=_with_group_metadata(modern, record))
            else:
                new = replace(new, modern=_with_sub_record(modern, record))
    return None if new.classic is None and new.modern is None else new


def fold_records(records: Iterable[Record]) -> dict[str, GroupFold]:
    """Every group of a sequence of records (in offset order)."""
    return fold_by_key(records, group_of, apply)


def view(fold: GroupFold) -> ModernGroup | GroupMetadata | None:
    """What the group is now: a modern group, a classic one (its latest GroupMetadata, for
    :func:`states.state_from_metadata`), or None (deleted, or not yet created)."""
    modern = fold.modern
    if modern is not None and modern.epoch is not None:
        return _modern_group(fold.group_id, modern, modern.epoch)
    return fold.classic


# --- folding -----------------------------------------------------------------------------


def _modern_side(fold: GroupFold, group_type: GroupType) -> ModernFold | None:
    """The modern side a record of this group type goes to; None if another type's group
    holds the id (Kafka's coordinator refuses such a log)."""
    if fold.modern is None or (fold.modern.group_type is not group_type and not fold.modern_live):
        return ModernFold(group_type)
    return fold.modern if fold.modern.group_type is group_type else None


def _with_group_metadata(modern: ModernFold, record: GroupMetadataRecord) -> ModernFold:
    validated = record.validated_topology_epoch if isinstance(record, StreamsGroupMetadata) else -1
    return replace(modern, epoch=record.epoch, validated_topology_epoch=validated)


def _with_sub_record(modern: ModernFold, record: Record) -> ModernFold:
    match record:
        case ConsumerGroupMember() | ShareGroupMember() | StreamsGroupMember():
            return _with_member(modern, record.member_id, _member_metadata(record))
        case CurrentAssignment() | StreamsCurrentAssignment():
            return _with_member(modern, record.member_id, _current_assignment(record))
        case TargetAssignment(member_id=member_id, partitions=partitions):
            return replace(modern, targets={**modern.targets, member_id: partitions})
        case StreamsTargetAssignment(member_id=member_id, tasks=tasks):
            return replace(modern, targets={**modern.targets, member_id: tasks})
        case TargetAssignmentMetadata(assignment_epoch=epoch):
            return replace(modern, assignment_epoch=epoch)
        case StreamsTopology(epoch=epoch):
            return replace(modern, topology_epoch=epoch)
    return modern


def _without(modern: ModernFold, tombstone: SubRecordTombstone) -> ModernFold:
    member_id = tombstone.member_id or ""
    match tombstone.sub_record:
        case SubRecord.MEMBER:
            return replace(modern, members={k: m for k, m in modern.members.items() if k != member_id})
        case SubRecord.CURRENT_ASSIGNMENT if member_id in modern.members:
            # Kafka keeps the member, leaving, until its metadata's own tombstone
            left = dict(member_epoch=_LEFT_EPOCH, previous_member_epoch=_LEFT_EPOCH, assigned_partitions=(),
                        partitions_pending_revocation=(), assigned_tasks=_NO_TASKS, tasks_pending_revocation=_NO_TASKS)
            return _with_member(modern, member_id, left)
        case SubRecord.TARGET_ASSIGNMENT:
            return replace(modern, targets={k: t for k, t in modern.targets.items() if k != member_id})
        case SubRecord.TARGET_ASSIGNMENT_METADATA:
            return replace(modern, assignment_epoch=-1)
        case SubRecord.TOPOLOGY:
            return replace(modern, topology_epoch=None)
    return modern


def _with_member(modern: ModernFold, member_id: str, changes: Mapping[str, object]) -> ModernFold:
    member = replace(modern.members.get(member_id) or ModernMember(member_id), **changes)
    return replace(modern, members={**modern.members, member_id: member})


def _member_metadata(record: MemberRecord) -> dict[str, object]:
    changes: dict[str, object] = dict(client_id=record.client_id, client_host=record.client_host,
                                      rack_id=record.rack_id)
    match record:
        case ConsumerGroupMember():
            changes.update(instance_id=record.instance_id, subscribed_topic_names=record.subscribed_topic_names,
                           subscribed_topic_regex=record.subscribed_topic_regex,
                           server_assignor=record.server_assignor, rebalance_timeout_ms=record.rebalance_timeout_ms,
                           classic_protocol=record.classic_protocol is not None)
        case ShareGroupMember():
            changes.update(subscribed_topic_names=record.subscribed_topic_names)
        case StreamsGroupMember():
            changes.update(instance_id=record.instance_id, rebalance_timeout_ms=record.rebalance_timeout_ms,
                           process_id=record.process_id)
    return changes


def _current_assignment(record: CurrentAssignment | StreamsCurrentAssignment) -> dict[str, object]:
    changes: dict[str, object] = dict(
        member_epoch=record.member_epoch,
        previous_member_epoch=record.previous_member_epoch,
        state=None if record.state is None else _MEMBER_STATES[record.group_type].get(record.state, "UNKNOWN"),
    )
    if isinstance(record, StreamsCurrentAssignment):
        changes.update(assigned_tasks=record.assigned, tasks_pending_revocation=record.pending_revocation)
    else:
        changes.update(assigned_partitions=record.assigned_partitions,
                       partitions_pending_revocation=record.partitions_pending_revocation)
    return changes


# --- viewing -----------------------------------------------------------------------------


def _modern_group(group_id: str, modern: ModernFold, epoch: int) -> ModernGroup:
    members = tuple(_with_target(modern.members[k], modern.targets.get(k)) for k in sorted(modern.members))
    reconciling = sum(not m.reconciled_to(modern.assignment_epoch) for m in members)
    return ModernGroup(
        group_id=group_id,
        group_type=modern.group_type,
        state=_state(modern, epoch, members, reconciling),
        group_epoch=epoch,
        target_assignment_epoch=modern.assignment_epoch,
        members=members,
        reconciling_members=reconciling,
        classic_members=sum(m.classic_protocol for m in members),
        topology_epoch=modern.topology_epoch,
    )


def _with_target(member: ModernMember, target: tuple[TopicPartitions, ...] | StreamsTasks | None) -> ModernMember:
    if isinstance(target, StreamsTasks):
        return replace(member, target_tasks=target)
    return member if target is None else replace(member, target_partitions=target)


def _state(modern: ModernFold, epoch: int, members: tuple[ModernMember, ...], reconciling: int) -> str:
    """Kafka's maybeUpdateGroupState of ConsumerGroup, ShareGroup and StreamsGroup."""
    if not members:
        return "Empty"
    if modern.group_type is GroupType.SHARE:
        return "Stable"
    if modern.group_type is GroupType.STREAMS and (
        modern.topology_epoch is None or modern.topology_epoch != modern.validated_topology_epoch
    ):
        return "NotReady"
    if epoch > modern.assignment_epoch:
        return "Assigning"
    return "Reconciling" if reconciling else "Stable"
