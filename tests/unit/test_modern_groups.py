"""Tests of collectors.groups.modern_groups: modern groups folded from their records as Kafka's
coordinator writes them (state derivation, epoch steps, members leaving, deletion and
re-creation, protocol moves between classic and consumer groups)."""

from __future__ import annotations

from dataclasses import replace

from collectors.groups.modern_groups import GroupFold, ModernGroup, apply, fold_records, group_of, view
from collectors.groups.codec.offsets_codec import (
    GroupMetadata,
    GroupTombstone,
    GroupTopicMetadata,
    GroupType,
    OffsetCommit,
    ShareGroupMember,
    ShareGroupMetadata,
    StreamsCurrentAssignment,
    StreamsGroupMember,
    StreamsGroupMetadata,
    StreamsTargetAssignment,
    StreamsTasks,
    StreamsTopology,
    SubRecord,
    SubtopologyTasks,
    TargetAssignmentMetadata,
    decode_record,
)
from tests.unit.groups_builders import (CONSUMER, SHARE, STREAMS, G, UNREVOKED, current, deletion, epoch, gone, join,
                                       member, parts, target, target_epoch)
from tests.unit.offsets_builders import encode, key, sample_group


def leave(member_id: str) -> list[object]:
    """A member leaving, in the order Kafka writes its tombstones."""
    return [gone(SubRecord.CURRENT_ASSIGNMENT, member_id), gone(SubRecord.TARGET_ASSIGNMENT, member_id),
            gone(SubRecord.MEMBER, member_id)]


def group(records: list[object]) -> ModernGroup | GroupMetadata | None:
    folds = fold_records(records)  # type: ignore[arg-type]
    return view(folds[G]) if G in folds else None


def modern(records: list[object]) -> ModernGroup:
    result = group(records)
    assert isinstance(result, ModernGroup)
    return result


# --- State derivation --------------------------------------------------------------------


def test_a_group_without_members_is_empty() -> None:
    g = modern([epoch(5), target_epoch(5)])
    assert (g.state, g.group_epoch, g.target_assignment_epoch, g.members) == ("Empty", 5, 5, ())


def test_a_group_epoch_ahead_of_its_target_assignment_is_assigning() -> None:
    g = modern([member("m1"), epoch(1)])
    assert (g.state, g.group_epoch, g.target_assignment_epoch) == ("Assigning", 1, -1)


def test_members_behind_the_target_assignment_are_reconciling() -> None:
    g = modern(join("m1", 1, 0, 1)[:-1])  # the target is there, the member not yet at it
    assert (g.state, g.reconciling_members) == ("Reconciling", 1)
    assert g.members[0].target_partitions == parts(0, 1)
    assert g.members[0].assigned_partitions == ()


def test_members_at_the_target_epoch_and_stable_make_a_stable_group() -> None:
    g = modern(join("m1", 1, 0, 1))
    assert (g.state, g.reconciling_members) == ("Stable", 0)
    m = g.members[0]
    assert (m.member_id, m.client_id, m.rack_id, m.subscribed_topic_names, m.server_assignor) == (
        "m1", "client-m1", "rack-a", ("orders",), "uniform")
    assert (m.member_epoch, m.previous_member_epoch, m.state, m.assigned_partitions) == (1, 0, "STABLE", parts(0, 1))


def test_a_member_at_the_target_epoch_still_revoking_is_reconciling() -> None:
    g = modern(join("m1", 1, 0, 1) + [current("m1", 1, 0, state=UNREVOKED, revoking=(1,))])
    assert (g.state, g.reconciling_members) == ("Reconciling", 1)
    assert (g.members[0].state, g.members[0].partitions_pending_revocation) == ("UNREVOKED_PARTITIONS", parts(1))


def test_epoch_steps_as_a_second_member_joins() -> None:
    records = join("m1", 1, 0, 1, 2, 3)
    steps = [modern(records).state]
    for record in [member("m2"), epoch(2), target("m1", 0, 1), target("m2", 2, 3), target_epoch(2),
                   current("m1", 2, 0, 1, state=UNREVOKED, revoking=(2, 3)), current("m1", 2, 0, 1),
                   current("m2", 2, 2, 3)]:
        records.append(record)
        g = modern(records)
        steps.append((g.state, g.group_epoch, g.target_assignment_epoch, g.reconciling_members))
    assert steps == [
        "Stable",
        ("Reconciling", 1, 1, 1),  # m2 at Kafka's initial epoch 0; its epoch bump follows in the batch
        ("Assigning", 2, 1, 1),  # the epoch bumped: the assignor runs
        ("Assigning", 2, 1, 1),
        ("Assigning", 2, 1, 1),
        ("Reconciling", 2, 2, 2),
        ("Reconciling", 2, 2, 2),  # m1 at epoch 2 but still revoking
        ("Reconciling", 2, 2, 1),
        ("Stable", 2, 2, 0),
    ]


