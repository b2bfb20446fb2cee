import random
from dataclasses import replace

import pytest

from kmon.events import (BrokerState, ControllerState, GroupMember, GroupState, PartitionState, QuorumReplica,
                         QuorumState, ReassignmentState, SnapshotMarker, TopicDeletionState, TopicLag)
from kmon.history import LOST_MESSAGES, topic_key
from kmon.metrics import CATALOG
from streaming.fold.entity import EntityRecord
from streaming.views import ViewOptions, Views
from streaming.views.stats import SelfStats
from tests.unit.views_builders import BROKERS, Series, broker, keyed, parse, part, rec, topic, value


def kraft_broker(b: int, fenced: bool = False, shutting_down: bool = False) -> EntityRecord:
    return rec("broker", f"broker:{b}", BrokerState(b, f"h{b}", 9092, None, fenced=fenced,
                                                    in_controlled_shutdown=shutting_down, incarnation_id=f"i{b}",
                                                    broker_epoch=b), source="kraft")


def kraft_part(t: str, p: int, leader: int, isr: tuple[int, ...], elr: tuple[int, ...] = (), counters=None,
               **kw) -> EntityRecord:
    state = PartitionState(t, p, leader, 0, isr, 1, partition_epoch=1, elr=elr, last_known_elr=())
    return rec("partition", f"partition:{t}:{p}", state, counters, source="kraft", **kw)


def quorum(*voters: QuorumReplica, leader: int = 3001, high_watermark: int = 500,
           features=None) -> EntityRecord:
    return rec("quorum", "quorum", QuorumState(leader, 9, high_watermark, voters, (QuorumReplica(1, 500),),
                                               {"metadata.version": 21} if features is None else features),
               source="kraft")


def series(*records: EntityRecord, detail="unhealthy", now_ms=10_000, default_min_isr=1) -> Series:
    """The views' samples of the records, applied in one batch, as a scrape at now_ms reads them."""
    views = Views(ViewOptions(detail, default_min_isr))
    views.apply(keyed(records))
    return parse(views.exposition(SelfStats()).body(now_ms))


def labelled(s: Series, name: str, label: str) -> dict[str, float]:
    """label value -> value of the c1 series of ``name``, for metrics with one label besides cluster."""
    return {dict(labels)[label]: v for (n, labels), v in s.items() if n == name and ("cluster", "c1") in labels}


ISR = {"partitions": "kmon_partitions", "under_replicated": "kmon_under_replicated_partitions",
       "under_min_isr": "kmon_under_min_isr_partitions", "at_min_isr": "kmon_at_min_isr_partitions",
       "offline": "kmon_offline_partitions", "leader_elections": "kmon_leader_elections_total",
       "unclean_leader_elections": "kmon_unclean_leader_elections_total"}


def topic_isr(s: Series, t: str) -> dict[str, float | None]:
    return {field: value(s, name, topic=t) for field, name in ISR.items()}


def isr(**fields: int) -> dict[str, float]:
    return {field: fields.get(field, 0) for field in ISR}


def details(s: Series) -> list[tuple[str, int, float, float, float]]:
    """(topic, partition, isr size, replicas, leader) of every per-partition detail series."""
    sizes = {(dict(ls)["topic"], int(dict(ls)["partition"])): v for (n, ls), v in s.items()
             if n == "kmon_partition_isr_size"}
    return sorted((t, p, size, value(s, "kmon_partition_replicas", topic=t, partition=p),
                   value(s, "kmon_partition_leader", topic=t, partition=p)) for (t, p), size in sizes.items())


def balance(s: Series, b: int) -> tuple[float | None, ...]:
    """(leaders, preferred leaders, imbalance ratio, replicas) of broker b."""
    return tuple(value(s, f"kmon_broker_{name}", broker=b)
                 for name in ("leader_partitions", "preferred_leader_partitions", "leader_imbalance_ratio",
                              "replica_partitions"))


# ------------------------------------------------------------------ controller, brokers

