"""Helpers for integration tests: topics through the Admin API, partition state from ZooKeeper,
schema events produced like a collector would, /metrics read back, Prometheus' alerts and rule
evaluations, the transition history against the counters."""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cli.monitor import checkpoint_dir
from kmon.codec import decode, encode
from kmon.events import Event, MalformedEvent, PartitionState, ZnodeMeta, entity_key
from kmon.history import COUNTED, Transition, order_key
from kmon.http_client import Credentials
from collectors.kraft.wire import QuorumInfo
from stack.local import LocalStack
from streaming.history_log import files, read
from streaming.paths import history_dir
from tests.exposition import samples

T = TypeVar("T")


def eventually(probe: Callable[[], T], timeout: float = 60, what: str = "condition",
               interval: float = 0.5) -> T:
    """Poll until ``probe`` returns a truthy value; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except Exception as e:  # the cluster may be mid-failover
            last = e
        time.sleep(interval)
    raise AssertionError(f"{what}: not true after {timeout}s (last: {last!r})")


def leave_group(consumer: Consumer, timeout: float = 10) -> None:
    """Close a subscribed consumer after leaving its group through the poll loop. A close() that
    must itself serve a rebalance can hang for ever in rd_kafka_assign (librdkafka#4884), and
    confluent-kafka holds the GIL there: the whole test process froze in a CI run."""
    consumer.unsubscribe()
    settle = time.monotonic() + 1   # the revoke arrives through poll(), maybe not at once
    deadline = time.monotonic() + timeout
    while time.monotonic() < settle or (consumer.assignment() and time.monotonic() < deadline):
        consumer.poll(0.2)
    consumer.close()


def events_on(bootstrap: str, topic: str) -> list[Event]:
    """Every event on ``topic`` up to its current end, each partition in offset order (tombstones and
    values that are no event left out)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"itest-{time.monotonic_ns()}",
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        done = {p for p, end in ends.items() if end == 0}
        found = []
        while len(done) < len(ends):
            msg = consumer.poll(5)
            if msg is None:
                raise AssertionError(f"reading {topic} stalled; partitions read to the end: {sorted(done)}")
            if msg.error() is not None:
                continue
            if msg.value() is not None:
                try:
                    found.append(decode(msg.value()))
                except MalformedEvent:   # skipped, as the stream skips it (scenario 9 writes one)
                    pass
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return found
    finally:
        consumer.close()


def never(probe: Callable[[], Any], until: Callable[[], Any], timeout: float, what: str,
          interval: float = 0.5) -> None:
    """``probe`` stays falsy at every poll until ``until`` is true (e.g. N rule evaluations
    passed): a negative assertion over a span, without a fixed sleep. Fails on the first
    truthy value, naming it, or when ``until`` is not reached in ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        seen = probe()
        if seen:
            raise AssertionError(f"{what}: {seen!r}")
        if until():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: could not watch for {timeout}s (the span did not complete)")
        time.sleep(interval)


def create_topic(stack: LocalStack, name: str, partitions: int = 1, rf: int = 3,
                 config: dict[str, str] | None = None) -> None:
    assert stack.state
    admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers, **stack.state.kafka_client()})
    futures = admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])
    futures[name].result(timeout=30)
    if stack.state.kraft:   # created when the controller answers: its records are committed
        return
    eventually(lambda: all(partition_state(stack, name, p) for p in range(partitions)), 30,
               f"state znodes of {name}")


def reassign(stack: LocalStack, topic: str, partition: int, replicas: list[int]) -> None:
    """Start moving a partition of a KRaft cluster: AlterPartitionReassignments (v0), as Kafka's tool
    sends it, but without the tool's check that every target broker is alive, so a move can wait for
    a broker that is down (the controller only wants it registered)."""
    from collectors.kafka_encoding import Reader
    from collectors.kraft.connection import ClientSecurity, Connection
    from collectors.kraft.wire import Writer, error_name
    assert stack.state
    port = next(c.port for name, c in stack.state.components.items() if name.startswith("broker-") and c.alive())
    body = Writer().int32(30_000).count(1).compact_string(topic).count(1).int32(partition).count(len(replicas))
    for broker in replicas:
        body.int32(broker)
    body.no_tags().no_tags().no_tags()
    with Connection("127.0.0.1", port, ClientSecurity(), 30, "test") as conn:
        r = conn.call(45, 0, body.bytes())
    def partition_error(x: Reader) -> tuple[int, str | None]:
        x.int32()
        answer = x.int16("error_code"), x.nullable_string("error_message")
        x.skip_tagged_fields("partition")
        return answer

    def topic_errors(x: Reader) -> list[tuple[int, str | None]]:
        x.string("name")
        errors = x.nullable_array("partitions", partition_error) or ()
        x.skip_tagged_fields("topic")
        return errors

    r.int32()   # throttle time
    error, message = r.int16("error_code"), r.nullable_string("error_message")
    errors = [(error_name(code), why) for topic_ in r.nullable_array("responses", topic_errors) or ()
              for code, why in topic_ if code]
    assert not error and not errors, (error_name(error), message, errors)


def quorum(stack: LocalStack, timeout: float = 5) -> QuorumInfo:
    """The quorum as its leader describes it (any controller answers who leads); ``timeout``: seconds
    each controller gets to answer (a stopped one accepts the connection and never answers)."""
    from collectors.kraft import wire
    from collectors.kraft.connection import ClientSecurity, Connection
    assert stack.state
    for address in stack.state.controllers.split(","):
        host, _, port = address.rpartition(":")
        try:
            with Connection(host, int(port), ClientSecurity(), timeout, "test") as conn:
                info = wire.parse_describe_quorum(conn.call(wire.API_DESCRIBE_QUORUM, wire.DESCRIBE_QUORUM_VERSION,
                                                            wire.describe_quorum_request()))
        except OSError:
            continue
        if not info.error:
            return info
    raise AssertionError("no controller describes the quorum")


def preferred_election(stack: LocalStack) -> None:
    """Elect every partition's preferred replica, as an operator does (Kafka's own tool's call)."""
    from confluent_kafka import ElectionType
    assert stack.state
    admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers, **stack.state.kafka_client()})
    try:
        admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=60)
    except Exception as e:  # partitions already led by their preferred replica are reported as errors
        if "ELECTION_NOT_NEEDED" not in str(e):
            raise


