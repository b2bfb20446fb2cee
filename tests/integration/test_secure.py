"""kmon on a cluster secured as production clusters are (`kmon stack up --secure`): brokers on
SASL_SSL only (SCRAM, a CA made at start), ZooKeeper requiring a SASL login from every client
and holding Kafka's znodes with ACLs. The collectors connect with the client properties files
the stack wrote; wrong credentials end a collector with one line; no secret is ever shown."""
from __future__ import annotations

import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from stack.local import LocalStack
from stack.secure import SecureFiles
from tests.conftest import monitored_stack
from tests.support import api, create_topic, eventually, mcp_answers, metrics, prom, value

pytestmark = pytest.mark.integration
CLUSTER = "secure"
TOPIC = "secured-topic"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, toolchain) -> Iterator[LocalStack]:
    with monitored_stack(tmp_path_factory.mktemp("secure"), toolchain, CLUSTER, brokers=2, secure=True) as stack:
        yield stack


def files(stack: LocalStack) -> SecureFiles:
    assert stack.state and stack.state.secure_files
    return stack.state.secure_files


def v(stack: LocalStack, name: str, **labels: str) -> float | None:
    assert stack.state
    return value(stack.state.stream_port, name, CLUSTER, stack.state.web_credentials(), **labels)


def kmon(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_the_cluster_refuses_clients_that_do_not_log_in(secure: LocalStack) -> None:
    assert secure.state
    # kazoo does not know ZooKeeper's "SASL login required" error code and its connection thread dies on
    # it, so the plain read runs in a child bounded by a timeout: it must not print the broker ids
    read = ("from kazoo.client import KazooClient; zk = KazooClient(hosts=%r, timeout=5); zk.start(timeout=10); "
            "print('ids', zk.get_children('/brokers/ids'))" % secure.state.zk_connect)
    try:
        out = subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, timeout=12)
        assert out.returncode != 0 and "ids" not in out.stdout, out.stdout
    except subprocess.TimeoutExpired as hung:
        assert "ids" not in (hung.stdout or b"").decode(errors="replace")
    plain = Consumer({"bootstrap.servers": secure.state.bootstrap_servers, "group.id": "plain", "log_level": 0,
                      "socket.timeout.ms": 3000})
    try:
        with pytest.raises(Exception):
            plain.list_topics(timeout=5)
    finally:
        plain.close()


def test_the_monitor_follows_a_secured_cluster_and_sees_a_broker_die(secure: LocalStack) -> None:
    assert secure.state
    create_topic(secure, TOPIC, partitions=2, rf=2)
    eventually(lambda: v(secure, "kmon_brokers") == 2 and v(secure, "kmon_partitions", topic=TOPIC) == 2
               and v(secure, "kmon_under_replicated_partitions", topic=TOPIC) == 0, 120, "secured topic exported")
    # a group that only commits: the groups collector reads it from __consumer_offsets over SASL_SSL
    committer = Consumer({"bootstrap.servers": secure.state.bootstrap_servers, "group.id": "secured-group",
                          "enable.auto.commit": False, **secure.state.kafka_client()})
    try:
        committer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    finally:
        committer.close()
    eventually(lambda: v(secure, "kmon_consumer_group_state", group="secured-group", type="classic", state="Empty") == 1, 90,
               "group of the secured cluster exported")

    secure.kill_broker(2)
    eventually(lambda: v(secure, "kmon_brokers") == 1
               and (v(secure, "kmon_under_replicated_partitions", topic=TOPIC) or 0) > 0, 60, "broker death seen")
    secure.start_broker(2)
    eventually(lambda: v(secure, "kmon_brokers") == 2, 90, "broker back")

    logs = {name: Path(secure.component(f"collector-{name}").log).read_text() for name in ("zk", "groups")}
    assert "(SASL_SSL SCRAM-SHA-512 as 'kmon')" in logs["groups"]
    assert "(plaintext, SASL DIGEST-MD5 as 'kmon')" in logs["zk"]


