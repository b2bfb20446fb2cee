from dataclasses import replace

import pytest

from kmon.events import (BrokerState, ControllerState, GroupMember, GroupState, PartitionState,
                         ReassignmentState, SnapshotMarker, TopicDeletionState, TopicLag, TopicState)
from streaming.records import EntityRecord
from streaming.views import BrokerBalance, ClusterView, PartitionDetail, TopicIsr, build_views


def rec(kind: str, entity: str, state, counters=None, cluster="c1", source="zk", **kw) -> EntityRecord:
    return EntityRecord(cluster=cluster, entity=entity, kind=kind, source=source, state=state,
                        zxid=1, counters=counters or {}, **kw)


def broker(b: int) -> EntityRecord:
    return rec("broker", f"broker:{b}", BrokerState(b, f"h{b}", 9092, None))


def topic(name: str, replicas: dict, **kw) -> EntityRecord:
    return rec("topic", f"topic:{name}", TopicState(name, None, replicas, **kw))


def part(t: str, p: int, leader: int, isr: tuple[int, ...], counters=None, **kw) -> EntityRecord:
    return rec("partition", f"partition:{t}:{p}", PartitionState(t, p, leader, 0, isr, 1), counters, **kw)


BROKERS = [broker(1), broker(2), broker(3)]


def view(*records: EntityRecord, detail="unhealthy", now_ms=10_000, **kw) -> ClusterView:
    return build_views(records, now_ms, detail, **kw).clusters["c1"]


# ------------------------------------------------------------------ controller, brokers

def test_controller_view():
    v = view(rec("controller", "controller", ControllerState(2, 7), {"controller_changes": 3}))
    assert (v.controller.broker_id, v.controller.epoch, v.controller.active, v.controller.changes) == (2, 7, 1, 3)
    assert view(rec("controller", "controller", ControllerState(-1, 7))).controller.active == 0
    assert view(broker(1)).controller is None


def test_brokers_up_and_down():
    v = view(broker(1), broker(2), topic("t", {0: (1, 2, 4)}))
    assert set(v.brokers) == {1, 2} and v.brokers[1].host == "h1"
    assert v.broker_up == {1: 1, 2: 1, 4: 0}


# ------------------------------------------------------------------ ISR

def test_healthy_topic():
    v = view(*BROKERS, topic("t", {0: (1, 2, 3), 1: (2, 3, 1)}),
             part("t", 0, 1, (1, 2, 3)), part("t", 1, 2, (2, 3, 1)))
    assert v.topics == {"t": TopicIsr(partitions=2)}
    assert v.partition_detail == ()


def test_under_replicated_and_min_isr_from_topic_config():
    t = topic("t", {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)}, config={"min.insync.replicas": "2"})
    v = view(*BROKERS, t, part("t", 0, 1, (1, 2, 3)), part("t", 1, 1, (1, 2)), part("t", 2, 1, (1,)))
    assert v.topics["t"] == TopicIsr(partitions=3, under_replicated=2, under_min_isr=1, at_min_isr=1)


def test_min_isr_is_capped_by_the_replication_factor_and_defaults():
    t = topic("t", {0: (1,)}, config={"min.insync.replicas": "2"})
    assert view(*BROKERS, t, part("t", 0, 1, (1,))).topics["t"].under_min_isr == 0
    plain = [*BROKERS, topic("u", {0: (1, 2, 3)}), part("u", 0, 1, (1, 2))]
    assert view(*plain).topics["u"].at_min_isr == 0
    assert view(*plain, default_min_isr=2).topics["u"].at_min_isr == 1


def test_offline_no_leader_or_unregistered_leader():
    v = view(broker(1), topic("t", {0: (1,), 1: (3,), 2: (1,)}),
             part("t", 0, -1, (1,)), part("t", 1, 3, (3,)), part("t", 2, 1, (1,)))
    assert v.topics["t"].offline == 2


def test_topic_being_deleted_is_not_offline():
    v = view(broker(1), topic("t", {0: (1,)}), part("t", 0, -1, (1,)),
             rec("topic_deletion", "topic_deletion:t", TopicDeletionState("t")))
    assert v.topics["t"].offline == 0


def test_partition_without_state_counts_only_as_a_partition():
    v = view(*BROKERS, topic("t", {0: (1, 2, 3)}))
    assert v.topics["t"] == TopicIsr(partitions=1)


def test_transition_counters_summed_per_topic_and_broker():
    v = view(*BROKERS, topic("t", {0: (1, 2, 3), 1: (2, 3, 1)}),
             part("t", 0, 1, (1, 2, 3), {"isr_shrinks:2": 2, "isr_expands:2": 1, "leader_elections": 1}),
             part("t", 1, 2, (2, 3, 1), {"isr_shrinks:2": 1, "unclean_leader_elections": 1,
                                         "leader_elections": 2}))
    assert v.isr_shrinks == {("t", 1): 0, ("t", 2): 3, ("t", 3): 0}
    assert v.isr_expands == {("t", 1): 0, ("t", 2): 1, ("t", 3): 0}
    assert (v.topics["t"].leader_elections, v.topics["t"].unclean_leader_elections) == (3, 1)


def test_deleted_entities_and_their_counters_vanish():
    tomb = EntityRecord("c1", "topic:t", "topic", "zk", None, 9, {}, deleted=True)
    v = view(*BROKERS, tomb, part("t", 0, 1, (1, 3), {"isr_shrinks:2": 1}))
    assert v.topics == {} and v.isr_shrinks == {} and v.balance[2] == BrokerBalance()