def test_controller_view():
    s = series(rec("controller", "controller", ControllerState(2, 7), {"controller_changes": 3}))
    assert [value(s, f"kmon_{name}") for name in ("controller_id", "controller_epoch", "active_controller_count",
                                                  "controller_changes_total")] == [2, 7, 1, 3]
    assert value(series(rec("controller", "controller", ControllerState(-1, 7))), "kmon_active_controller_count") == 0
    assert value(series(broker(1)), "kmon_controller_id") is None


def test_brokers_up_and_down():
    s = series(broker(1), broker(2), topic("t", {0: (1, 2, 4)}))
    assert value(s, "kmon_brokers") == 2
    assert value(s, "kmon_broker_info", broker=1, host="h1", port=9092, rack="") == 1
    assert labelled(s, "kmon_broker_up", "broker") == {"1": 1, "2": 1, "4": 0}


def test_a_fenced_broker_does_not_serve():
    """KRaft keeps the registration of a dead or stopped broker, fenced: not up, not counted; one
    that holds no replica is not down either (stopped for good), kmon_broker_fenced shows it."""
    s = series(kraft_broker(1), kraft_broker(2, fenced=True), kraft_broker(3, fenced=True),
               kraft_broker(4, shutting_down=True), kraft_broker(5, fenced=True, shutting_down=True),
               topic("t", {0: (2, 1), 1: (1, 4)}), kraft_part("t", 0, 2, (2, 1)), kraft_part("t", 1, 4, (4, 1)))
    assert value(s, "kmon_brokers") == 2
    assert labelled(s, "kmon_broker_up", "broker") == {"1": 1, "2": 0, "4": 1}
    assert labelled(s, "kmon_broker_fenced", "broker") == {"1": 0, "2": 1, "3": 1, "4": 0, "5": 1}
    assert value(s, "kmon_brokers_in_controlled_shutdown") == 1   # 5 is done: fenced, its flag kept
    assert set(labelled(s, "kmon_broker_info", "broker")) == {"1", "2", "3", "4", "5"}
    assert value(s, "kmon_offline_partitions", topic="t") == 1     # led by the fenced broker 2


def test_a_zookeeper_mode_cluster_has_no_kraft_series():
    s = series(*BROKERS, topic("t", {0: (1, 2, 3)}), part("t", 0, 1, (1, 2, 3)),
               rec("controller", "controller", ControllerState(1, 4)))
    kraft_only = {m.name for m in CATALOG if m.kraft_only}
    assert {name for name, _ in s} & kraft_only == set()
    assert value(s, "kmon_brokers") == 3 and value(s, "kmon_leader_elections_total", topic="t") == 0


def test_a_leader_fenced_then_unfenced_takes_its_partition_offline_and_back():
    views = Views(ViewOptions())
    offline = lambda: value(parse(views.exposition(SelfStats()).body(0)), "kmon_offline_partitions", topic="t")
    views.apply(keyed([kraft_broker(1), kraft_broker(2), topic("t", {0: (2, 1)}), kraft_part("t", 0, 2, (2, 1))]))
    assert offline() == 0
    views.apply(keyed([kraft_broker(2, fenced=True)]))
    assert offline() == 1
    views.apply(keyed([kraft_broker(2)]))
    assert offline() == 0


# ------------------------------------------------------------------ ISR

def test_healthy_topic():
    s = series(*BROKERS, topic("t", {0: (1, 2, 3), 1: (2, 3, 1)}),
               part("t", 0, 1, (1, 2, 3)), part("t", 1, 2, (2, 3, 1)))
    assert topic_isr(s, "t") == isr(partitions=2)
    assert details(s) == []


def test_under_replicated_and_min_isr_from_topic_config():
    t = topic("t", {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)}, config={"min.insync.replicas": "2"})
    s = series(*BROKERS, t, part("t", 0, 1, (1, 2, 3)), part("t", 1, 1, (1, 2)), part("t", 2, 1, (1,)))
    assert topic_isr(s, "t") == isr(partitions=3, under_replicated=2, under_min_isr=1, at_min_isr=1)


