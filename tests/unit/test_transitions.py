import dataclasses

from kmon.events import ControllerState, GroupState, PartitionState
from streaming.fold.transitions import (PartitionTransitions, controller_transitions, group_transitions,
                                   partition_transitions)


def part(leader: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(topic="t", partition=0, leader=leader, leader_epoch=0, isr=isr,
                          controller_epoch=1)


def ctl(broker: int, epoch: int | None, ts: int | None = None) -> ControllerState:
    return ControllerState(broker_id=broker, epoch=epoch, timestamp_ms=ts)


def grp(generation: int) -> GroupState:
    return GroupState(group="g", state="Stable", generation=generation)


# ------------------------------------------------------------------ partitions

def test_first_observation_counts_nothing():
    assert partition_transitions(None, part(1, (1, 2, 3))) == PartitionTransitions()


def test_isr_shrink_and_expand_per_broker():
    t = partition_transitions(part(1, (1, 2, 3)), part(1, (1, 3, 4)))
    assert t.shrinks == {2} and t.expands == {4}
    assert not t.election and not t.unclean


def test_two_brokers_leave_at_once():
    assert partition_transitions(part(1, (1, 2, 3)), part(1, (1,))).shrinks == {2, 3}


def test_clean_election():
    t = partition_transitions(part(1, (1, 2, 3)), part(2, (2, 3)))
    assert t.election and not t.unclean and t.shrinks == {1}


def test_going_offline_is_not_an_election():
    t = partition_transitions(part(1, (1,)), part(-1, (1,)))
    assert not t.election and not t.unclean


def test_coming_back_from_offline_is_an_election():
    assert partition_transitions(part(-1, (1,)), part(1, (1,))) == PartitionTransitions(election=True)


def test_unclean_election_leader_not_in_previous_isr():
    t = partition_transitions(part(-1, (1,)), part(2, (2,)))
    assert t.election and t.unclean and t.shrinks == {1} and t.expands == {2}


def test_an_election_after_a_state_kmon_missed_is_not_judged_unclean():
    """The new leader may have rejoined the ISR in the state kmon did not see."""
    t = partition_transitions(part(1, (1,)), part(2, (2,)), consecutive=False)
    assert t.election and not t.unclean and t.shrinks == {1} and t.expands == {2}


def test_a_topic_being_deleted_loses_replicas_without_a_shrink():
    deleting = dataclasses.replace(part(-1, (2,)), deleting=True)
    assert partition_transitions(part(1, (1, 2)), deleting) == PartitionTransitions()
    assert partition_transitions(deleting, dataclasses.replace(deleting, isr=())) == PartitionTransitions()


def test_isr_reordering_is_no_change():
    assert partition_transitions(part(1, (1, 2)), part(1, (2, 1))) == PartitionTransitions()


# ------------------------------------------------------------------ controller

def test_controller_first_observation():
    assert controller_transitions(None, ctl(1, 5)) == 0


def test_controller_change_and_to_none():
    assert controller_transitions(ctl(1, 5), ctl(2, 6)) == 1
    assert controller_transitions(ctl(1, 5), ctl(-1, 5)) == 1
    assert controller_transitions(ctl(-1, 5), ctl(2, 6)) == 1


def test_no_controller_epoch_change_is_no_change():
    assert controller_transitions(ctl(-1, 5), ctl(-1, 6)) == 0


def test_self_reelection_counts_by_epoch_without_timestamps():
    assert controller_transitions(ctl(1, 5), ctl(1, 6)) == 1
    assert controller_transitions(ctl(1, 6), ctl(1, 6)) == 0
    assert controller_transitions(ctl(1, 6), ctl(1, 5)) == 0


def test_self_reelection_counts_by_new_registration():
    assert controller_transitions(ctl(1, 5, ts=100), ctl(1, 6, ts=200)) == 1


def test_epoch_bump_of_an_already_counted_registration():
    # /controller (new broker) and /controller_epoch seen as two events of one election
    assert controller_transitions(ctl(1, 5, ts=100), ctl(2, 5, ts=200)) == 1
    assert controller_transitions(ctl(2, 5, ts=200), ctl(2, 6, ts=200)) == 0


# ------------------------------------------------------------------ groups

def test_group_first_seen_counts_nothing():
    assert group_transitions(None, grp(5)) == 0


def test_group_generation_steps_incl_skipped():
    assert group_transitions(grp(5), grp(6)) == 1
    assert group_transitions(grp(6), grp(9)) == 3
    assert group_transitions(grp(9), grp(9)) == 0


def test_group_unknown_or_lower_generation_counts_nothing():
    assert group_transitions(grp(-1), grp(4)) == 0
    assert group_transitions(grp(4), grp(-1)) == 0
    assert group_transitions(grp(4), grp(2)) == 0
