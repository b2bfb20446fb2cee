"""The fault scenarios on a KRaft cluster (Kafka 4.3.1, three combined nodes), end to end: the KRaft
collector following the real metadata log, the stream app, /metrics; what the quorum itself says
(DescribeQuorum, asked here as any client would) is the reference."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from collectors.kraft import wire
from collectors.kraft.connection import ClientSecurity, Connection
from kmon.events import EVENTS_TOPIC
from stack.local import LocalStack
from stack.process import free_port
from tests.integration.kraft.conftest import CLUSTER
from tests.support import (RuleEvaluations, api, assert_history_agrees, create_topic, ever_fired, events_on, eventually,
                           firing, never, preferred_election, quorum, reassign, value)

pytestmark = pytest.mark.integration


def v(stack: LocalStack, name: str, **labels: str) -> float | None:
    assert stack.state
    return value(stack.state.stream_port, name, CLUSTER, **labels)


def total(stack: LocalStack, name: str, **labels: str) -> float:
    """A counter summed over its other labels (0 while absent)."""
    from tests.support import metrics
    assert stack.state
    return sum(val for (metric, labelset), val in metrics(stack.state.stream_port).items()
               if metric == name and ("cluster", CLUSTER) in labelset
               and all((k, x) in labelset for k, x in labels.items()))


def agrees(stack: LocalStack) -> bool:
    """The views' controller is the quorum's leader, at its epoch."""
    q = quorum(stack)
    return (v(stack, "kmon_controller_id"), v(stack, "kmon_controller_epoch")) == (q.leader_id, q.epoch)


def node_of(stack: LocalStack, node_id: int) -> str:
    return f"broker-{node_id}"


def test_k1_the_views_show_the_quorum_and_its_leader(mon: LocalStack) -> None:
    eventually(lambda: v(mon, "kmon_brokers") == 3, 180, "three unfenced brokers exported")
    eventually(lambda: agrees(mon), 30, "the quorum leader and epoch as the controller")
    eventually(lambda: v(mon, "kmon_quorum_voters") == 3, 30, "three voters")
    assert (v(mon, "kmon_metadata_version") or 0) > 0
    # the feature levels as the log finalized them: a static quorum at kraft.version 0, Kafka 4's consumer
    # group protocol on
    assert v(mon, "kmon_feature_level", feature="metadata.version") == v(mon, "kmon_metadata_version")
    assert v(mon, "kmon_feature_level", feature="kraft.version") == 0
    assert (v(mon, "kmon_feature_level", feature="group.version") or 0) >= 1
    assert mon.state
    port = mon.state.collector_ports["kraft"]
    assert (value(port, "kmon_collector_metadata_offset", CLUSTER) or 0) > 0
    eventually(lambda: value(port, "kmon_collector_metadata_lag_records", CLUSTER) == 0, 30, "the collector caught up")


def test_k2_a_broker_killed_is_fenced_its_isr_shrinks_and_it_comes_back(mon: LocalStack) -> None:
    topic = "k2-orders"
    create_topic(mon, topic, partitions=3, rf=3)
    eventually(lambda: v(mon, "kmon_partitions", topic=topic) == 3, 60, "topic exported")
    victim = next(n for n in (1, 2, 3) if n != quorum(mon).leader_id)
    shrinks = total(mon, "kmon_isr_shrinks_total", topic=topic, broker=str(victim))
    mon.kill(node_of(mon, victim))
    eventually(lambda: v(mon, "kmon_broker_fenced", broker=str(victim)) == 1, 60, "the dead broker fenced")
    assert v(mon, "kmon_broker_up", broker=str(victim)) == 0
    eventually(lambda: v(mon, "kmon_under_replicated_partitions", topic=topic) == 3, 60, "URP")
    assert total(mon, "kmon_isr_shrinks_total", topic=topic, broker=str(victim)) == shrinks + 3
    # the API says it as KRaft has it: the quorum, the broker fenced and down, its partitions
    assert mon.state
    [health] = api(mon.state.stream_port, "/health")["clusters"]
    assert health["mode"] == "kraft" and health["quorum"]["leader"] == quorum(mon).leader_id
    assert victim in health["brokers"]["fenced"] and victim in health["brokers"]["down"]
    assert [p["fenced"] for p in health["problems"] if p["kind"] == "broker_down" and p["broker"] == victim] == [True]
    assert sorted(p["partition"] for p in health["problems"] if p.get("topic") == topic) == [0, 1, 2]
    fenced = api(mon.state.stream_port, f"/entities/{CLUSTER}/broker:{victim}")
    assert fenced["record"]["state"]["fenced"] is True and fenced["transitions"][-1]["kind"] == "broker_fenced"
    mon.start(node_of(mon, victim))
    eventually(lambda: v(mon, "kmon_broker_fenced", broker=str(victim)) == 0, 90, "unfenced after the restart")
    eventually(lambda: v(mon, "kmon_under_replicated_partitions", topic=topic) == 0, 90, "ISR whole again")
    assert total(mon, "kmon_isr_expands_total", topic=topic, broker=str(victim)) >= 3


def test_k3_the_active_controller_killed_a_new_leader_and_epoch_within_seconds(mon: LocalStack) -> None:
    eventually(lambda: v(mon, "kmon_brokers") == 3, 120, "all brokers back")
    before = quorum(mon)
    changes = total(mon, "kmon_controller_changes_total")
    killed = time.monotonic()
    mon.kill(node_of(mon, before.leader_id))
    eventually(lambda: (v(mon, "kmon_controller_epoch") or 0) > before.epoch
               and v(mon, "kmon_controller_id") not in (None, before.leader_id), 30, "a new leader in the views")
    seen_after = time.monotonic() - killed
    after = quorum(mon)
    assert after.leader_id != before.leader_id and after.epoch > before.epoch
    eventually(lambda: agrees(mon), 30, "the views agree with the quorum")
    after = quorum(mon)
    # every epoch the quorum went through is one change (an epoch can pass without a leader)
    assert changes < total(mon, "kmon_controller_changes_total") <= changes + (after.epoch - before.epoch)
    assert seen_after < 20, f"the new controller took {seen_after:.1f} s to show"


def test_k4_the_collector_killed_and_restarted_counts_nothing_twice(mon: LocalStack) -> None:
    # The last test's kill has effects after it ended: the new controller fences the old one a
    # session later (its restart is refused until then) and only then shrinks its ISRs. Views that
    # lag behind still show the cluster from before all that, with 3 brokers and no URP too: only
    # views that folded an event the collector saw after now have every shrink and expand before.
    since = time.time()
    eventually(lambda: (v(mon, "kmon_last_event_timestamp_seconds", source="kraft") or 0) > since
               and v(mon, "kmon_brokers") == 3 and total(mon, "kmon_under_replicated_partitions") == 0, 120,
               "all brokers back in every ISR, in views newer than this test (the last test's restart counts "
               "its expands)")
    topic = "k4-while-away"
    counters = ("kmon_isr_shrinks_total", "kmon_isr_expands_total", "kmon_leader_elections_total",
                "kmon_controller_changes_total")
    before = {name: total(mon, name) for name in counters}
    mon.kill("collector-kraft")
    create_topic(mon, topic, partitions=2, rf=3)
    mon.start("collector-kraft")
    eventually(lambda: v(mon, "kmon_partitions", topic=topic) == 2, 90, "the change made while away")
    time.sleep(3)   # the replay of the log up to now has been folded
    assert {name: total(mon, name) for name in counters} == before


def test_k5_a_controlled_shutdown_is_told_then_the_broker_is_fenced(mon: LocalStack) -> None:
    eventually(lambda: v(mon, "kmon_brokers") == 3, 120, "all brokers back")
    create_topic(mon, "k5-led", partitions=6, rf=3)
    # a broker that leads nothing is fenced at once: Kafka marks a shutdown only while leaders move away
    leaders = lambda n: v(mon, "kmon_broker_leader_partitions", broker=str(n)) or 0
    victim = eventually(lambda: next((n for n in (1, 2, 3) if n != quorum(mon).leader_id and leaders(n) > 0), None),
                        60, "a broker leading partitions")
    mon.kill(node_of(mon, victim), signal.SIGTERM)
    eventually(lambda: v(mon, "kmon_broker_fenced", broker=str(victim)) == 1, 60, "fenced after shutting down")
    assert mon.state
    told = [e.data.in_controlled_shutdown for e in events_on(mon.state.events_bootstrap_servers, EVENTS_TOPIC)
            if e.entity == f"broker:{victim}" and e.data is not None and e.cluster == CLUSTER]
    assert True in told, "the controlled shutdown was not an event"


def test_k5b_a_leader_killed_moves_leaders_and_a_preferred_election_restores_them(mon: LocalStack) -> None:
    topic = "k5b-balance"
    create_topic(mon, topic, partitions=6, rf=3)
    eventually(lambda: v(mon, "kmon_partitions", topic=topic) == 6, 60, "topic exported")

    def balanced_by_election() -> bool:
        preferred_election(mon)
        return v(mon, "kmon_preferred_replica_imbalance") == 0

    eventually(balanced_by_election, 120, "balanced at start", interval=3)
    victim = next(n for n in (1, 2, 3) if n != quorum(mon).leader_id)
    led = v(mon, "kmon_broker_leader_partitions", broker=str(victim))
    elections = total(mon, "kmon_leader_elections_total")
    assert led and led > 0
    mon.kill(node_of(mon, victim))
    eventually(lambda: v(mon, "kmon_broker_leader_partitions", broker=str(victim)) == 0, 60, "leaders moved away")
    mon.start(node_of(mon, victim))
    eventually(lambda: (v(mon, "kmon_broker_leader_imbalance_ratio", broker=str(victim)) or 0) == 1.0, 60,
               "the restarted broker leads none of its preferred partitions")
    eventually(lambda: total(mon, "kmon_under_replicated_partitions") == 0, 90, "back in every ISR")
    eventually(balanced_by_election, 120, "a preferred election restores balance", interval=3)
    assert v(mon, "kmon_broker_leader_partitions", broker=str(victim)) == led
    assert total(mon, "kmon_leader_elections_total") >= elections + 2 * led   # away, and back


def test_k5c_a_hung_broker_is_fenced_after_its_session_and_unfenced_when_it_resumes(mon: LocalStack) -> None:
    eventually(lambda: v(mon, "kmon_brokers") == 3, 120, "all brokers back")
    victim = next(n for n in (1, 2, 3) if n != quorum(mon).leader_id)
    assert mon.state
    probed = lambda: value(mon.state.collector_ports["kraft"], "kmon_collector_broker_reachable", CLUSTER,  # noqa: E731
                           broker=str(victim))
    eventually(lambda: probed() == 1, 30, "the broker answers kmon's probe")
    mon.send_signal(node_of(mon, victim), signal.SIGSTOP)
    try:
        # hung: its kernel still accepts connections, nothing answers them; kmon says so before the fencing
        eventually(lambda: probed() == 0, 10, "the hung broker unreachable from kmon")
        assert v(mon, "kmon_broker_fenced", broker=str(victim)) == 0, "not fenced yet"
        eventually(lambda: v(mon, "kmon_broker_fenced", broker=str(victim)) == 1, 60, "fenced past its session")
    finally:
        mon.send_signal(node_of(mon, victim), signal.SIGCONT)
    eventually(lambda: v(mon, "kmon_broker_fenced", broker=str(victim)) == 0, 60, "unfenced when it resumes")
    eventually(lambda: probed() == 1, 30, "answering kmon again")


def test_k5d_the_stream_app_killed_comes_back_with_no_counter_lower(mon: LocalStack) -> None:
    eventually(lambda: v(mon, "kmon_brokers") == 3, 120, "all brokers back")
    counters = ("kmon_isr_shrinks_total", "kmon_isr_expands_total", "kmon_leader_elections_total",
                "kmon_controller_changes_total")
    before = {name: total(mon, name) for name in counters}
    restarted = time.time()
    mon.kill("stream")
    mon.start("stream")
    # its /metrics serve the restored views at once; back is applying new events again (the quorum's
    # come every 2 s), which Spark's first batch after a restart can take a while to reach
    eventually(lambda: (v(mon, "kmon_last_event_timestamp_seconds", source="kraft") or 0) > restarted, 120,
               "the restarted app applying new events")
    assert v(mon, "kmon_brokers") == 3
    after = {name: total(mon, name) for name in counters}
    assert all(after[name] >= before[name] for name in counters), (before, after)


def test_k5e_repeated_controller_kills_fire_controller_flapping(mon: LocalStack) -> None:
    for _ in range(3):
        eventually(lambda: agrees(mon) and v(mon, "kmon_brokers") == 3, 90, "the quorum whole and exported")
        leader = quorum(mon).leader_id
        mon.kill(node_of(mon, leader))
        eventually(lambda: v(mon, "kmon_controller_id") not in (None, -1, leader), 30, "a new leader exported")
        mon.start(node_of(mon, leader))
    eventually(lambda: "ControllerFlapping" in firing(mon), 120, "ControllerFlapping firing")




def test_k5f_a_majority_of_voters_hung_the_leader_resigns_and_kmon_says_no_leader(mon: LocalStack) -> None:
    """Two voters of three SIGSTOPped: the leader cannot commit, resigns (check quorum, 1.5 fetch
    timeouts) and no election can succeed. kmon exports no leader and NoActiveController fires; the
    views kept the last leader before. QuorumStalled stays silent: a leader named is its condition.
    Resumed, the voters elect a leader and kmon exports it."""
    eventually(lambda: agrees(mon) and v(mon, "kmon_brokers") == 3, 120, "the quorum whole and exported")
    leader = quorum(mon).leader_id
    hung = [n for n in (1, 2, 3) if n != leader]
    stopped = time.monotonic()
    for node in hung:
        mon.send_signal(node_of(mon, node), signal.SIGSTOP)
    try:
        eventually(lambda: v(mon, "kmon_quorum_leader_id") == -1, 60, "no leader exported")
        no_leader_after = time.monotonic() - stopped
        eventually(lambda: "NoActiveController" in firing(mon), 60, "NoActiveController firing")
        firing_after = time.monotonic() - stopped
    finally:
        for node in hung:
            mon.send_signal(node_of(mon, node), signal.SIGCONT)
    print(f"two voters hung: no leader exported after {no_leader_after:.1f} s, "
          f"NoActiveController firing after {firing_after:.1f} s")
    eventually(lambda: (v(mon, "kmon_quorum_leader_id") or -1) >= 0, 60, "a leader exported again")
    eventually(lambda: "NoActiveController" not in firing(mon), 60, "NoActiveController resolved")
    assert not ever_fired(mon, "QuorumStalled", f"{int(time.monotonic() - stopped) + 10}s")
    eventually(lambda: agrees(mon) and v(mon, "kmon_brokers") == 3
               and all(v(mon, "kmon_broker_fenced", broker=str(n)) == 0 for n in hung), 120,
               "the hung brokers unfenced and the quorum exported")

def log_start(stack: LocalStack) -> int:
    """Where the leader's metadata log starts now (its newest snapshot's end when it was cleaned)."""
    q = quorum(stack)
    address = next(iter(q.endpoints.get(q.leader_id, {}).values()))
    with Connection(*address, ClientSecurity(), 5, "test") as conn:
        result = wire.parse_fetch(conn.call(wire.API_FETCH, wire.FETCH_VERSION, wire.fetch_request(
            offset=0, last_fetched_epoch=0, leader_epoch=q.epoch, max_wait_ms=0, max_bytes=1024)))
    return max(result.log_start_offset, result.snapshot.end_offset if result.snapshot else 0)


def test_k6_the_log_cleaned_below_a_stopped_collector_resync_from_the_snapshot(mon: LocalStack) -> None:
    """Kafka cleans the metadata log on a fixed 60 s timer: this waits up to ~70 s for it."""
    eventually(lambda: v(mon, "kmon_partitions", topic="k2-orders") == 3, 60, "k2's topic exported")
    mon.kill("collector-kraft")
    stopped_at = quorum(mon).high_watermark
    from confluent_kafka.admin import AdminClient
    assert mon.state
    admin = AdminClient({"bootstrap.servers": mon.state.bootstrap_servers})
    admin.delete_topics(["k2-orders"])["k2-orders"].result(30)
    create_topic(mon, "k6-after", partitions=2, rf=3)
    eventually(lambda: log_start(mon) > stopped_at, 150, "the metadata log cleaned past the stopped collector",
               interval=2)
    mon.start("collector-kraft")
    eventually(lambda: v(mon, "kmon_partitions", topic="k6-after") == 2, 90, "the topic created while away")
    eventually(lambda: v(mon, "kmon_partitions", topic="k2-orders") is None, 60, "the topic deleted while away gone")


def test_k7_sampled_mode_polls_the_brokers_where_the_controllers_cannot_be_reached(mon: LocalStack) -> None:
    """`kmon collect kraft --sampled`, reporting as a cluster of its own name beside the exact collector."""
    assert mon.state
    sampled, port = "kraft-sampled", free_port()
    mon.add_service("collector-sampled", [
        sys.executable, "-m", "cli", "collect", "kraft", "--sampled", "--bootstrap-servers",
        mon.state.bootstrap_servers, "--sample-interval", "1", "--cluster", sampled,
        "--events-bootstrap-servers", mon.state.events_bootstrap_servers, "--metrics-port", str(port)],
        port, marker=f"--metrics-port {port}", ready_url=f"http://127.0.0.1:{port}/metrics")
    try:
        sv = lambda name, **labels: value(mon.state.stream_port, name, sampled, **labels)  # type: ignore[union-attr]
        eventually(lambda: sv("kmon_brokers") == 3, 90, "the sampled brokers exported")
        eventually(lambda: sv("kmon_controller_id") == quorum(mon).leader_id, 30,
                   "the quorum's leader (forwarded DescribeQuorum), not Metadata's random broker")
        create_topic(mon, "k7-sampled", partitions=2, rf=3)
        eventually(lambda: sv("kmon_partitions", topic="k7-sampled") == 2, 30, "a topic sampled")
        victim = next(n for n in (1, 2, 3) if n != quorum(mon).leader_id)
        mon.kill(node_of(mon, victim))
        eventually(lambda: sv("kmon_broker_up", broker=str(victim)) == 0, 60, "the dead broker down in the samples")
        eventually(lambda: (sv("kmon_under_replicated_partitions", topic="k7-sampled") or 0) > 0, 60, "URP sampled")
    finally:
        mon.remove("collector-sampled")


def replicas_of(stack: LocalStack, topic: str, partition: int = 0) -> list[int]:
    from confluent_kafka.admin import AdminClient
    assert stack.state
    md = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers}).list_topics(topic, timeout=10)
    return list(md.topics[topic].partitions[partition].replicas)


def test_k8_a_reassignment_is_counted_while_it_runs_without_a_false_urp_alert(mon: LocalStack) -> None:
    """The new replica's broker is down, so the move stays in progress (adding/removing replicas in
    the metadata log) until it returns; Kafka's rule leaves the adding replica out of URP."""
    topic = "k8-move"
    create_topic(mon, topic, partitions=1, rf=2)
    eventually(lambda: v(mon, "kmon_partitions", topic=topic) == 1
               and v(mon, "kmon_under_replicated_partitions", topic=topic) == 0, 60, "topic exported")
    before = replicas_of(mon, topic)
    [spare] = {1, 2, 3} - set(before)
    target = [before[0], spare]
    mon.kill(node_of(mon, spare))
    eventually(lambda: v(mon, "kmon_broker_fenced", broker=str(spare)) == 1, 60, "the spare broker fenced")
    reassign(mon, topic, 0, target)
    eventually(lambda: v(mon, "kmon_reassigning_partitions") == 1, 60, "the reassigning partition exported")
    assert v(mon, "kmon_under_replicated_partitions", topic=topic) == 0
    mon.start(node_of(mon, spare))
    eventually(lambda: replicas_of(mon, topic) == target, 120, "the move done")
    eventually(lambda: v(mon, "kmon_reassigning_partitions") == 0, 60, "the move over in the views")
    assert v(mon, "kmon_under_replicated_partitions", topic=topic) == 0
    evaluations = RuleEvaluations(mon)
    never(lambda: ever_fired(mon, "UnderReplicatedPartitions", "10m", topic=topic),
          lambda: evaluations.at_least(3), 90, "UnderReplicatedPartitions fired during the reassignment")