def partition_state(stack: LocalStack, topic: str, partition: int) -> dict[str, Any]:
    with stack.zk() as client:
        data, _ = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)


def assigned_replicas(stack: LocalStack, topic: str, partition: int) -> list[int]:
    with stack.zk() as client:
        data, _ = client.get(f"/brokers/topics/{topic}")
        return json.loads(data)["partitions"][str(partition)]


def metrics(port: int, credentials: Credentials | None = None) -> dict[tuple[str, frozenset], float]:
    """/metrics of kmon's process on ``port``; over TLS with a password where ``credentials`` (a secured
    stack's: StackState.web_credentials) say so."""
    return samples(_get(port, "/metrics", credentials).decode())


def _get(port: int, path: str, credentials: Credentials | None) -> bytes:
    scheme = "https" if credentials and credentials.tls else "http"
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{port}{path}",
                                     headers=credentials.header() if credentials else {})
    with urllib.request.urlopen(request, timeout=30, context=credentials.tls if credentials else None) as r:
        return r.read()


def value(port: int, name: str, cluster: str, credentials: Credentials | None = None, **labels: str) -> float | None:
    return metrics(port, credentials).get((name, frozenset({"cluster": cluster, **labels}.items())))


def api(port: int, path: str, credentials: Credentials | None = None, **params: str) -> dict:
    """The stream app's API (streaming/api.py): ``path`` under /api/v1, as parsed JSON."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    return json.loads(_get(port, f"/api/v1{path}{query}", credentials))


def mcp_answers(port: int, *calls: tuple[str, dict], argv: list[str] | None = None) -> list[str]:
    """Each (tool, arguments) of `kmon mcp` on the stream app at ``port`` (or as ``argv`` says), called in one
    session of the MCP SDK's own client over stdio, as an agent calls them; the text of each answer (an error
    fails)."""
    import asyncio

    from mcp import Client, StdioServerParameters
    kmon = str(Path(sys.executable).with_name("kmon"))
    server = StdioServerParameters(command=kmon, args=argv or ["mcp", "--api-url", f"http://127.0.0.1:{port}"],
                                   env=dict(os.environ))

    async def session() -> list[str]:
        answers = []
        async with Client(server, read_timeout_seconds=60) as client:
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                text = "\n".join(c.text for c in result.content)
                assert not result.is_error, f"{tool}({arguments}): {text}"
                answers.append(text)
        return answers
    return asyncio.run(session())


def prom(stack: LocalStack, path: str, **params: str) -> dict:
    url = f"{stack.state.url('prometheus')}{path}?{urllib.parse.urlencode(params)}"  # type: ignore[union-attr]
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]


def firing(stack: LocalStack) -> set[str]:
    return {a["labels"]["alertname"] for a in prom(stack, "/api/v1/alerts")["alerts"] if a["state"] == "firing"}


def ever_fired(stack: LocalStack, alert: str, window: str, **labels: str) -> bool:
    sel = ",".join([f'alertname="{alert}"', 'alertstate="firing"'] + [f'{k}="{x}"' for k, x in labels.items()])
    return bool(prom(stack, "/api/v1/query", query=f"max_over_time(ALERTS{{{sel}}}[{window}])")["result"])


class RuleEvaluations:
    """Counts Prometheus' evaluations of kmon's rule groups from the moment it is made."""

    def __init__(self, stack: LocalStack) -> None:
        self.stack = stack
        self.seen: set[tuple[str, ...]] = {self._last()}

    def _last(self) -> tuple[str, ...]:
        return tuple(sorted(g["lastEvaluation"] for g in prom(self.stack, "/api/v1/rules")["groups"]))

    def at_least(self, n: int) -> bool:
        self.seen.add(self._last())
        return len(self.seen) > n


def history_rows(stack: LocalStack, cluster: str) -> list[Transition]:
    """The transition history the stack's stream app wrote for ``cluster``, in order."""
    return sorted((t for f in files(history_dir(checkpoint_dir(stack.dir))) if f.cluster == cluster for t in read(f)),
                  key=order_key)


