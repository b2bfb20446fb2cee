import dataclasses

from kmon.events import BrokerState, ControllerState, GroupState, PartitionState
from streaming.fold.transitions import (BrokerTransitions, PartitionTransitions, broker_transitions,
                                        controller_transitions, group_transitions, partition_transitions)


def part(leader: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(topic="t", partition=0, leader=leader, leader_epoch=0, isr=isr,
                          controller_epoch=1)


def kraft(leader: int, isr: tuple[int, ...], elr: tuple[int, ...] = (), recovering: bool = False) -> PartitionState:
    return dataclasses.replace(part(leader, isr), partition_epoch=3, elr=elr, last_known_elr=(),
                               leader_recovery_state=int(recovering))


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


def test_a_replica_a_move_takes_out_leaves_the_isr_without_a_shrink():
    """[1, 2] moved to [1, 3]: 3 joined, then the controller took 2 out of the replicas and the ISR."""
    joined = dataclasses.replace(part(1, (1, 2, 3)), remaining=(1, 3))
    t = partition_transitions(joined, dataclasses.replace(part(1, (1, 3)), remaining=(1, 3)))
    assert (t.shrinks, t.removed, t.expands) == (frozenset(), {2}, frozenset())
    # a broker the partition keeps that falls behind meanwhile still shrinks it
    t = partition_transitions(joined, dataclasses.replace(part(1, (1,)), remaining=(1, 3)))
    assert (t.shrinks, t.removed) == ({3}, {2})
    # where what the partition keeps is not known, leaving the ISR is a shrink
    assert partition_transitions(joined, part(1, (1, 3))).shrinks == {2}


def test_isr_reordering_is_no_change():
    assert partition_transitions(part(1, (1, 2)), part(1, (2, 1))) == PartitionTransitions()


# ------------------------------------------------------------------ partitions under KRaft

def test_an_election_from_the_eligible_leader_replicas_is_clean():
    """KIP-966: 2 left the ISR below min ISR and stayed eligible; the last ISR member died."""
    t = partition_transitions(kraft(-1, (1,), elr=(2,)), kraft(2, (2,)))
    assert t == PartitionTransitions(shrinks=frozenset({1}), expands=frozenset({2}), election=True, elr=True)


def test_a_kraft_leader_outside_the_isr_and_the_elr_is_unclean():
    t = partition_transitions(kraft(-1, (1,), elr=(2,)), kraft(3, (3,), recovering=True))
    assert t.election and t.unclean and not t.elr
    # the same judgement without the controller's mark, e.g. on a cluster without KIP-704
    t = partition_transitions(kraft(-1, (1,), elr=(2,)), kraft(3, (3,)))
    assert t.election and t.unclean and not t.elr


def test_entering_leader_recovery_is_unclean_even_after_a_state_kmon_missed():
    """The controller marks its unclean elections: the mark holds whatever kmon saw before."""
    t = partition_transitions(kraft(1, (1, 2)), kraft(2, (2,), recovering=True), consecutive=False)
    assert t.election and t.unclean and not t.elr
    t = partition_transitions(kraft(1, (1, 2)), kraft(2, (2,)), consecutive=False)
    assert t.election and not t.unclean and not t.elr
    # an eligible replica elected while the partition is marked is unclean too
    assert partition_transitions(kraft(-1, (1,), elr=(2,)), kraft(2, (2,), recovering=True)).unclean


def test_leader_recovery_counts_once_and_only_with_an_election():
    recovering = kraft(2, (2,), recovering=True)
    assert partition_transitions(recovering, kraft(2, (2,))) == PartitionTransitions()
    assert partition_transitions(recovering, kraft(2, (2, 3), recovering=True)).expands == {3}
    # a second election while still recovering is judged by the ISR: 3 was not in it
    t = partition_transitions(recovering, kraft(3, (3,), recovering=True))
    assert t.election and t.unclean
    assert not partition_transitions(kraft(2, (2, 3), recovering=True), kraft(3, (3,), recovering=True)).unclean


def test_a_kraft_election_within_the_isr_is_clean():
    t = partition_transitions(kraft(1, (1, 2), elr=()), kraft(2, (2,)))
    assert t.election and not t.unclean and not t.elr


def test_zookeeper_mode_states_are_judged_by_the_isr_alone():
    """No ELR in ZooKeeper mode, and its leader_recovery_state is not read as KRaft's mark."""
    marked = dataclasses.replace(part(2, (2,)), leader_recovery_state=1)
    assert not partition_transitions(part(1, (1, 2)), marked).unclean
    assert partition_transitions(part(1, (1,)), marked) == PartitionTransitions(
        shrinks=frozenset({1}), expands=frozenset({2}), election=True, unclean=True)


# ------------------------------------------------------------------ brokers (KRaft)

def reg(fenced: bool = False, shutting_down: bool = False, incarnation: str | None = "i1") -> BrokerState:
    return BrokerState(1, "h", 9092, None, fenced=fenced, in_controlled_shutdown=shutting_down,
                       incarnation_id=incarnation, broker_epoch=10)


def test_fenced_unfenced_and_controlled_shutdown():
    assert broker_transitions(reg(), reg(fenced=True)) == BrokerTransitions(fenced=True)
    assert broker_transitions(reg(fenced=True), reg()) == BrokerTransitions(unfenced=True)
    assert broker_transitions(reg(), reg(shutting_down=True)) == BrokerTransitions(controlled_shutdown=True)
    # the shutdown completes: fenced, the flag kept
    assert broker_transitions(reg(shutting_down=True), reg(True, True)) == BrokerTransitions(fenced=True)
    assert broker_transitions(reg(True, True), reg(True, True)) == BrokerTransitions()


def test_a_restarted_broker_registers_anew():
    """Its new registration starts fenced: that is the registration, not a fencing."""
    assert broker_transitions(reg(), reg(fenced=True, incarnation="i2")) == BrokerTransitions(reregistered=True)
    assert broker_transitions(reg(True, True), reg(fenced=True, incarnation="i2")) == \
        BrokerTransitions(reregistered=True)


def test_zookeeper_mode_registrations_change_nothing_of_these_but_a_registration_made_again():
    zk = BrokerState(1, "h", 9092, None, registration_zxid=0x50)
    assert broker_transitions(zk, dataclasses.replace(zk, host="h2")) == BrokerTransitions()
    # its ephemeral znode made again: the old one was deleted, unseen
    assert broker_transitions(zk, dataclasses.replace(zk, registration_zxid=0x90)) == \
        BrokerTransitions(gone_between=True)
    # a state kept from before kmon carried the zxid tells nothing
    assert broker_transitions(dataclasses.replace(zk, registration_zxid=None), zk) == BrokerTransitions()


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