def test_a_member_leaving() -> None:
    records = join("m1", 1, 0) + [member("m2"), epoch(2), target("m2", 1), target_epoch(2), current("m1", 2, 0),
                                  current("m2", 2, 1)]
    assert [m.member_id for m in modern(records).members] == ["m1", "m2"]
    records.append(leave("m2")[0])  # its current assignment deleted: leaving, not yet gone
    m2 = modern(records).members[1]
    assert (m2.member_epoch, m2.assigned_partitions, modern(records).state) == (-1, (), "Reconciling")
    records += leave("m2")[1:] + [epoch(3), target("m1", 0, 1), target_epoch(3)]
    g = modern(records)
    assert ([m.member_id for m in g.members], g.state) == (["m1"], "Reconciling")
    g = modern(records + [current("m1", 3, 0, 1)])
    assert (g.state, g.group_epoch, g.members[0].assigned_partitions) == ("Stable", 3, parts(0, 1))


def test_the_last_member_leaving_empties_the_group() -> None:
    g = modern(join("m1", 1, 0) + leave("m1") + [epoch(2)])
    assert (g.state, g.members, g.group_epoch) == ("Empty", (), 2)


def test_member_states_are_kafkas_names() -> None:
    g = modern(join("m1", 1, 0) + [current("m1", 1, 0, state=2), *join("m2", 1), current("m2", 1, state=9)])
    assert [m.state for m in g.members] == ["UNRELEASED_PARTITIONS", "UNKNOWN"]


def test_a_37_member_without_state_is_reconciled_by_its_epoch_alone() -> None:
    assert modern(join("m1", 1, 0)[:-1] + [current("m1", 1, 0, state=None)]).state == "Stable"
    assert modern(join("m1", 2, 0)[:-1] + [current("m1", 1, 0, state=None)]).state == "Reconciling"


# --- Deletion and re-creation ------------------------------------------------------------


def test_a_deleted_group_is_gone() -> None:
    records = join("m1", 4, 0) + deletion("m1")
    assert fold_records(records) == {}  # type: ignore[arg-type]
    fold = None
    for record in records:
        fold = apply(fold, record)  # type: ignore[arg-type]
    assert fold is None


def test_a_stray_sub_record_after_deletion_does_not_revive_the_group() -> None:
    records = join("m1", 4, 0) + deletion("m1")
    for stray in [current("m1", 4, 0), member("m1"), target("m1", 0), target_epoch(4)]:
        assert group(records + [stray]) is None


def test_a_recreated_group_starts_at_its_new_epoch_with_its_new_members() -> None:
    records = join("m1", 4, 0) + join("m2", 5, 1) + deletion("m1", "m2") + join("m3", 1, 0, 1)
    g = modern(records)
    assert (g.state, g.group_epoch, g.target_assignment_epoch) == ("Stable", 1, 1)
    assert [m.member_id for m in g.members] == ["m3"]


def test_a_deletion_step_by_step() -> None:
    records = join("m1", 4, 0)
    steps = []
    for record in deletion("m1")[:-1]:
        records.append(record)
        g = modern(records)
        steps.append((g.state, len(g.members), g.target_assignment_epoch))
    assert steps == [("Reconciling", 1, 4), ("Reconciling", 1, 4), ("Assigning", 1, -1), ("Empty", 0, -1),
                     ("Empty", 0, -1)]


def test_a_group_recreated_as_another_type_is_not_held_back_by_stray_records() -> None:
    stray = ShareGroupMember(G, "s1", None, "c", "h", ("orders",))
    records = join("m1", 4, 0) + deletion("m1") + [stray] + join("m2", 1, 0)
    g = modern(records)
    assert (g.group_type, [m.member_id for m in g.members]) == (CONSUMER, ["m2"])


def test_tombstones_of_an_unknown_group_are_ignored() -> None:
    assert apply(None, GroupTombstone(G, CONSUMER)) is None
    assert apply(None, gone(SubRecord.MEMBER, "m1")) is None
    assert fold_records(deletion("m1")) == {}  # type: ignore[arg-type]


# --- Protocol moves ----------------------------------------------------------------------


def classic_group() -> GroupMetadata:
    return replace(sample_group(4), group=G)


def test_a_classic_group_is_viewed_as_its_group_metadata() -> None:
    assert group([classic_group()]) == classic_group()
    assert group([classic_group(), GroupTombstone(G, GroupType.CLASSIC)]) is None


def test_an_online_upgrade_makes_the_classic_group_a_consumer_group() -> None:
    # ConsumerGroup.fromClassicGroup: the classic tombstone, then the consumer group's records,
    # its classic members flagged; here one KIP-848 member joins the group of two classic ones.
    upgrade = [GroupTombstone(G, GroupType.CLASSIC), member("c1", classic=True), member("c2", classic=True),
               epoch(43), target("c1", 0), target("c2", 1), target_epoch(43), current("c1", 43, 0),
               current("c2", 43, 1), member("k1"), epoch(44)]
    records: list[object] = [classic_group()]
    views = [group(records)]
    for record in upgrade:
        records.append(record)
        views.append(group(records))
    assert views[0] == classic_group()
    assert views[1:4] == [None, None, None]  # one batch in Kafka: publish it whole
    g = views[-1]
    assert isinstance(g, ModernGroup)
    assert (g.group_type, g.group_epoch, g.state, g.classic_members) == (CONSUMER, 44, "Assigning", 2)
    assert [(m.member_id, m.classic_protocol) for m in g.members] == [("c1", True), ("c2", True), ("k1", False)]


