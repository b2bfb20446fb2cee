"""The README's commands that watch clusters kmon did not start, run as a user runs them, on clusters set
up as users set theirs up (plain processes, tests/integration/plain_clusters.py):

- `make watch BOOTSTRAP_SERVERS=...` on a KRaft cluster with a dedicated controller on listeners named
  neither CONTROLLER nor PLAINTEXT, followed as an observer of its metadata log;
- the fleet command (`kmon run --config`) on a secured KRaft cluster that does not grant kmon the metadata
  log and a ZooKeeper-mode cluster under a chroot, both on one /metrics.

kmon finds each cluster's mode and control plane itself; the brokers and the controller reach /metrics, a
topic made afterwards too, a broker SIGKILLed fires BrokerDown in the embedded Prometheus; Ctrl-C stops
kmon and leaves the clusters running; a second run resumes. Before that, `kmon config check` on a config
file naming the clusters (and, beside them, one that does not answer)."""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from dashboards import catalog
from dashboards.push import DATASOURCE_UID
from kmon.toolchain import Toolchain
from stack.state import StackState
from stack.process import cmdline, pid_alive
from stack.process import free_port
from tests.integration.plain_clusters import PlainCluster
from tests.integration.user_runs import ROOT, Run, addresses
from tests.support import eventually, metrics
from tests.unit.fakes import FakeGrafana

pytestmark = pytest.mark.integration
TOPIC = "watched"
CLUSTER = "127.0.0.1"   # the name kmon gives a watched cluster: its first bootstrap host


def readme_watch_command(bootstrap: str) -> list[str]:
    """The README's "Watch your own cluster" command, its HOST:PORT the cluster's."""
    block = (ROOT / "README.md").read_text().split("## Watch your own cluster", 1)[1].split("```sh", 1)[1]
    first = next(line for line in block.split("```", 1)[0].splitlines() if line.strip())
    return [word.replace("HOST:PORT", bootstrap) for word in shlex.split(first.split("#", 1)[0])]


def value(port: str, name: str, **labels: str) -> float | None:
    return metrics(int(port)).get((name, frozenset({"cluster": CLUSTER, **labels}.items())))


def firing(prometheus: str) -> set[str]:
    with urllib.request.urlopen(f"{prometheus}/api/v1/alerts", timeout=5) as r:
        alerts = json.load(r)["data"]["alerts"]
    return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}


@pytest.fixture
def cluster(tmp_path: Path, toolchain: Toolchain) -> PlainCluster:
    plain = PlainCluster(tmp_path / "cluster", toolchain)
    plain.dir.mkdir()
    yield plain
    plain.stop()