def test_min_isr_is_capped_by_the_replication_factor_and_defaults():
    t = topic("t", {0: (1,)}, config={"min.insync.replicas": "2"})
    assert value(series(*BROKERS, t, part("t", 0, 1, (1,))), "kmon_under_min_isr_partitions", topic="t") == 0
    plain = [*BROKERS, topic("u", {0: (1, 2, 3)}), part("u", 0, 1, (1, 2))]
    assert value(series(*plain), "kmon_at_min_isr_partitions", topic="u") == 0
    assert value(series(*plain, default_min_isr=2), "kmon_at_min_isr_partitions", topic="u") == 1


def test_offline_no_leader_or_unregistered_leader():
    s = series(broker(1), topic("t", {0: (1,), 1: (3,), 2: (1,)}),
               part("t", 0, -1, (1,)), part("t", 1, 3, (3,)), part("t", 2, 1, (1,)))
    assert value(s, "kmon_offline_partitions", topic="t") == 2


def test_topic_being_deleted_is_not_offline():
    s = series(broker(1), topic("t", {0: (1,)}), part("t", 0, -1, (1,)),
               rec("topic_deletion", "topic_deletion:t", TopicDeletionState("t")))
    assert value(s, "kmon_offline_partitions", topic="t") == 0


def test_partition_without_state_counts_only_as_a_partition():
    assert topic_isr(series(*BROKERS, topic("t", {0: (1, 2, 3)})), "t") == isr(partitions=1)


def test_transition_counters_summed_per_topic_and_broker():
    s = series(*BROKERS, topic("t", {0: (1, 2, 3), 1: (2, 3, 1)}),
               part("t", 0, 1, (1, 2, 3), {"leader_elections": 1},
                    broker_counters={"isr_shrinks": {2: 2}, "isr_expands": {2: 1}}),
               part("t", 1, 2, (2, 3, 1), {"unclean_leader_elections": 1, "leader_elections": 2},
                    broker_counters={"isr_shrinks": {2: 1}}))
    assert labelled(s, "kmon_isr_shrinks_total", "broker") == {"1": 0, "2": 3, "3": 0}
    assert labelled(s, "kmon_isr_expands_total", "broker") == {"1": 0, "2": 1, "3": 0}
    assert (topic_isr(s, "t")["leader_elections"], topic_isr(s, "t")["unclean_leader_elections"]) == (3, 1)


def test_eligible_leader_replicas_and_their_elections():
    s = series(*BROKERS, topic("k", {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)}, config={"min.insync.replicas": "2"}),
               kraft_part("k", 0, 1, (1,), elr=(2,), counters={"leader_elections": 3, "elr_leader_elections": 2}),
               kraft_part("k", 1, 1, (1, 2, 3)), kraft_part("k", 2, 2, (2, 3), counters={"leader_elections": 1}),
               topic("z", {0: (1, 2, 3)}), part("z", 0, 1, (1,)))
    assert (value(s, "kmon_elr_partitions", topic="k"), value(s, "kmon_elr_leader_elections_total", topic="k")) \
        == (1, 2)
    assert value(s, "kmon_leader_elections_total", topic="k") == 4
    # a topic of ZooKeeper-mode states has none
    assert (value(s, "kmon_elr_partitions", topic="z"), value(s, "kmon_elr_leader_elections_total", topic="z")) \
        == (None, None)


def test_deleted_entities_and_their_counters_vanish():
    tomb = EntityRecord("c1", "topic:t", "topic", "zk", None, 9, {}, deleted=True)
    s = series(*BROKERS, tomb, part("t", 0, 1, (1, 3), broker_counters={"isr_shrinks": {2: 1}}))
    assert not any(("topic", "t") in labels for _, labels in s)
    assert balance(s, 2) == (0, 0, 0, 0)


