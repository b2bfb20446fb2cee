"""bench peers (issue 15): the peer's Prometheus files are valid beside kmon's, and the report
attributes each alert to the fault or quiet period in which it began; its KRaft mode (issue 34 item
4): the peer's KRaft-era files, and the controller as DescribeCluster names it against the quorum."""
from __future__ import annotations

import contextlib
import re
import subprocess
import time
import types
from pathlib import Path

import yaml

import bench.peers as peers
from bench.peers import controllers
from bench.peers.controllers import Flaps, Sample, flaps
from bench.peers.faults import FAULTS, NOT_ON_KRAFT, FaultRun
from bench.peers.parts import (JMX_JOB, JMX_RULES, JMX_RULES_KRAFT, KLAG_ALERTS, KLAG_GROUP, KLAG_MODES, PEER_ALERTS,
                               PEER_ALERTS_KRAFT, PEER_GROUP, PEER_SCRAPE, prometheus_config)
from bench.peers.report import Phase, fault_rows, lag_rows, quiet_rows
from bench.peers.watch import JMX, KMON, Alert, BurrowStatus
from tests.tools import required_tool


def test_the_bench_prometheus_config_with_both_rule_sets_passes_promtool(tmp_path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config(9308, [9310, 9311], {1: 9401, 2: 9402}))
    done = subprocess.run([required_tool("promtool"), "check", "config", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kmon-alerts.yml" in done.stdout and PEER_ALERTS.name in done.stdout   # both rule files loaded
    # the agents at the interval they sustain, kmon's targets at kmon's own
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    assert jobs[JMX_JOB]["scrape_interval"] == jobs[JMX_JOB]["scrape_timeout"] == PEER_SCRAPE
    assert all("scrape_interval" not in job for name, job in jobs.items() if name != JMX_JOB)


def test_klag_exporters_instances_are_scraped_as_the_agents_are_and_its_rules_pass_promtool(tmp_path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config(9308, [9310, 9311], {1: 9401}, klag_ports={"klag": 9501, "klag-rate": 9502}))
    done = subprocess.run([required_tool("promtool"), "check", "config", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert KLAG_ALERTS.name in done.stdout
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    assert all(jobs[job]["scrape_interval"] == PEER_SCRAPE for job in KLAG_MODES)
    [group] = yaml.safe_load(KLAG_ALERTS.read_text())["groups"]
    assert group["name"] == KLAG_GROUP and all("for" in rule for rule in group["rules"])
    assert KLAG_ALERTS.name not in prometheus_config(9308, [9310, 9311], {1: 9401})   # no klag, no rules


def test_lag_rows_give_each_stretch_its_last_sample_and_each_systems_largest_error() -> None:
    run = FaultRun("lag producer pause", "", {"group": "g"}, moment=100)
    run.figures = [{"phase": "writing", "t": 5, "true_lag_s": 10.0, "kmon_lag_s": 9.0, "klag_lag_s": 4.0},
                   {"phase": "writing", "t": 10, "true_lag_s": 15.0, "kmon_lag_s": 15.0, "klag_lag_s": None},
                   {"phase": "paused", "t": 15, "true_lag_s": 20.0, "kmon_lag_s": 18.0, "klag_lag_s": 0.0}]
    rows = lag_rows([Phase("quiet baseline", 0, 99), Phase("lag-producer-pause", 99, 200, run)], ("kmon", "klag"))
    assert [(r["phase"], r["t"], r["samples"]) for r in rows] == [("writing", 10, 2), ("paused", 15, 1)]
    assert (rows[0]["kmon_max_err_s"], rows[0]["klag_max_err_s"], rows[0]["klag_no_lag_s"]) == (1.0, 6.0, 1)
    assert (rows[1]["kmon_max_err_s"], rows[1]["klag_max_err_s"], rows[1]["kmon_no_lag_s"]) == (2.0, 20.0, 0)


def _alert(system: str, name: str, active_at: float, fired_at: float | None, **labels: str) -> Alert:
    return Alert(system, name, {"alertname": name, "severity": "warning", **labels}, active_at, fired_at)


def test_alerts_are_attributed_by_when_they_began_and_named_by_their_labels() -> None:
    kill = FaultRun("follower kill", "SIGKILL broker 3", {"broker": "3"}, moment=101)
    stuck = FaultRun("stuck rebalance", "held", {"group": "g"}, moment=305)
    phases = [Phase("quiet baseline", 0, 100), Phase("follower-kill", 100, 200, kill),
              Phase("quiet after", 200, 300), Phase("stuck-rebalance", 300, 600, stuck)]
    alerts = [
        _alert("kmon", "BrokerDown", 115, 122, cluster="bench", broker="3"),
        _alert("jmx", "UnderReplicatedPartitions", 110, 121.5, kafka_cluster="bench", broker="1"),
        _alert("kmon", "IsrShrinking", 250, 261, cluster="bench", broker="2"),      # began in a quiet period
        _alert("kmon", "NoActiveController", 150, None, cluster="bench"),             # pending, never fired
        _alert("kmon", "ConsumerGroupStuckRebalancing", 490, 490, cluster="bench", group="g"),
    ]
    groups = {"g": BurrowStatus("g", [(290, "HTTP 404"), (302, "OK"), (400, "WARN"), (420, "OK")])}
    rows = {(r["fault"], r["system"]): r for r in fault_rows(phases, alerts, groups)}
    assert rows[("follower kill", "kmon")] == {
        "fault": "follower kill", "system": "kmon", "culprit": "broker 3", "alerts": "BrokerDown{broker=3} 21.0 s",
        "first_alert_s": 21.0, "names_culprit": True, "notes": ""}
    jmx = rows[("follower kill", "jmx")]
    assert (jmx["first_alert_s"], jmx["names_culprit"]) == (20.5, False)   # it names the broker that reported
    assert ("follower kill", "burrow") not in rows                          # no group: not Burrow's to see
    assert rows[("stuck rebalance", "kmon")]["first_alert_s"] == 185.0
    assert rows[("stuck rebalance", "jmx")]["alerts"] == "none"
    assert rows[("stuck rebalance", "burrow")]["alerts"] == "status WARN 95.0 s"
    quiet = {r["system"]: r for r in quiet_rows(phases, alerts, groups)}
    assert (quiet["kmon"]["false_alerts"], quiet["kmon"]["which"]) == (1, "IsrShrinking{broker=2}")
    assert quiet["jmx"]["false_alerts"] == quiet["burrow"]["false_alerts"] == 0
    assert quiet["kmon"]["quiet_s"] == 200


# ------------------------------------------------------------------ the KRaft mode (issue 34 item 4)

def test_the_kraft_prometheus_config_loads_the_peers_kraft_rules_and_they_pass_promtool(tmp_path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config(9308, [9310, 9311], {1: 9401, 2: 9402}, kraft=True))
    done = subprocess.run([required_tool("promtool"), "check", "config", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kmon-alerts.yml" in done.stdout and PEER_ALERTS_KRAFT.name in done.stdout
    assert str(PEER_ALERTS) not in done.stdout
    rules = subprocess.run([required_tool("promtool"), "check", "rules", str(PEER_ALERTS_KRAFT)],
                           capture_output=True, text=True)
    assert rules.returncode == 0, rules.stdout + rules.stderr


def _exported(config: Path, mbean_attribute: str) -> str | None:
    """The name the JMX exporter gives one MBean attribute (its matching form, ``domain<key=value,
    ...><>attribute: value``) under ``config``: the first rule whose pattern matches (unanchored,
    as the exporter wraps it), its name with the groups filled in, lower case."""
    for rule in yaml.safe_load(config.read_text())["rules"]:
        m = re.match(rf"^.*(?:{rule['pattern']}).*$", mbean_attribute)
        if m:
            return re.sub(r"\$(\d+)", lambda g: m.group(int(g.group(1))), rule["name"]).lower()
    return None


def test_the_kraft_exporter_rules_name_what_the_kraft_alerts_read() -> None:
    named = {a: _exported(JMX_RULES_KRAFT, a) for a in (
        "kafka.controller<type=KafkaController, name=ActiveControllerCount><>Value: 1",
        "kafka.controller<type=KafkaController, name=OfflinePartitionsCount><>Value: 0",
        "kafka.server<type=ReplicaManager, name=UnderReplicatedPartitions><>Value: 0",
        "kafka.server<type=ReplicaManager, name=UnderMinIsrPartitionCount><>Value: 0",
        "kafka.server<type=raft-metrics><>current-leader: 2",
        "kafka.server<type=raft-metrics><>current-epoch: 7",
        "kafka.server<type=raft-metrics><>current-state: follower")}
    assert list(named.values()) == [
        "kafka_controller_kafkacontroller_activecontrollercount", "kafka_controller_kafkacontroller_offlinepartitionscount",
        "kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_replicamanager_underminisrpartitioncount",
        "kafka_server_raftmetrics_current_leader", "kafka_server_raftmetrics_current_epoch",
        "kafka_server_raftmetrics_current_state"]
    alerts = PEER_ALERTS_KRAFT.read_text()
    for name in list(named.values())[:4]:
        assert name in alerts
    assert {r["alert"] for g in yaml.safe_load(alerts)["groups"] for r in g["rules"]} == {
        "AbnormalControllerState", "OfflinePartitions", "UnderReplicatedPartitions", "UnderMinIsrPartitionCount"}
    assert all(r["for"] == "10s" for g in yaml.safe_load(alerts)["groups"] for r in g["rules"])
    assert {g["name"] for g in yaml.safe_load(alerts)["groups"]} == {PEER_GROUP}   # how the recorder tells the peer


def test_the_kraft_exporter_rules_name_yammer_metrics_as_the_zookeeper_era_rules_do() -> None:
    kraft, zk = (yaml.safe_load(f.read_text()) for f in (JMX_RULES_KRAFT, JMX_RULES))
    raft = [r for r in kraft["rules"] if "raft-metrics" in r["pattern"]]
    assert kraft["rules"][len(raft):] == zk["rules"]
    assert {k: v for k, v in kraft.items() if k != "rules"} == {k: v for k, v in zk.items() if k != "rules"}


def test_faults_not_on_kraft_are_known_faults_with_a_reason() -> None:
    assert set(NOT_ON_KRAFT) == {"unclean-election"} and set(NOT_ON_KRAFT) <= set(FAULTS)
    assert all("quorum" in why for why in NOT_ON_KRAFT.values())


def test_without_burrow_the_report_has_no_burrow_rows() -> None:
    stuck = FaultRun("stuck rebalance", "held", {"group": "g"}, moment=305)
    phases = [Phase("quiet baseline", 0, 100), Phase("stuck-rebalance", 300, 600, stuck)]
    alerts = [_alert("kmon", "ConsumerGroupStuckRebalancing", 490, 490, cluster="bench", group="g")]
    rows = fault_rows(phases, alerts, {}, (KMON, JMX))
    assert [(r["system"], r["first_alert_s"]) for r in rows] == [("kmon", 185.0), ("jmx", None)]
    assert [r["system"] for r in quiet_rows(phases, alerts, {}, (KMON, JMX))] == ["kmon", "jmx"]


def _s(at: float, answered: int | None, leader: int | None, epoch: int | None, kmon: float | None = None) -> Sample:
    return Sample(at, answered, leader, epoch, kmon)


def test_describe_cluster_changes_are_counted_against_the_quorums_epoch() -> None:
    samples = [
        _s(0, 1, 3, 5, 0), _s(1, 2, 3, 5, 0),                        # before the stretch
        _s(10, 2, 3, 5, 0),                                           # the same answer: no change
        _s(11, 1, 3, 5, 0),                                           # another broker named, no election
        _s(12, None, None, None, None),                               # the kill: nothing answers
        _s(13, 3, None, None, 1),                                     # an answer, the quorum not yet described
        _s(14, 3, 2, 7, 2),                                           # the new leader at epoch 7 (two rounds)
        _s(15, 1, 2, 7, 2),                                           # named another: no election since 14
        _s(16, 1, 2, 7, 2),
        _s(20, 2, 2, 8, 3),                                           # after the stretch
    ]
    f = flaps(samples, 10, 20)
    assert f == Flaps(answers=6, answer_changes=3, unelected=2, epoch_steps=2, leader_changes=1, kmon_changes=2)
    # unelected: the changes at 11 and 15; the one at 13 came while no controller described the quorum
    assert flaps(samples, 0, 10) == Flaps(answers=2, answer_changes=1, unelected=1, epoch_steps=0,
                                          leader_changes=0, kmon_changes=0)
    assert flaps(samples, 30, 40) == Flaps()
    assert flaps([], 0, 10) == Flaps()


def test_controller_rows_give_each_fault_and_the_quiet_stretches_together() -> None:
    kill = FaultRun("controller kill", "SIGKILL the controller", {"broker": "3"}, moment=10)
    phases = [Phase("quiet baseline", 0, 10), Phase("controller-kill", 10, 20, kill), Phase("quiet after", 20, 30)]
    samples = [_s(t, 1 + t % 3, 3 if t < 12 else 2, 5 if t < 12 else 6, 0 if t < 12 else 1) for t in range(30)]
    rows = controllers.rows(samples, phases)
    assert [r["stretch"] for r in rows] == ["controller kill", "quiet (all)"]
    fault, quiet = rows
    assert (fault["describe_cluster_answers"], fault["describe_cluster_changes"], fault["of_them_with_no_election"],
            fault["quorum_epoch_steps"], fault["quorum_leader_changes"], fault["kmon_controller_changes"]) == \
        (10, 10, 9, 1, 1, 1)
    assert (quiet["s"], quiet["describe_cluster_answers"], quiet["describe_cluster_changes"],
            quiet["of_them_with_no_election"], quiet["quorum_epoch_steps"], quiet["kmon_controller_changes"]) == \
        (20, 20, 19, 19, 0, 0)


def test_a_polling_loop_runs_on_its_own_thread_until_its_block_ends():
    from bench.support.polling import Polling

    class Counting(Polling):
        def __init__(self) -> None:
            super().__init__("counting", join_s=5)
            self.rounds = 0

        def _run(self) -> None:
            while not self._stop.wait(0.01):
                self.rounds += 1

    with Counting() as loop:
        deadline = time.time() + 5
        while loop.rounds < 3 and time.time() < deadline:
            time.sleep(0.01)
    assert loop.rounds >= 3
    assert not loop._thread.is_alive()


def test_a_fault_that_breaks_off_ends_the_faults_and_keeps_those_before_it(monkeypatch) -> None:
    ran: list[str] = []

    def fault(name: str, fails: bool = False):
        def run(ctx) -> FaultRun:
            ran.append(name)
            if fails:
                raise TimeoutError("the reassignment done: not within 600 s")
            return FaultRun(name, name, {})
        return run

    monkeypatch.setattr(peers, "FAULTS", {"a": fault("a"), "b": fault("b", fails=True), "c": fault("c")})
    monkeypatch.setattr(peers.faults, "load_topics", lambda ctx, topics: None)
    monkeypatch.setattr(peers, "_steady_load", lambda ctx, groups: contextlib.nullcontext())
    monkeypatch.setattr(peers, "_settle", lambda ctx: None)
    said: list[str] = []
    ctx = types.SimpleNamespace(kraft=False, progress=said.append)
    phases = peers._faults(ctx, ["a", "b", "c"], 0, 0)   # type: ignore[arg-type]
    assert [p.name for p in phases] == ["quiet baseline", "a", "quiet after a"] and ran == ["a", "b"]
    assert any("b broke off (TimeoutError: the reassignment done" in line for line in said)
