"""bench peers (issue 15): the peer's Prometheus files are valid beside kmon's, and the report
attributes each alert to the fault or quiet period in which it began."""
from __future__ import annotations

import subprocess

from bench.peers.faults import FaultRun
from bench.peers.parts import PEER_ALERTS, prometheus_config
from bench.peers.report import Phase, fault_rows, quiet_rows
from bench.peers.watch import Alert, BurrowStatus
from tests.tools import required_tool


def test_the_bench_prometheus_config_with_both_rule_sets_passes_promtool(tmp_path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config(9308, [9310, 9311], {1: 9401, 2: 9402}))
    done = subprocess.run([required_tool("promtool"), "check", "config", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kmon-alerts.yml" in done.stdout and PEER_ALERTS.name in done.stdout   # both rule files loaded


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