@pytest.mark.parametrize("detail,expected", [("unhealthy", [1, 2]), ("all", [0, 1, 2]), ("none", [])])
def test_partition_detail_selection(detail, expected):
    s = series(*BROKERS, topic("t", {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)}),
               part("t", 0, 1, (1, 2, 3)), part("t", 1, 1, (1, 2)), part("t", 2, -1, (1, 2, 3)),
               detail=detail)
    assert [p for _, p, *_ in details(s)] == expected
    if expected:
        assert details(s)[-1] == ("t", 2, 3, 3, -1)


# ------------------------------------------------------------------ leader balance

def test_leader_moving_from_a_to_b():
    base = [*BROKERS, topic("t", {0: (1, 2), 1: (2, 1)})]
    before = series(*base, part("t", 0, 1, (1, 2)), part("t", 1, 2, (2, 1)))
    after = series(*base, part("t", 0, 2, (2,)), part("t", 1, 2, (2,)))
    assert (balance(before, 1)[0], balance(before, 2)[0]) == (1, 1)
    assert (balance(after, 1)[0], balance(after, 2)[0]) == (0, 2)
    assert value(before, "kmon_preferred_replica_imbalance") == 0
    assert value(after, "kmon_preferred_replica_imbalance") == 1
    assert (balance(after, 1)[2], balance(after, 2)[2]) == (1.0, 0.0)
    assert balance(after, 1)[1] == 1


def test_imbalance_ratio_and_replicas_per_broker():
    s = series(*BROKERS, topic("t", {0: (1, 2), 1: (1, 3), 2: (1, 2), 3: (1, 3)}),
               part("t", 0, 1, (1, 2)), part("t", 1, 3, (1, 3)), part("t", 2, 1, (1, 2)))  # 3: no state yet
    assert balance(s, 1) == (2, 4, 0.25, 4)
    assert balance(s, 3) == (1, 0, 0, 2)


def test_reassignment_exception_of_the_preferred_replica_imbalance():
    # moving [1,2] to [3,2]: replicas [3,2,1] with 3 adding, 1 removing
    t = topic("t", {0: (3, 2, 1)}, adding={0: (3,)}, removing={0: (1,)})
    joining = series(*BROKERS, t, part("t", 0, 1, (1, 2)))
    joined = series(*BROKERS, t, part("t", 0, 1, (1, 2, 3)))
    assert value(joining, "kmon_preferred_replica_imbalance") == 0     # not counted until 3 is in the ISR
    assert value(joined, "kmon_preferred_replica_imbalance") == 1
    assert value(joining, "kmon_reassigning_partitions") == 1
    # the replica being added is still copying until it joins the ISR
    assert (value(joining, "kmon_reassignment_replicas_pending"), value(joined, "kmon_reassignment_replicas_pending")) \
        == (1, 0)
    # the original replica set [1,2] is fully in sync: no false under-replication
    assert value(joining, "kmon_under_replicated_partitions", topic="t") == 0


def test_reassignment_not_adding_the_preferred_replica_uses_the_leader_rule():
    t = topic("t", {0: (1, 2, 3)}, removing={0: (3,)})
    assert value(series(*BROKERS, t, part("t", 0, 2, (1, 2, 3))), "kmon_preferred_replica_imbalance") == 1


def test_reassignment_znode_counts_reassigning_partitions():
    s = series(*BROKERS, topic("t", {0: (1, 2), 1: (2, 1)}), part("t", 0, 1, (1, 2)),
               rec("reassignment", "reassignment", ReassignmentState({"t:1": (2, 3)})))
    assert value(s, "kmon_reassigning_partitions") == 1


# ------------------------------------------------------------------ groups