@pytest.mark.parametrize("detail,expected", [("unhealthy", [1, 2]), ("all", [0, 1, 2]), ("none", [])])
def test_partition_detail_selection(detail, expected):
    v = view(*BROKERS, topic("t", {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)}),
             part("t", 0, 1, (1, 2, 3)), part("t", 1, 1, (1, 2)), part("t", 2, -1, (1, 2, 3)),
             detail=detail)
    assert [d.partition for d in v.partition_detail] == expected
    if expected:
        assert v.partition_detail[-1] == PartitionDetail("t", 2, 3, 3, -1)


# ------------------------------------------------------------------ leader balance

def test_leader_moving_from_a_to_b():
    base = [*BROKERS, topic("t", {0: (1, 2), 1: (2, 1)})]
    before = view(*base, part("t", 0, 1, (1, 2)), part("t", 1, 2, (2, 1)))
    after = view(*base, part("t", 0, 2, (2,)), part("t", 1, 2, (2,)))
    assert (before.balance[1].leaders, before.balance[2].leaders) == (1, 1)
    assert (after.balance[1].leaders, after.balance[2].leaders) == (0, 2)
    assert before.preferred_replica_imbalance == 0 and after.preferred_replica_imbalance == 1
    assert after.balance[1].imbalance_ratio == 1.0 and after.balance[2].imbalance_ratio == 0.0
    assert after.balance[1].preferred_leaders == 1


def test_imbalance_ratio_and_replicas_per_broker():
    v = view(*BROKERS, topic("t", {0: (1, 2), 1: (1, 3), 2: (1, 2), 3: (1, 3)}),
             part("t", 0, 1, (1, 2)), part("t", 1, 3, (1, 3)), part("t", 2, 1, (1, 2)))  # 3: no state yet
    assert v.balance[1] == BrokerBalance(leaders=2, preferred_leaders=4, imbalance_ratio=0.25, replicas=4)
    assert v.balance[3] == BrokerBalance(leaders=1, replicas=2)


def test_reassignment_exception_of_the_preferred_replica_imbalance():
    # moving [1,2] to [3,2]: replicas [3,2,1] with 3 adding, 1 removing
    t = topic("t", {0: (3, 2, 1)}, adding={0: (3,)}, removing={0: (1,)})
    joining = view(*BROKERS, t, part("t", 0, 1, (1, 2)))
    joined = view(*BROKERS, t, part("t", 0, 1, (1, 2, 3)))
    assert joining.preferred_replica_imbalance == 0     # not counted until 3 is in the ISR
    assert joined.preferred_replica_imbalance == 1
    assert joining.reassigning_partitions == 1
    # the original replica set [1,2] is fully in sync: no false under-replication
    assert joining.topics["t"].under_replicated == 0


def test_reassignment_not_adding_the_preferred_replica_uses_the_leader_rule():
    t = topic("t", {0: (1, 2, 3)}, removing={0: (3,)})
    assert view(*BROKERS, t, part("t", 0, 2, (1, 2, 3))).preferred_replica_imbalance == 1


def test_reassignment_znode_counts_reassigning_partitions():
    v = view(*BROKERS, topic("t", {0: (1, 2), 1: (2, 1)}), part("t", 0, 1, (1, 2)),
             rec("reassignment", "reassignment", ReassignmentState({"t:1": (2, 3)})))
    assert v.reassigning_partitions == 1


# ------------------------------------------------------------------ groups

def test_group_view():
    g = GroupState("g", "PreparingRebalance", 12, members=(GroupMember("m1", "c", "h"),),
                   lag={"t": TopicLag(42, 3.5)})
    v = view(rec("group", "group:g", g, {"rebalances": 4}, source="groups", state_since_ms=4_000),
             now_ms=10_000)
    gv = v.groups["g"]
    assert (gv.state, gv.members, gv.generation, gv.rebalances, gv.state_seconds) == \
        ("PreparingRebalance", 1, 12, 4, 6.0)
    assert gv.lag["t"].lag == 42


# ------------------------------------------------------------------ resync sweep, clusters

def snapshot_record(snapshot_id: str, begun_ms: int) -> EntityRecord:
    return rec("snapshot_end", "snapshot:zk", SnapshotMarker(snapshot_id, "reconnect"),
               {"resyncs": 1}, snapshot_id=snapshot_id, state_since_ms=begun_ms, last_observed_ms=begun_ms + 50)


def test_entities_missing_from_a_completed_snapshot_are_swept():
    v = view(snapshot_record("s2", begun_ms=1000),
             replace(broker(1), last_observed_ms=500, snapshot_id="s2"),      # re-read in s2
             EntityRecord("c1", "broker:2", "broker", "zk", BrokerState(2, "h", 1, None), 1,
                          last_observed_ms=500, snapshot_id="s1"),     # deleted while blind
             EntityRecord("c1", "broker:3", "broker", "zk", BrokerState(3, "h", 1, None), 1,
                          last_observed_ms=2000),                      # created after s2 began
             EntityRecord("c1", "group:g", "group", "groups", GroupState("g", "Stable", 1), None,
                          last_observed_ms=10))                       # another source
    assert set(v.brokers) == {1, 3} and set(v.groups) == {"g"}


def test_clusters_are_separate():
    views = build_views([broker(1), rec("broker", "broker:1", BrokerState(1, "x", 1, None), cluster="c2"),
                         rec("broker", "broker:2", BrokerState(2, "x", 1, None), cluster="c2")], 0)
    assert {c: len(v.brokers) for c, v in views.clusters.items()} == {"c1": 1, "c2": 2}
