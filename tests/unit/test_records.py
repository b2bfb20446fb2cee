import dataclasses
import json
from typing import Mapping

import pytest

from kmon.codec import decode, encode
from kmon.events import (ControllerState, Event, GroupMember, GroupState, MalformedEvent, PartitionState,
                         SnapshotMarker, TopicLag, TopicState, ZnodeMeta)
from streaming.fold.entity import (Applied, EntityRecord, apply_event, record_from_json,
                               record_to_json)


def zk(kind: str, entity: str, data, zxid: int | None, op: str = "upsert", at: int = 1000,
       snapshot_id: str | None = None) -> Event:
    return Event(cluster="c1", source="zk", kind=kind, entity=entity, op=op, observed_ms=at,
                 data=data, zxid=zxid, snapshot_id=snapshot_id)


def part_event(zxid: int, leader: int, isr: tuple[int, ...], op: str = "upsert", **kw) -> Event:
    state = PartitionState("t", 0, leader, 0, isr, 1) if op == "upsert" else None
    return zk("partition", "partition:t:0", state, zxid, op=op, **kw)


def group_event(generation: int, state: str = "Stable", at: int = 1000, op: str = "upsert",
                **kw) -> Event:
    data = GroupState(group="g", state=state, generation=generation, **kw) if op == "upsert" else None
    return Event(cluster="c1", source="groups", kind="group", entity="group:g", op=op,
                 observed_ms=at, data=data)


def marker(kind: str, snapshot_id: str, at: int, begun_ms: int | None = None) -> Event:
    return Event(cluster="c1", source="zk", kind=kind, entity="snapshot:zk", op="marker",
                 observed_ms=at, data=SnapshotMarker(snapshot_id, "reconnect", begun_ms=begun_ms))


def fold(events, record: EntityRecord | None = None) -> tuple[EntityRecord | None, list[Applied]]:
    outcomes = []
    for e in events:
        record, applied, _ = apply_event(record, e)
        outcomes.append(applied)
    return record, outcomes


# ------------------------------------------------------------------ partitions

FOLLOWER_DIES = [part_event(10, 1, (1, 2, 3)), part_event(11, 1, (1, 3)), part_event(12, 1, (1, 2, 3))]
# ... then broker 2 takes over and broker 1 leaves the ISR: counts of the entity and per broker
LEADER_MOVES = FOLLOWER_DIES + [part_event(13, 2, (2, 3))]
LEADER_MOVES_COUNTS = ({"leader_elections": 1}, {"isr_shrinks": {2: 1, 1: 1}, "isr_expands": {2: 1}})


def counts(rec: EntityRecord) -> tuple[Mapping[str, int], Mapping[str, Mapping[int, int]]]:
    return rec.counters, rec.broker_counters


def test_counts_isr_changes_per_broker():
    rec, outcomes = fold(FOLLOWER_DIES)
    assert outcomes == [Applied.APPLIED] * 3
    assert rec.broker_counters == {"isr_shrinks": {2: 1}, "isr_expands": {2: 1}} and rec.counters == {}
    assert rec.position == 12 and rec.state.isr == (1, 2, 3)


def test_replaying_the_same_events_never_counts_twice():
    rec, _ = fold(LEADER_MOVES)
    replayed, outcomes = fold(LEADER_MOVES, rec)
    assert counts(replayed) == LEADER_MOVES_COUNTS and replayed.state == rec.state
    assert outcomes == [Applied.STALE, Applied.STALE, Applied.STALE, Applied.DUPLICATE]


def test_equal_state_at_a_newer_zxid_changes_nothing_but_the_bookkeeping():
    rec, _ = fold(LEADER_MOVES)
    rec2, applied, _ = apply_event(rec, part_event(20, 2, (2, 3), at=5000))
    assert applied is Applied.DUPLICATE
    assert counts(rec2) == LEADER_MOVES_COUNTS and rec2.position == 20 and rec2.last_observed_ms == 5000


def test_election_and_unclean_election():
    rec, _ = fold([part_event(1, 1, (1, 2)), part_event(2, 2, (2,)),      # clean
                   part_event(3, -1, (2,)),                               # offline
                   part_event(4, 3, (3,))])                               # unclean
    assert rec.counters["leader_elections"] == 2
    assert rec.counters["unclean_leader_elections"] == 1


@pytest.mark.parametrize("missed", [{"znode": ZnodeMeta("/p", 4, 3, 0, version_gap=1)}, {"snapshot_id": "s2"}],
                         ids=["coalesced-writes", "resync-snapshot"])