def test_group_view():
    g = GroupState("g", "PreparingRebalance", 12, members=(GroupMember("m1", "c", "h"),),
                   lag={"t": TopicLag(42, 3.5, lag_seconds_method="record", retention_ms=7000),
                        "u": TopicLag(1, 2.0, {0: 1}, "interpolated", retention_ms=-1)})
    s = series(rec("group", "group:g", g, {"rebalances": 4, topic_key(LOST_MESSAGES, "t"): 15,
                                            topic_key(LOST_MESSAGES, "gone"): 2}, source="groups", state_since_ms=4_000),
               now_ms=10_000)
    assert labelled(s, "kmon_consumer_group_state", "state")["PreparingRebalance"] == 1
    assert [value(s, f"kmon_consumer_group_{name}", group="g", type="classic")
            for name in ("members", "generation", "rebalances_total", "state_seconds")] == [1, 12, 4, 6.0]
    assert value(s, "kmon_consumer_group_lag", group="g", type="classic", topic="t") == 42
    assert value(s, "kmon_consumer_group_lag_seconds", group="g", type="classic", topic="t", method="record") == 3.5
    assert value(s, "kmon_consumer_group_lag_seconds", group="g", type="classic", topic="u",
                 method="interpolated") == 2.0
    # records deleted unread, per topic: 0 from the first lag on; a topic no longer in its lag keeps its count
    assert [value(s, "kmon_consumer_group_lost_messages_total", group="g", type="classic", topic=t)
            for t in ("t", "u", "gone")] == [15, 0, 2]
    # 3.5 s of a 7 s retention used; a topic kept forever has no margin to lose
    assert value(s, "kmon_consumer_group_retention_used_ratio", group="g", type="classic", topic="t") == 0.5
    assert value(s, "kmon_consumer_group_retention_used_ratio", group="g", type="classic", topic="u") is None


# ------------------------------------------------------------------ quorum (KRaft)

def test_quorum_view():
    s = series(quorum(QuorumReplica(3001, 500), QuorumReplica(3002, 480, 20, 1500), QuorumReplica(3003, -1)))
    assert [value(s, f"kmon_{name}") for name in ("quorum_leader_id", "quorum_epoch", "quorum_high_watermark",
                                                  "quorum_voters", "quorum_observers", "metadata_version")] \
        == [3001, 9, 500, 3, 1, 21]
    assert labelled(s, "kmon_quorum_voter_lag_records", "voter") == {"3001": 0, "3002": 20, "3003": float("inf")}
    # 3003: the leader has not heard from it (dead since before its election): behind, by how much unknown
    assert labelled(s, "kmon_quorum_voter_lag_seconds", "voter") == {"3001": 0, "3002": 1.5, "3003": float("inf")}
    unknown = series(quorum(leader=-1, high_watermark=-1, features={}))
    assert (value(unknown, "kmon_quorum_leader_id"), value(unknown, "kmon_quorum_high_watermark"),
            value(unknown, "kmon_metadata_version"), value(unknown, "kmon_quorum_voters")) == (-1, None, None, 0)


def test_each_finalized_feature_is_a_level_and_group_version_0_is_there_as_0():
    """Strimzi #12406: a 4.x cluster whose group.version stayed 0 runs no consumer group protocol."""
    s = series(quorum(features={"metadata.version": 27, "kraft.version": 0, "group.version": 0, "share.version": 1}))
    assert labelled(s, "kmon_feature_level", "feature") == {"metadata.version": 27, "kraft.version": 0,
                                                            "group.version": 0, "share.version": 1}
    assert labelled(series(quorum(features={})), "kmon_feature_level", "feature") == {}


def test_a_voter_that_leaves_the_quorum_leaves_no_series():
    """The quorum is re-sent every few seconds: each one replaces the last, voters and all."""
    views = Views(ViewOptions())
    lags = lambda: labelled(parse(views.exposition(SelfStats()).body(0)), "kmon_quorum_voter_lag_records", "voter")
    views.apply(keyed([quorum(QuorumReplica(3001, 500), QuorumReplica(3002, 500), QuorumReplica(3003, 490, 10))]))
    assert lags() == {"3001": 0, "3002": 0, "3003": 10}
    views.apply(keyed([quorum(QuorumReplica(3001, 600), QuorumReplica(3002, 590, 10), high_watermark=600)]))
    assert lags() == {"3001": 0, "3002": 10}
    views.apply(keyed([replace(quorum(), state=None, deleted=True)]))
    assert lags() == {}