def current_incarnations(rows: list[Transition]) -> list[Transition]:
    """The rows of each topic since its last creation: a topic deleted and created again under its
    name starts its counters again (its series went with it), while the history keeps both."""
    created = {t.topic: i for i, t in enumerate(rows) if t.kind == "topic_created"}
    return [t for i, t in enumerate(rows) if t.topic is None or i >= created.get(t.topic, -1)]


def history_disagreements(stack: LocalStack, cluster: str) -> list[str]:
    """Each exported counter of ``cluster`` against the rows of its kinds with its labels: [] when equal."""
    assert stack.state
    exported = metrics(stack.state.stream_port)
    history = current_incarnations(history_rows(stack, cluster))
    counted = {c.metric: c for c in COUNTED}
    out = []
    for (name, label_set), n in exported.items():
        labels = {k: x for k, x in label_set if k in Transition._fields}   # a group's type is no column
        if name not in counted or labels.pop("cluster") != cluster:
            continue
        count = sum(counted[name].of(t) for t in history if t.kind in counted[name].kinds
                    and all(str(getattr(t, k)) == x for k, x in labels.items()))
        if count != n:
            out.append(f"{name}{labels}: exported {n}, in the history {count}")
    return out


def assert_history_agrees(stack: LocalStack, cluster: str, timeout: float = 60) -> None:
    """Waits until every counter of ``cluster`` equals its rows in the history; fails naming those that do not."""
    seen: list[str] = []

    def agree() -> bool:
        seen[:] = history_disagreements(stack, cluster)
        return not seen
    try:
        eventually(agree, timeout, "history and counters agree")
    except AssertionError as e:
        raise AssertionError(f"{e}: " + "; ".join(seen)) from None


class Events:
    """Produces schema events with increasing zxids, as the ZooKeeper collector would."""

    def __init__(self, stack: LocalStack, topic: str, cluster: str):
        assert stack.state
        self.cluster = cluster
        self.producer = Producer({"bootstrap.servers": stack.state.bootstrap_servers,
                                  "enable.idempotence": True, "acks": "all"})
        self.topic = topic
        self.zxid = 100

    def send(self, kind: str, entity: str, data: object, op: str = "upsert", zxid: int | None = None) -> None:
        if zxid is None:
            self.zxid += 1
            zxid = self.zxid
        event = Event(cluster=self.cluster, source="zk", kind=kind, entity=entity, op=op, observed_ms=zxid,
                      data=data, zxid=zxid, znode=ZnodeMeta(f"/{entity}", zxid, 0, zxid))
        self.producer.produce(self.topic, key=event.message_key, value=encode(event))
        self.producer.flush(10)

    def raw(self, key: bytes | None, value: bytes) -> None:
        self.producer.produce(self.topic, key=key, value=value)
        self.producer.flush(10)

    def partition(self, p: int, leader: int, isr: tuple[int, ...], epoch: int, zxid: int | None = None) -> None:
        self.send("partition", entity_key("partition", "orders", p),
                  PartitionState("orders", p, leader, epoch, isr, 1), zxid=zxid)