def test_an_election_after_states_kmon_did_not_see_counts_but_is_not_unclean(missed):
    """Broker 2 rejoined the ISR (1, 2) and was then elected cleanly, in writes ZooKeeper
    coalesced, or while the collector was away: its last seen ISR (1) does not show it."""
    start, _ = fold([part_event(1, 1, (1, 2)), part_event(2, 1, (1,))])
    event = dataclasses.replace(part_event(4, 2, (2,)), **missed)
    rec, _, told = apply_event(start, event)
    assert rec.counters["leader_elections"] == 1 and "unclean_leader_elections" not in rec.counters
    assert [t.kind for t in told] == ["isr_shrink", "isr_expand", "leader_election"]
    rec, _ = fold([part_event(4, 2, (2,))], start)   # every version seen: unclean
    assert rec.counters["unclean_leader_elections"] == 1


def test_duplicate_in_a_snapshot_records_the_snapshot_id():
    rec, _ = fold(FOLLOWER_DIES)
    rec2, applied, _ = apply_event(rec, part_event(12, 1, (1, 2, 3), snapshot_id="s2"))
    assert applied is Applied.DUPLICATE and rec2.snapshot_id == "s2"


def test_delete_keeps_a_tombstone_without_counters():
    rec, _ = fold(LEADER_MOVES)
    assert counts(rec) == LEADER_MOVES_COUNTS
    rec, applied, _ = apply_event(rec, part_event(14, 0, (), op="delete"))
    assert applied is Applied.APPLIED
    assert rec.deleted and rec.state is None and counts(rec) == ({}, {}) and rec.position == 14


def test_delete_at_the_records_zxid_still_deletes():
    rec, _ = fold(FOLLOWER_DIES)
    rec, applied, _ = apply_event(rec, part_event(12, 0, (), op="delete"))
    assert applied is Applied.APPLIED and rec.deleted


def test_older_delete_is_stale_and_repeated_delete_a_duplicate():
    rec, _ = fold(FOLLOWER_DIES)
    assert apply_event(rec, part_event(5, 0, (), op="delete"))[1] is Applied.STALE
    tomb, _, _ = apply_event(rec, part_event(13, 0, (), op="delete"))
    assert apply_event(tomb, part_event(14, 0, (), op="delete"))[1] is Applied.DUPLICATE


def test_stale_replay_after_delete_does_not_resurrect():
    rec, _ = fold(FOLLOWER_DIES + [part_event(13, 0, (), op="delete")])
    for old in FOLLOWER_DIES:
        again, applied, _ = apply_event(rec, old)
        assert applied is Applied.STALE and again.deleted and again.state is None


def test_recreate_after_delete_starts_afresh():
    rec, _ = fold(LEADER_MOVES + [part_event(14, 0, (), op="delete")])
    rec, applied, _ = apply_event(rec, part_event(15, 4, (4,)))   # nothing counted against (2,3)
    assert applied is Applied.APPLIED
    assert not rec.deleted and counts(rec) == ({}, {}) and rec.state.leader == 4
    rec, _, _ = apply_event(rec, part_event(16, 4, (4, 2)))       # and counted from zero again
    assert counts(rec) == ({}, {"isr_expands": {2: 1}})


def test_delete_of_an_unknown_entity_guards_against_older_upserts():
    rec, applied, _ = apply_event(None, part_event(13, 0, (), op="delete"))
    assert applied is Applied.APPLIED and rec.deleted
    assert apply_event(rec, part_event(12, 1, (1,)))[1] is Applied.STALE


def test_controller_changes():
    events = [zk("controller", "controller", ControllerState(b, e), z)
              for z, (b, e) in enumerate([(1, 5), (-1, 5), (2, 6), (2, 6)], start=1)]
    rec, outcomes = fold(events)
    assert rec.counters == {"controller_changes": 2}
    assert outcomes[-1] is Applied.DUPLICATE


def test_a_new_state_at_the_records_zxid_is_applied():
    """Kafka elects a controller with one multi-op (create /controller, set /controller_epoch):
    a collector that read /controller before it and /controller_epoch after it emitted "none,
    epoch 4" at the multi's zxid; the new controller's event has that same zxid."""
    events = [zk("controller", "controller", ControllerState(2, 3), 300),
              zk("controller", "controller", ControllerState(-1, 4), 400),
              zk("controller", "controller", ControllerState(3, 4), 400),
              zk("controller", "controller", ControllerState(3, 4), 400)]   # a resync's re-read
    rec, outcomes = fold(events)
    assert rec.state == ControllerState(3, 4)
    assert rec.counters == {"controller_changes": 2}
    assert outcomes == [Applied.APPLIED, Applied.APPLIED, Applied.APPLIED, Applied.DUPLICATE]