# ------------------------------------------------------------------ resync sweep, clusters

def snapshot_record(snapshot_id: str, begun_ms: int) -> EntityRecord:
    return rec("snapshot_end", "snapshot:zk", SnapshotMarker(snapshot_id, "reconnect"),
               {"resyncs": 1}, snapshot_id=snapshot_id, state_since_ms=begun_ms, last_observed_ms=begun_ms + 50)


def test_entities_missing_from_a_completed_snapshot_are_swept():
    s = series(snapshot_record("s2", begun_ms=1000),
             replace(broker(1), last_observed_ms=500, snapshot_id="s2"),      # re-read in s2
             EntityRecord("c1", "broker:2", "broker", "zk", BrokerState(2, "h", 1, None), 1,
                          last_observed_ms=500, snapshot_id="s1"),     # deleted while blind
             EntityRecord("c1", "broker:3", "broker", "zk", BrokerState(3, "h", 1, None), 1,
                          last_observed_ms=2000),                      # created after s2 began
             EntityRecord("c1", "group:g", "group", "groups", GroupState("g", "Stable", 1), None,
                          last_observed_ms=10))                       # another source
    assert set(labelled(s, "kmon_broker_up", "broker")) == {"1", "3"}
    assert set(labelled(s, "kmon_consumer_group_members", "group")) == {"g"}


def test_clusters_are_separate():
    s = series(broker(1), rec("broker", "broker:1", BrokerState(1, "x", 1, None), cluster="c2"),
               rec("broker", "broker:2", BrokerState(2, "x", 1, None), cluster="c2"))
    assert (value(s, "kmon_brokers"), value(s, "kmon_brokers", cluster="c2")) == (1, 2)


# ------------------------------------------------------------------ incremental = from scratch

def _random_record(rng: random.Random, clock: int, partitions: int) -> tuple[str, EntityRecord]:
    """One change of a small cluster: any kind the views read, deletes and resyncs included."""
    t, p, b = rng.choice("xyz"), rng.randrange(partitions), rng.randrange(1, 6)
    replicas = tuple(rng.sample(range(1, 6), 3))
    isr = tuple(rng.sample(replicas, rng.randrange(1, 4)))
    leader = rng.choice([*isr, -1])
    made = {
        "broker": lambda: broker(b),
        "kraft_broker": lambda: kraft_broker(b, fenced=rng.random() < 0.4, shutting_down=rng.random() < 0.3),
        "kraft_partition": lambda: kraft_part(t, p, leader, isr, tuple(rng.sample(replicas, rng.randrange(2))),
                                              {"leader_elections": rng.randrange(3),
                                               "elr_leader_elections": rng.randrange(2)}),
        "quorum": lambda: quorum(*(QuorumReplica(v, rng.choice([-1, 100]), rng.randrange(9), rng.randrange(5000))
                                   for v in rng.sample(range(3001, 3005), rng.randrange(1, 4)))),
        "topic": lambda: topic(t, {q: tuple(rng.sample(range(1, 6), 3)) for q in range(rng.randrange(1, partitions + 1))},
                               config={"min.insync.replicas": str(rng.randrange(1, 4))}),
        "partition": lambda: part(t, p, leader, isr, {"leader_elections": rng.randrange(3)},
                                  broker_counters={"isr_shrinks": {b: rng.randrange(3)}}),
        "topic_deletion": lambda: rec("topic_deletion", f"topic_deletion:{t}", TopicDeletionState(t)),
        "reassignment": lambda: rec("reassignment", "reassignment", ReassignmentState({f"{t}:{p}": replicas})),
        "controller": lambda: rec("controller", "controller", ControllerState(b, clock)),
        "group": lambda: rec("group", f"group:g{b}", GroupState(f"g{b}", rng.choice(["Stable", "Empty"]), clock),
                             source="groups", state_since_ms=clock),
        "snapshot_end": lambda: snapshot_record(f"s{clock}", begun_ms=clock - rng.randrange(0, 20)),
    }
    r = made[rng.choice(list(made))]()
    r = replace(r, last_observed_ms=clock, snapshot_id=r.snapshot_id or rng.choice([None, f"s{clock - 5}"]))
    if r.kind != "snapshot_end" and rng.random() < 0.2:
        r = replace(r, state=None, counters={}, deleted=True)
    return f"c1/{r.entity}", r