def test_kmon_s_own_endpoints_want_tls_and_the_password_and_its_prometheus_has_both(secure: LocalStack) -> None:
    assert secure.state
    credentials = secure.state.web_credentials()
    assert credentials and credentials.tls
    port = secure.state.stream_port
    for url, context, code in [(f"http://127.0.0.1:{port}/metrics", None, 400),            # plain HTTP to TLS
                               (f"https://127.0.0.1:{port}/api/v1/health", credentials.tls, 401)]:   # no password
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10, context=context)
        assert refused.value.code == code
    with pytest.raises(urllib.error.URLError) as untrusted:   # a client that does not trust the stack's CA
        urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=10, context=ssl.create_default_context())
    assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value)
    eventually(lambda: [c["cluster"] for c in api(port, "/health", credentials)["clusters"]] == [CLUSTER], 90,
               "the API, over TLS with the password")

    def scraped() -> dict[str, set[float]]:
        ups: dict[str, set[float]] = {}
        for r in prom(secure, "/api/v1/query", query="up")["result"]:
            ups.setdefault(r["metric"]["job"], set()).add(float(r["value"][1]))
        return ups
    eventually(lambda: scraped() == {"kmon-stream": {1.0}, "kmon-collector": {1.0}}, 60,
               "Prometheus scraping the stream app and both collectors over TLS with the password")
    # kmon mcp on the local stack finds its address and its credentials by itself
    [said] = mcp_answers(port, ("cluster_health", {}), argv=["mcp", "--dir", str(secure.dir)])
    assert said.startswith(f"Cluster {CLUSTER} (ZooKeeper mode)"), said


def test_no_secret_in_logs_help_or_metrics(secure: LocalStack) -> None:
    assert secure.state
    secrets = [p.read_text() for p in files(secure).root.glob("*.password")]
    assert len(secrets) == 5
    shown = [Path(c.log).read_text(errors="replace") for n, c in secure.state.components.items()
             if n.startswith(("collector-", "stream"))]
    for port in (secure.state.stream_port, *secure.state.collector_ports.values()):
        shown.append(repr(metrics(port, secure.state.web_credentials())))
    env = {"KMON_MONITORED_KAFKA_SASL_JAAS_CONFIG": f'x.ScramLoginModule required password="{secrets[0]}";'}
    for command in (("collect", "groups"), ("collect", "zk"), ("stream",)):
        shown.append(subprocess.run([sys.executable, "-m", "cli", *command, "--help"], capture_output=True,
                                    text=True, timeout=60, env={**os.environ, **env}).stdout)
    leaks = [s for s in secrets for text in shown if s in text]
    assert leaks == []


def test_wrong_credentials_end_a_collector_with_one_line_naming_cluster_and_mechanism(
        secure: LocalStack, tmp_path: Path) -> None:
    assert secure.state
    wrong = "not-the-password"
    kafka = tmp_path / "wrong-kafka.properties"
    kafka.write_text(files(secure).kafka_client.read_text().replace(files(secure).password("kafka", "kmon"), wrong))
    zk = tmp_path / "wrong-zk.properties"
    zk.write_text(files(secure).zk_client.read_text().replace(files(secure).password("zookeeper", "kmon"), wrong))
    common = ("--cluster", "wrong", "--events-bootstrap-servers", secure.state.events_bootstrap_servers)
    runs = {
        "monitored bootstrap": kmon("collect", "groups", "--bootstrap-servers", secure.state.bootstrap_servers,
                                    "--command-config", str(kafka), *common),
        "monitored ZooKeeper": kmon("collect", "zk", "--zookeeper", secure.state.zk_connect,
                                    "--zk-client-config", str(zk), *common),
    }
    for role, run in runs.items():
        lines = [line for line in run.stderr.splitlines() if "refused kmon (" in line]
        assert run.returncode == 1, run.stderr[-2000:]
        assert len(lines) == 1 and role in lines[0], run.stderr[-2000:]
        assert ("SCRAM-SHA-512" if "bootstrap" in role else "DIGEST-MD5") in lines[0]
        assert wrong not in run.stderr and "Traceback" not in run.stderr