@pytest.mark.parametrize("event", [
    zk("topic", "partition:t:0", TopicState("t", None, {}), 1),          # kind of another record
    zk("partition", "partition:t:0", TopicState("t", None, {}), 1),      # data of another kind
    zk("partition", "partition:t:0", PartitionState("t", 0, 1, 0, (1,), 1), 1, op="marker"),
    Event("c2", "zk", "partition", "partition:t:0", "upsert", 1, PartitionState("t", 0, 1, 0, (1,), 1), 1),
])
def test_events_that_do_not_fit_the_record_are_malformed(event):
    rec, _ = fold(FOLLOWER_DIES)
    assert apply_event(rec, event) == (rec, Applied.MALFORMED, ())


# ------------------------------------------------------------------ groups

def test_group_generation_steps_incl_skipped():
    rec, outcomes = fold([group_event(5), group_event(6), group_event(9)])
    assert outcomes == [Applied.APPLIED] * 3
    assert rec.counters == {"rebalances": 4}            # first seen at 5 counts nothing


def test_group_lower_generation_is_stale_same_generation_updates():
    rec, _ = fold([group_event(5), group_event(6)])
    rec2, applied, _ = apply_event(rec, group_event(5, state="PreparingRebalance"))
    assert applied is Applied.STALE and rec2.state == rec.state
    members = (GroupMember("m1", "c", "h"),)
    rec3, applied, _ = apply_event(rec, group_event(6, members=members))
    assert applied is Applied.APPLIED and rec3.state.members == members
    assert rec3.counters == {"rebalances": 1}


def test_group_state_since_follows_the_group_state():
    rec, _ = fold([group_event(5, state="Stable", at=1000), group_event(5, state="Stable", at=2000,
                                                                           lag={"t": TopicLag(3, None)})])
    assert rec.state_since_ms == 1000
    rec, _, _ = apply_event(rec, group_event(5, state="PreparingRebalance", at=3000))
    assert rec.state_since_ms == 3000
    rec, _, _ = apply_event(rec, group_event(6, state="Stable", at=4000, state_since_ms=3500))
    assert rec.state_since_ms == 3500


def test_admin_events_without_generation_keep_the_known_one():
    rec, _ = fold([group_event(7, origin="offsets"), group_event(-1, state="PreparingRebalance"),
                   group_event(8, origin="offsets")])
    assert rec.state.generation == 8 and rec.counters == {"rebalances": 1}


def test_offsets_events_keep_the_polled_lag():
    lag = {"t": TopicLag(10, 2.5)}
    rec, _ = fold([group_event(7, lag=lag), group_event(8, origin="offsets")])
    assert rec.state.lag == lag


def test_group_deleted_and_recreated_restarts():
    rec, _ = fold([group_event(5), group_event(9), group_event(0, op="delete"), group_event(1)])
    assert not rec.deleted and rec.state.generation == 1 and rec.counters == {}


def test_dead_group_recreated_restarts_its_generations():
    rec, outcomes = fold([group_event(5), group_event(9), group_event(-1, state="Dead"),
                          group_event(1), group_event(2)])
    assert outcomes[-2:] == [Applied.APPLIED, Applied.APPLIED]
    assert rec.state.generation == 2 and rec.counters == {"rebalances": 1}


def test_a_lower_generation_that_began_later_is_a_recreated_group():
    """Deleted and recreated while no collector saw the delete: the new group's first
    generation began after everything known of the old one."""
    rec, outcomes = fold([group_event(9, origin="offsets", state_since_ms=5000, at=5100),
                          group_event(1, origin="offsets", state_since_ms=9000, at=9100),
                          group_event(2, origin="offsets", state_since_ms=9500, at=9600)])
    assert outcomes == [Applied.APPLIED] * 3
    assert rec.state.generation == 2 and rec.counters == {"rebalances": 1}


def test_a_lower_generation_that_began_earlier_is_stale():
    rec, outcomes = fold([group_event(9, origin="offsets", state_since_ms=5000, at=5100),
                          group_event(4, origin="offsets", state_since_ms=3000, at=9100)])
    assert outcomes[-1] == Applied.STALE and rec.state.generation == 9


def test_the_verdict_on_a_groups_consumers_stays_until_an_event_that_judges_again():
    rec, _ = fold([group_event(5, status="stalled", partition_status={"t:0": "stalled"}),
                   group_event(6, origin="offsets")])
    assert (rec.state.generation, rec.state.status, rec.state.partition_status) == (6, "stalled", {"t:0": "stalled"})
    rec, _ = fold([group_event(7, status="ok")], rec)
    assert (rec.state.status, rec.state.partition_status) == ("ok", {})