def test_k9_kmon_history_tells_every_scenario_once_in_order_as_the_counters_count(mon: LocalStack) -> None:
    """`kmon history`, as a user runs it, over what the scenarios above did to the KRaft cluster."""
    from cli.monitor import checkpoint_dir
    from streaming.paths import history_dir
    assert_history_agrees(mon, CLUSTER)
    told = subprocess.run([sys.executable, "-m", "cli", "history", "--dir", str(history_dir(checkpoint_dir(mon.dir))),
                           "--cluster", CLUSTER, "--json"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert told.returncode == 0, told.stderr[-2000:]
    rows = [json.loads(line) for line in told.stdout.splitlines()]
    keys = [(r["time_ms"], r["position"] if r["position"] is not None else -1, r["entity"], r["kind"]) for r in rows]
    assert keys == sorted(keys), "not in order"
    assert [r for r, n in Counter(json.dumps(r, sort_keys=True) for r in rows).items() if n > 1] == [], "told twice"
    kinds = Counter(r["kind"] for r in rows)
    assert {"isr_shrink", "isr_expand", "leader_election", "controller_change", "broker_fenced", "broker_unfenced",
            "broker_controlled_shutdown", "topic_created", "reassignment_started", "reassignment_finished"} <= set(kinds), \
        kinds
    # each controller change starts where the previous one ended, at a later raft epoch
    controller = [r for r in rows if r["kind"] == "controller_change"]
    assert [r["old"] for r in controller[1:]] == [r["new"] for r in controller[:-1]]
    assert [r["epoch"] for r in controller] == sorted(r["epoch"] for r in controller)
    # k2: the killed broker left each partition's ISR, then joined it again
    k2 = [r for r in rows if r["topic"] == "k2-orders" and r["kind"] in ("isr_shrink", "isr_expand")]
    for p in range(3):
        assert [r["kind"] for r in k2 if r["partition"] == p][:2] == ["isr_shrink", "isr_expand"]
    # k8: one move, begun before it finished, to its target
    moves = [r for r in rows if r["topic"] == "k8-move" and r["kind"].startswith("reassignment")]
    assert [r["kind"] for r in moves] == ["reassignment_started", "reassignment_finished"]
    assert set(moves[0]["new"].split(",")) == set(moves[1]["new"].split(","))
    # the replica it moved away from left the ISR as the move completed: no shrink, so no IsrShrinking
    [left] = set(moves[0]["old"].split(",")) - set(moves[1]["new"].split(","))
    assert [r["kind"] for r in rows if r["topic"] == "k8-move" and r["broker"] == int(left)] == ["replica_removed"]