def config_check(tmp_path: Path, clusters: str, said: dict[str, list[str]], env: dict[str, str] | None = None) -> None:
    """`kmon config check` on a file naming the clusters (``clusters``: their entries) and one that does not
    answer: the lines ``said`` of each cluster, by name, the other one named, exit 1."""
    gone = f"127.0.0.1:{free_port()}"
    path = tmp_path / "check.yaml"
    path.write_text(f"clusters:\n{clusters}  - cluster: gone\n    bootstrap-servers: {gone}\n")
    done = subprocess.run([str(Path(sys.executable).with_name("kmon")), "config", "check", str(path)], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    for cluster, patterns in said.items():
        for line in patterns:
            assert any(re.search(rf"^{cluster}: {line}", text) for text in lines), (line, done.stdout)
    assert any(text.startswith("gone: cannot be watched: ") and gone in text for text in lines), done.stdout
    assert "events: kmon run starts its own events node" in lines


def collect_from_file(cluster: PlainCluster, tmp_path: Path, runs: list[Run], controllers: str) -> None:
    """A production part run from a config file: the KRaft collector of the file's cluster, its events on a
    topic of the cluster itself; it follows the log (events on its /metrics) and stops on SIGTERM."""
    path = tmp_path / "collect.yaml"
    path.write_text(f"clusters:\n  - cluster: own\n    bootstrap-servers: {cluster.bootstrap}\n"
                    f"    controllers: {controllers}\nevents:\n  bootstrap-servers: {cluster.bootstrap}\n"
                    "  topic: kmon-events-own\n")
    run = Run([str(Path(sys.executable).with_name("kmon")), "collect", "kraft", "--config", str(path), "--cluster",
               "own"], dict(os.environ), tmp_path / "collect.log")
    runs.append(run)
    port = int(run.line(rf"collecting cluster 'own' from its metadata quorum {controllers} .* into kmon-events-own "
                        rf"on {cluster.bootstrap}; metrics on port (\d+)", 90).group(1))
    eventually(lambda: sum(v for (name, _), v in metrics(port).items() if name == "kmon_collector_events_total") > 0,
               60, "the collector's events, on its /metrics")
    run.stop(signal.SIGTERM)
    assert run.proc.returncode == 0 and "Traceback" not in run.said(), run.said()[-3000:]


def watch_it(cluster: PlainCluster, tmp_path: Path, runs: list[Run], found: list[str], controllers: set[int],
             env: dict[str, str] | None = None, admin: dict[str, str] | None = None) -> None:
    """The whole user story on one cluster; ``found``: lines kmon must say about what it found; ``env``:
    the user's settings beside the command, ``admin`` the client settings the test makes a topic with."""
    directory = tmp_path / "kmon"
    env = {**os.environ, "KMON_DIR": str(directory), **(env or {})}
    argv = readme_watch_command(cluster.bootstrap.split(",")[0])

    first = Run(argv, env, tmp_path / "run-1.log")
    runs.append(first)
    at = addresses(first)
    for line in found:
        first.line(line, 5)
    eventually(lambda: value(at["exporter"], "kmon_brokers") == 2, 180, "the two brokers on /metrics")
    eventually(lambda: value(at["exporter"], "kmon_controller_id") in controllers, 60, "the controller on /metrics")
    client = AdminClient({"bootstrap.servers": cluster.bootstrap, **(admin or {})})
    client.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(30)
    eventually(lambda: value(at["exporter"], "kmon_partitions", topic=TOPIC) == 2, 60, "the new topic on /metrics")

    cluster.kill("broker-2")
    eventually(lambda: "BrokerDown" in firing(at["prometheus"]), 120, "BrokerDown firing in kmon's Prometheus")
    assert value(at["exporter"], "kmon_brokers") == 1

    state = StackState.load(directory)
    assert state and not any(name.startswith(("broker-", "controller-", "zookeeper")) for name in state.components)
    mine = [(c.pid, c.marker, c.name) for c in state.components.values()]
    first.stop(signal.SIGINT)   # Ctrl-C
    assert "stopped everything kmon run started" in first.said(), first.said()[-3000:]
    assert "Traceback" not in first.said()
    assert not [name for pid, marker, name in mine if pid_alive(pid) and marker in cmdline(pid)], \
        "kmon's parts still running after Ctrl-C"
    assert cluster.alive() == sorted(set(cluster.procs) - {"broker-2"}), "kmon stopped a process of the cluster"

    second = Run(argv, env, tmp_path / "run-2.log")
    runs.append(second)
    again = addresses(second)
    second.line(r"resuming the stack in ", 5)
    eventually(lambda: value(again["exporter"], "kmon_partitions", topic=TOPIC) == 2, 180,
               "the topic on /metrics after the resume")
    eventually(lambda: value(again["exporter"], "kmon_brokers") == 1, 60, "one broker up after the resume")
    second.stop(signal.SIGINT)
    assert "Traceback" not in second.said()


def test_a_kraft_cluster_with_a_dedicated_controller_on_its_own_listener_names(
        cluster: PlainCluster, tmp_path: Path, runs: list[Run]) -> None:
    cluster.start_kraft(brokers=2, controller_id=3001)
    ctl = f"127.0.0.1:{cluster.ports['controller']}"
    config_check(tmp_path, f"  - cluster: own\n    bootstrap-servers: {cluster.bootstrap}\n",
                 {"own": [r"cluster \S+: brokers 1, 2, KRaft mode", rf"controller quorum at {ctl} \(DescribeQuorum\)",
                          r"following the metadata log as an observer"]})
    collect_from_file(cluster, tmp_path, runs, ctl)
    watch_it(cluster, tmp_path, runs, [r"brokers 1, 2, KRaft mode", rf"controller quorum at {ctl} \(DescribeQuorum\)",
                                       r"following the metadata log as an observer"], controllers={3001})


def readme_fleet_command(config: Path) -> list[str]:
    """The README's "Watch a fleet" command, its file this test's."""
    block = (ROOT / "README.md").read_text().split("### Watch a fleet", 1)[1].split("```sh", 1)[1]
    first = next(line for line in block.split("```", 1)[0].splitlines() if line.strip())
    return [word.replace("kmon.yaml", str(config)) for word in shlex.split(first.split("#", 1)[0])]


def firing_in(prometheus: str, cluster: str) -> set[str]:
    with urllib.request.urlopen(f"{prometheus}/api/v1/alerts", timeout=5) as r:
        alerts = json.load(r)["data"]["alerts"]
    return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing" and a["labels"].get("cluster") == cluster}


def test_a_config_file_with_a_cluster_of_each_mode_watched_on_one_metrics_run_twice(
        tmp_path: Path, toolchain: Toolchain, runs: list[Run]) -> None:
    """Two clusters as users set them up, checked with `kmon config check`, then watched with the README's
    fleet command, twice:

    - "locked": a secured KRaft cluster (SASL on both listeners, ACLs on) that grants kmon DESCRIBE on the
      cluster and nothing more: its mode told by its APIs (no DescribeConfigs), the brokers sampled, one
      warning naming the grant; its client properties in a file (the entry's command-config:);
    - "legacy": a ZooKeeper-mode cluster under a chroot, its ZooKeeper found from the brokers' config;
    - kmon's events on a topic of the user's (the file's events:, its client properties inline, the
      password from the environment); the dashboards and a datasource pushed to a stand-in of Grafana's
      HTTP API (KMON_GRAFANA_URL: no Grafana server can be had here).

    Both clusters on one /metrics, told apart by their names, a topic made on each too; a broker of one
    SIGKILLed fires BrokerDown for that one only; Ctrl-C stops kmon's parts and leaves both clusters
    running; a second run resumes and shows the topics again."""
    kraft, zk = PlainCluster(tmp_path / "kraft", toolchain), PlainCluster(tmp_path / "zk", toolchain)
    handler = type("Handler", (FakeGrafana,), {"requests": [], "objects": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for plain in (kraft, zk):
            plain.dir.mkdir()
        # one after the other from this thread: a process dies with the thread that started it
        kraft.start_kraft(brokers=2, controller_id=3001, secured=True)
        zk.start_zookeeper_mode(chroot="/kafka", brokers=2)
        secret = {"KMON_TEST_SECRET": "kmon-secret"}
        inline = ("    client:\n      security.protocol: SASL_PLAINTEXT\n      sasl.mechanism: PLAIN\n"
                  "      sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule required "
                  'username="kmon" password="${KMON_TEST_SECRET}";\n')
        legacy = f"  - cluster: legacy\n    bootstrap-servers: {zk.bootstrap}\n"
        zk_at = rf"127\.0\.0\.1:{zk.ports['zookeeper']}/kafka"
        config_check(tmp_path, f"  - cluster: locked\n    bootstrap-servers: {kraft.bootstrap}\n{inline}{legacy}",
                     {"locked": [r"cluster \S+: brokers 1, 2, KRaft mode \(by its APIs",
                                 r"sampling the brokers' metadata instead of following the metadata log",
                                 r"missing: .*CLUSTER_AUTHORIZATION_FAILED"],
                      "legacy": [r"cluster \S+: brokers 1, 2, ZooKeeper mode", rf"following ZooKeeper at {zk_at} "]},
                     env=secret)
        config = tmp_path / "kmon.yaml"
        # the events on a cluster of the user's (here the KRaft one, whose brokers this test leaves alone)
        config.write_text(f"clusters:\n  - cluster: locked\n    bootstrap-servers: {kraft.bootstrap}\n"
                          f"    command-config: {kraft.client_config}\n{legacy}"
                          f"events:\n  bootstrap-servers: {kraft.bootstrap}\n  topic: kmon-fleet\n"
                          + inline.replace("\n    ", "\n  ").replace("    client:", "  client:", 1))
        directory = tmp_path / "kmon"
        env = {**os.environ, "KMON_DIR": str(directory), **secret,
               "KMON_GRAFANA_URL": f"http://127.0.0.1:{server.server_address[1]}", "KMON_GRAFANA_TOKEN": handler.token}
        first = Run(readme_fleet_command(config), env, tmp_path / "run-1.log")
        runs.append(first)
        at = addresses(first)
        for line in (r"locked: cluster \S+: brokers 1, 2, KRaft mode \(by its APIs: DescribeConfigs of broker \d+ answered",
                     r"locked: sampling the brokers' metadata instead of following the metadata log",
                     r"WARNING kmon: locked: .*CLUSTER_AUTHORIZATION_FAILED.*granting kmon's principal CLUSTER_ACTION "
                     r"on the cluster makes it exact",
                     r"legacy: cluster \S+: brokers 1, 2, ZooKeeper mode",
                     rf"legacy: following ZooKeeper at {zk_at} \(the brokers' zookeeper.connect\)",
                     rf"^  events cluster \(yours; kmon does not start or stop it\)\n    bootstrap        {kraft.bootstrap}$"):
            first.line(line, 5)
        first.line(r"grafana: .*kmon-cluster-health", 120)

        def of(port: str, cluster: str, name: str, **labels: str) -> float | None:
            return metrics(int(port)).get((name, frozenset({"cluster": cluster, **labels}.items())))
        for cluster, controllers in (("locked", {3001}), ("legacy", {1, 2})):
            eventually(lambda: of(at["exporter"], cluster, "kmon_brokers") == 2, 180, f"{cluster}'s two brokers")
            eventually(lambda: of(at["exporter"], cluster, "kmon_controller_id") in controllers, 60,
                       f"{cluster}'s controller")
        admins = {"locked": AdminClient({"bootstrap.servers": kraft.bootstrap, **kraft.admin_client}),
                  "legacy": AdminClient({"bootstrap.servers": zk.bootstrap})}
        for cluster, admin in admins.items():
            admin.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(30)
        for cluster in admins:
            eventually(lambda: of(at["exporter"], cluster, "kmon_partitions", topic=TOPIC) == 2, 60,
                       f"the topic made on {cluster} on /metrics")

        zk.kill("broker-2")
        eventually(lambda: "BrokerDown" in firing_in(at["prometheus"], "legacy"), 120, "BrokerDown of legacy")
        assert "BrokerDown" not in firing_in(at["prometheus"], "locked")
        assert of(at["exporter"], "locked", "kmon_brokers") == 2 and of(at["exporter"], "legacy", "kmon_brokers") == 1

        state = StackState.load(directory)
        assert state and sorted(state.collector_ports) == ["groups@legacy", "groups@locked", "kraft@locked", "zk@legacy"]
        assert "events" not in state.components   # no events node of kmon's own
        assert "kmon-fleet" in admins["locked"].list_topics(timeout=10).topics
        mine = [(c.pid, c.marker, c.name) for c in state.components.values()]
        first.stop(signal.SIGINT)   # Ctrl-C
        assert "stopped everything kmon run started" in first.said() and "Traceback" not in first.said(), \
            first.said()[-3000:]
        assert not [name for pid, marker, name in mine if pid_alive(pid) and marker in cmdline(pid)], \
            "kmon's parts still running after Ctrl-C"
        assert kraft.alive() == sorted(kraft.procs) and zk.alive() == sorted(set(zk.procs) - {"broker-2"}), \
            "kmon stopped a process of a cluster"
        uploaded = {body["dashboard"]["uid"] for _, path, body in handler.requests if path == "/api/dashboards/db"}
        assert uploaded == {d["uid"] for d in catalog.load_all()}
        assert handler.objects[f"/api/datasources/uid/{DATASOURCE_UID}"]["url"].startswith("http://127.0.0.1:")

        second = Run(readme_fleet_command(config), env, tmp_path / "run-2.log")
        runs.append(second)
        again = addresses(second)
        second.line(r"resuming the stack in ", 5)
        for cluster, brokers in (("locked", 2), ("legacy", 1)):
            eventually(lambda: of(again["exporter"], cluster, "kmon_partitions", topic=TOPIC) == 2, 180,
                       f"{cluster}'s topic on /metrics after the resume")
            eventually(lambda: of(again["exporter"], cluster, "kmon_brokers") == brokers, 60,
                       f"{cluster}'s brokers after the resume")
        second.stop(signal.SIGINT)
        assert "stopped everything kmon run started" in second.said() and "Traceback" not in second.said(), \
            second.said()[-3000:]
    finally:
        server.shutdown()
        server.server_close()
        kraft.stop()
        zk.stop()