def test_a_group_moving_between_protocols_is_one_group_whatever_its_epoch():
    """An upgrade to the consumer protocol goes on from the classic generation (Kafka's rule), a
    downgrade back goes on from the epoch; a lower number on a move is still the same group."""
    rec, outcomes = fold([group_event(7, origin="offsets"),
                          group_event(8, origin="offsets", group_type="consumer", assignment_epoch=8),
                          group_event(9, origin="offsets", group_type="consumer", assignment_epoch=9),
                          group_event(3, origin="offsets")])
    assert outcomes == [Applied.APPLIED] * 4
    assert (rec.state.group_type, rec.state.generation, rec.counters) == ("classic", 3, {"rebalances": 2})


# ------------------------------------------------------------------ snapshot markers

def test_snapshot_markers_count_resyncs_once():
    rec, outcomes = fold([marker("snapshot_begin", "s1", 100), marker("snapshot_end", "s1", 200),
                          marker("snapshot_end", "s1", 200), marker("snapshot_begin", "s1", 100)])
    assert outcomes == [Applied.APPLIED, Applied.APPLIED, Applied.DUPLICATE, Applied.DUPLICATE]
    assert rec.entity == "snapshot:zk" and rec.kind == "snapshot_end"
    assert rec.counters == {"resyncs": 1} and rec.snapshot_id == "s1" and rec.state_since_ms == 100


def test_snapshot_in_progress_keeps_the_completed_one():
    rec, _ = fold([marker("snapshot_begin", "s1", 100), marker("snapshot_end", "s1", 200),
                   marker("snapshot_begin", "s2", 300)])
    assert rec.kind == "snapshot_begin" and rec.state.snapshot_id == "s2"
    assert (rec.snapshot_id, rec.state_since_ms) == ("s1", 100)
    rec, _, _ = apply_event(rec, marker("snapshot_end", "s2", 400))
    assert (rec.snapshot_id, rec.state_since_ms, rec.counters["resyncs"]) == ("s2", 300, 2)


def test_end_marker_whose_begin_was_compacted_away_uses_its_begun_time():
    rec, applied, _ = apply_event(None, marker("snapshot_end", "s1", 200, begun_ms=150))
    assert applied is Applied.APPLIED
    assert (rec.snapshot_id, rec.state_since_ms, rec.counters["resyncs"]) == ("s1", 150, 1)


def test_end_marker_without_its_begin_is_malformed():
    assert apply_event(None, marker("snapshot_end", "s1", 200)) == (None, Applied.MALFORMED, ())
    rec, _, _ = apply_event(None, marker("snapshot_begin", "s1", 100))
    assert apply_event(rec, marker("snapshot_end", "s0", 200)) == (rec, Applied.MALFORMED, ())


# ------------------------------------------------------------------ JSON form

@pytest.mark.parametrize("events", [
    FOLLOWER_DIES,
    FOLLOWER_DIES + [part_event(13, 0, (), op="delete")],
    [group_event(5, members=(GroupMember("m", "c", "h", assignment=("t:0",)),),
                 lag={"t": TopicLag(4, 1.5, {0: 4})}), group_event(7)],
    [zk("topic", "topic:t", TopicState("t", "id", {0: (1, 2)}, adding={0: (2,)},
                                       config={"min.insync.replicas": "2"}), 3)],
    [marker("snapshot_begin", "s1", 100), marker("snapshot_end", "s1", 200)],
])
def test_json_round_trip(events):
    rec, _ = fold(events)
    assert record_from_json(record_to_json(rec)) == rec


def test_corrupt_json_state_raises_malformed():
    rec, _ = fold(FOLLOWER_DIES)
    broken = record_to_json(rec).replace('"leader":1', '"leader":"x"')
    assert broken != record_to_json(rec)
    with pytest.raises(MalformedEvent):
        record_from_json(broken)


@pytest.mark.parametrize("events", [
    FOLLOWER_DIES,
    [group_event(5, members=(GroupMember("m", "c", "h", assignment=("t:0",)),),
                 lag={"t": TopicLag(4, 1.5, {0: 4})})],
    [zk("topic", "topic:t", TopicState("t", "id", {0: (1, 2)}, adding={0: (2,)},
                                       config={"min.insync.replicas": "2"}), 3)],
    [marker("snapshot_begin", "s1", 100), marker("snapshot_end", "s1", 200, begun_ms=100)],
])
def test_encode_is_the_dataclass_as_json_and_decodes_back(events):
    for event in events:
        assert json.loads(encode(event)) == json.loads(json.dumps(dataclasses.asdict(event)))
        assert decode(encode(event)) == event