def test_a_classic_record_while_the_consumer_group_stands_is_stale() -> None:
    records = join("m1", 1, 0)
    assert group(records + [classic_group()]) == modern(records)
    assert group(records + [GroupTombstone(G, GroupType.CLASSIC)]) == modern(records)
    assert group(records + [classic_group()] + deletion("m1")) is None  # it does not come back either


def test_a_downgrade_makes_the_consumer_group_classic_again() -> None:
    # ConsumerGroup -> ClassicGroup when its last KIP-848 member leaves: the consumer group's
    # tombstones, then the classic group's GroupMetadata.
    records = join("c1", 7, 0, classic=True) + deletion("c1") + [classic_group()]
    assert group(records) == classic_group()


def test_records_of_another_group_type_do_not_touch_a_standing_group() -> None:
    records = join("m1", 1, 0)
    share_records = [ShareGroupMember(G, "s1", None, "c", "h", ("orders",)), ShareGroupMetadata(G, 9, 0),
                     GroupTombstone(G, SHARE), gone(SubRecord.MEMBER, "m1", SHARE)]
    assert group(records + share_records) == modern(records)


# --- Share and streams groups ------------------------------------------------------------


def test_share_groups_are_empty_or_stable() -> None:
    s_member = ShareGroupMember(G, "s1", "rack-b", "share-1", "/10.0.0.3", ("orders",))
    assert modern([ShareGroupMetadata(G, 1, 0)]).state == "Empty"
    g = modern([s_member, ShareGroupMetadata(G, 2, 0)])  # behind its assignment: still Stable
    assert (g.group_type, g.state, g.reconciling_members) == (SHARE, "Stable", 1)
    assert (g.members[0].client_id, g.members[0].subscribed_topic_names) == ("share-1", ("orders",))


TASKS = StreamsTasks(active=(SubtopologyTasks("0", (0, 1)),))


def streams_records(validated: int) -> list[object]:
    return [
        StreamsGroupMember(G, "s1", None, None, "app-1", "/10.0.0.4", 45_000, 3, "process-1", None, ()),
        StreamsGroupMetadata(G, 2, 0, validated),
        StreamsTopology(G, 3, ()),
        StreamsTargetAssignment(G, "s1", TASKS),
        TargetAssignmentMetadata(G, STREAMS, 2, 0),
        StreamsCurrentAssignment(G, "s1", 2, 1, 1, TASKS, StreamsTasks()),  # streams STABLE is 1
    ]


def test_streams_group_states() -> None:
    assert modern(streams_records(3)[:2]).state == "NotReady"  # no topology
    assert modern(streams_records(-1)).state == "NotReady"  # topology not validated
    assert modern(streams_records(3)[:3]).state == "Assigning"
    assert modern(streams_records(3)[:5]).state == "Reconciling"
    g = modern(streams_records(3))
    assert (g.state, g.topology_epoch) == ("Stable", 3)
    m = g.members[0]
    assert (m.process_id, m.state, m.assigned_tasks, m.target_tasks) == ("process-1", "STABLE", TASKS, TASKS)
    assert modern(streams_records(3) + [gone(SubRecord.TOPOLOGY, group_type=STREAMS)]).state == "NotReady"


# --- What the model folds ----------------------------------------------------------------


def test_committed_offsets_and_topic_metadata_are_not_folded() -> None:
    commit = OffsetCommit(G, "orders", 0, 4, 10, -1, "", 0, -1)
    assert group_of(commit) is None
    assert group_of(GroupTopicMetadata(G, CONSUMER, ())) is None
    assert fold_records([commit]) == {}  # type: ignore[list-item]
    folds = fold_records(join("m1", 1, 0) + [commit])  # type: ignore[arg-type]
    assert isinstance(folds[G], GroupFold) and view(folds[G]) == modern(join("m1", 1, 0))


def test_decoded_records_fold_like_the_dataclasses() -> None:
    records = join("m1", 1, 0, 1) + [member("m2"), epoch(2)]
    decoded = [decode_record(*encode(r)) for r in records]
    assert decoded == records
    decoded.append(decode_record(key(8, G, "m2"), None))
    assert modern(decoded) == modern(records + [leave("m2")[0]])


def test_a_consumer_groups_metadata_ends_the_classic_view_for_good() -> None:
    # without the classic tombstone of an upgrade (Kafka's coordinator would refuse this log),
    # the classic group must not come back when the consumer group goes
    assert group([classic_group()] + join("m1", 1, 0) + deletion("m1")) is None