@pytest.mark.parametrize("detail", ["unhealthy", "all"])
@pytest.mark.parametrize("partitions", [3, 16])   # 16: a change touches few of a topic's partitions
@pytest.mark.parametrize("seed", range(30))
def test_views_applied_batch_by_batch_equal_views_built_at_once(seed, partitions, detail):
    """Whether the topics' sums are kept by difference or summed again, and however many
    batches come between two renderings."""
    rng = random.Random(seed)
    views = Views(ViewOptions(detail, 2))
    current: dict[str, EntityRecord] = {}
    clock = 100
    for _ in range(60):
        batch = {}
        for _ in range(rng.randrange(1, 4)):
            clock += 1
            key, record = _random_record(rng, clock, partitions)
            batch[key] = record
        views.apply(batch)
        current.update(batch)
        if rng.random() < 0.3:
            continue
        fresh = Views(ViewOptions(detail, 2))
        fresh.apply(current)
        incremental = views.exposition(SelfStats()).body(clock)
        assert incremental == fresh.exposition(SelfStats()).body(clock)


def test_a_broker_that_goes_takes_its_partitions_offline_in_the_next_batch():
    views = Views(ViewOptions())
    views.apply(keyed([*BROKERS, topic("t", {0: (2, 1)}), part("t", 0, 2, (2, 1))]))
    assert value(parse(views.exposition(SelfStats()).body(0)), "kmon_offline_partitions", topic="t") == 0
    views.apply(keyed([replace(broker(2), state=None, deleted=True)]))
    assert value(parse(views.exposition(SelfStats()).body(0)), "kmon_offline_partitions", topic="t") == 1


def _judged(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, deleting: bool, shrinks: int):
    from streaming.views.cluster import judge
    state = PartitionState("t", 0, leader, 1, isr, 1)
    record = EntityRecord(cluster="c", entity="partition:t:0", kind="partition", source="zk", state=state, position=1,
                          counters={"isr_shrinks": shrinks}, broker_counters={"isr_shrinks": {replicas[-1]: shrinks}})
    return judge("t", 0, replicas, frozenset(), False, deleting, 2, record, {1: None, 2: None, 3: None})  # type: ignore[dict-item]


@pytest.mark.parametrize("make", ["isr", "balance", "brokers"])
def test_a_tally_moved_equals_one_taken_off_and_added_whatever_changed(make: str) -> None:
    """move(old, new) skips what the assignment decides when it did not change; whatever did,
    the sums equal those of add(old, -1) and add(new, 1)."""
    from streaming.views.balance import BalanceTally
    from streaming.views.brokers import HoldersTally
    from streaming.views.isr import IsrTally
    cls = {"isr": IsrTally, "balance": BalanceTally, "brokers": HoldersTally}[make]
    rng = random.Random(7)
    for _ in range(200):
        old, new = (_judged(tuple(rng.sample((1, 2, 3, 4), 3)), tuple(rng.sample((1, 2, 3), rng.randint(1, 3))),
                            rng.choice((1, 2, 3, -1)), rng.random() < 0.2, rng.randint(0, 3)) for _ in range(2))
        if rng.random() < 0.5:   # most often only the state changes
            new = _judged(old.replicas, new.state.isr, new.state.leader, old.deleting, new.counters["isr_shrinks"])
        moved, apart = cls(), cls()
        moved.add(old, 1)
        moved.move(old, new)
        apart.add(new, 1)
        assert {k: v for k, v in vars(moved).items() if k != "rendered"} == \
            {k: v for k, v in vars(apart).items() if k != "rendered"}
