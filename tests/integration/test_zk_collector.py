"""Issue 3: every control-plane change in ZooKeeper becomes an event on a Kafka topic.

The collector runs in-process against the real stack; the events are read back from the
events topic with a plain consumer, so each test sees exactly what the stream app would.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from collectors.publisher import PublisherConfig
from collectors.runner import Running, running
from collectors.zk.collector import ZkCollector, ZkCollectorConfig
from kmon.codec import decode
from kmon.events import Event
from stack.local import LocalStack
from stack.process import free_port
from tests.conftest import running_stack
from tests.support import eventually, metrics, partition_state

pytestmark = pytest.mark.integration
CLUSTER = "itest"


# ---------------------------------------------------------------------- reading the events back

class EventLog:
    """Everything on the events topic so far, per message key, in order (tombstones as None)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"itest-{uuid.uuid4().hex}",
                                  "enable.auto.commit": False,
                                  # a brand-new topic may not be served yet: start over, never skip
                                  "auto.offset.reset": "earliest"})
        self.assigned = False
        self.by_key: dict[str, list[Event | None]] = {}

    def poll(self) -> EventLog:
        if not self.assigned:   # the publisher creates the topic in the background
            meta = self.consumer.list_topics(self.topic, timeout=5).topics[self.topic]
            if meta.error is not None or not meta.partitions:
                return self
            self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in meta.partitions])
            self.assigned = True
        deadline = time.monotonic() + 5   # let the caller check its own deadline
        while time.monotonic() < deadline and (msg := self.consumer.poll(0.5)) is not None:
            if msg.error() is None:
                value = msg.value()
                self.by_key.setdefault(msg.key().decode(), []).append(None if value is None else decode(value))
        return self

    def of(self, entity: str) -> list[Event]:
        """The events of one entity, in order, without tombstones."""
        return [e for e in self.by_key.get(f"{CLUSTER}/{entity}", []) if e is not None]

    def ops(self, entity: str) -> list[str]:
        return [e.op for e in self.of(entity)]

    def upserts(self, entity: str) -> list[Any]:
        return [e.data for e in self.of(entity) if e.op == "upsert"]

    def snapshot(self, reason: str, timeout: float = 90) -> tuple[Event, list[Event]]:
        """Wait for a completed snapshot: its end marker and all its entities (the markers and the
        entities travel on different partitions)."""
        def complete(log: EventLog) -> tuple[Event, list[Event]] | None:
            for end in (e for e in log.of("snapshot:zk") if e.kind == "snapshot_end" and e.data.reason == reason):
                events = log.in_snapshot(end.data.snapshot_id)
                if sum(e.op == "upsert" for e in events) == end.data.entities:
                    return end, events
            return None
        return self.wait(complete, f"the {reason} snapshot", timeout)

    def in_snapshot(self, snapshot_id: str) -> list[Event]:
        return [e for events in self.by_key.values() for e in events
                if e is not None and e.snapshot_id == snapshot_id and e.op != "marker"]

    def wait(self, probe: Callable[[EventLog], Any], what: str, timeout: float = 90) -> Any:
        return eventually(lambda: probe(self.poll()), timeout, what)

    def close(self) -> None:
        self.consumer.close()


@dataclass
class Harness:
    run: Running
    log: EventLog

    def metric(self, name: str, **labels: str) -> float | None:
        return metrics(self.run.metrics_port).get((name, frozenset({"cluster": CLUSTER, **labels}.items())))

    def health(self) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.run.metrics_port}/healthz")


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def run_zk(config: ZkCollectorConfig, events: PublisherConfig) -> AbstractContextManager[Running]:
    return running(config.cluster, lambda p, t: ZkCollector(config, p, t), events)


@contextmanager
def collecting(watched: LocalStack, events: LocalStack, hosts: str | None = None, session_timeout_s: float = 10,
               **publisher: Any) -> Iterator[Harness]:
    """The collector on ``watched`` (directly or through ``hosts``), publishing to a fresh topic on ``events``."""
    assert watched.state and events.state
    topic = f"kmon-events-{uuid.uuid4().hex[:8]}"
    config = ZkCollectorConfig(hosts=hosts or watched.state.zk_address, chroot=watched.state.chroot,
                               cluster=CLUSTER, session_timeout_s=session_timeout_s)
    log = EventLog(events.state.bootstrap_servers, topic)
    try:
        with run_zk(config, PublisherConfig(events.state.bootstrap_servers, topic, **publisher)) as run:
            log.snapshot("start")
            yield Harness(run, log)
    finally:
        log.close()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def small_stack(tmp_path_factory: pytest.TempPathFactory, toolchain) -> Iterator[LocalStack]:
    """One broker under a chroot: a second cluster to watch, or to lose as the events cluster."""
    with running_stack(tmp_path_factory.mktemp("small-stack"), toolchain, brokers=1, chroot="/kafka") as stack:
        yield stack


def admin(stack: LocalStack, call: Callable[[AdminClient], dict[str, Any]]) -> None:
    """One Admin API call, waited for (the client must outlive its futures)."""
    assert stack.state
    client = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers})
    for future in call(client).values():
        future.result(timeout=30)


def create(stack: LocalStack, topic: str, assignment: list[list[int]]) -> None:
    admin(stack, lambda a: a.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)]))


def others(stack: LocalStack, *excluded: int) -> list[int]:
    return [b for b in stack.broker_ids() if b not in excluded]


def zk_children(stack: LocalStack, path: str) -> list[str]:
    with stack.zk() as client:
        return client.get_children(path)


def zk_create(stack: LocalStack, path: str, doc: dict[str, Any]) -> None:
    with stack.zk() as client:
        client.create(path, json.dumps(doc).encode())


# ---------------------------------------------------------------------- tests

def test_start_snapshot_holds_the_whole_tree_and_serves_metrics(stack: LocalStack, topic_name: str) -> None:
    create(stack, topic_name, [[1, 2, 3], [2, 3, 1]])
    eventually(lambda: partition_state(stack, topic_name, 1), 30, "partition states")
    with collecting(stack, stack) as h:
        end, events = h.log.snapshot("start")
        snapshot = {e.entity: e for e in events}
        assert snapshot["controller"].data.broker_id == stack.controller_id()
        assert snapshot["controller"].data.epoch == stack.controller_epoch()
        assert {f"broker:{b}" for b in stack.broker_ids()} <= set(snapshot)
        assert snapshot[f"topic:{topic_name}"].data.replicas == {0: (1, 2, 3), 1: (2, 3, 1)}
        partition = snapshot[f"partition:{topic_name}:1"]
        assert partition.data.leader == 2 and sorted(partition.data.isr) == [1, 2, 3]
        assert partition.znode.path == f"/brokers/topics/{topic_name}/partitions/1/state"
        assert partition.zxid == partition.znode.mzxid and end.data.entities == len(snapshot)
        assert end.data.begun_ms is not None and end.data.begun_ms <= end.observed_ms
        assert h.health() == (200, "ok\n")
        assert h.metric("kmon_collector_zk_connected") == 1
        assert h.metric("kmon_collector_resyncs_total", source="zk") == 1
        assert h.metric("kmon_collector_watches") >= len(snapshot)
        assert h.metric("kmon_collector_events_total", source="zk", kind="partition") >= 2
        # the events go to the watched cluster itself: said once, and as a gauge
        eventually(lambda: h.metric("kmon_collector_events_on_monitored_cluster") == 1, 30, "shared cluster seen")


def test_topic_created_extended_and_deleted(stack: LocalStack, topic_name: str) -> None:
    with collecting(stack, stack) as h:
        create(stack, topic_name, [[1, 2], [2, 3]])
        h.log.wait(lambda l: l.of(f"partition:{topic_name}:1"), "the new topic's partitions")
        assert h.log.upserts(f"topic:{topic_name}")[0].replicas == {0: (1, 2), 1: (2, 3)}
        assert h.log.of(f"topic:{topic_name}")[0].snapshot_id is None   # a change, not a resync

        admin(stack, lambda a: a.create_partitions([NewPartitions(topic_name, 3, [[3, 1]])]))
        state = h.log.wait(lambda l: l.upserts(f"partition:{topic_name}:2"), "the added partition")[0]
        assert state.leader == 3 and sorted(state.isr) == [1, 3]
        assert h.log.upserts(f"topic:{topic_name}")[-1].replicas[2] == (3, 1)

        admin(stack, lambda a: a.delete_topics([topic_name]))
        h.log.wait(lambda l: l.ops(f"topic:{topic_name}")[-1:] == ["delete"], "topic deleted")
        for entity in (f"topic:{topic_name}", *(f"partition:{topic_name}:{p}" for p in range(3))):
            h.log.wait(lambda l: l.by_key[f"{CLUSTER}/{entity}"][-2:] == [l.of(entity)[-1], None]
                       and l.of(entity)[-1].op == "delete", f"{entity}: delete then tombstone")
        # the controller took the replicas offline to delete them: no broker left an ISR
        states = [s for p in range(3) for s in h.log.upserts(f"partition:{topic_name}:{p}")]
        assert [s for s in states if len(s.isr) < 2 and not s.deleting] == []
        deleted_at = h.log.of(f"topic:{topic_name}")[-1].zxid
        assert deleted_at > max(e.zxid for e in h.log.of(f"topic:{topic_name}")[:-1])
        # the controller's deletion marker, if it lived long enough to be read, is gone again
        h.log.wait(lambda l: l.ops(f"topic_deletion:{topic_name}") in ([], ["upsert", "delete"]),
                   "deletion marker gone")


def test_follower_killed_and_restarted(stack: LocalStack, topic_name: str) -> None:
    controller = stack.controller_id()
    leader, victim = others(stack, controller)
    create(stack, topic_name, [[leader, victim, controller]])
    with collecting(stack, stack) as h:
        partition = f"partition:{topic_name}:0"
        stack.kill_broker(victim)
        h.log.wait(lambda l: l.ops(f"broker:{victim}")[-1:] == ["delete"], "broker deregistered")
        shrunk = h.log.wait(lambda l: [s for s in l.upserts(partition) if victim not in s.isr], "ISR shrink")[0]
        assert shrunk.leader == leader and sorted(shrunk.isr) == sorted([leader, controller])

        stack.start_broker(victim)
        back = h.log.wait(lambda l: l.upserts(f"broker:{victim}")[1:], "broker registered again")[0]
        assert back.broker_id == victim and back.port is not None
        h.log.wait(lambda l: victim in l.upserts(partition)[-1].isr, "ISR expand")
        isrs = [sorted(s.isr) for s in h.log.upserts(partition)]
        assert isrs[0] == isrs[-1] == sorted([leader, victim, controller])
        zxids = [e.zxid for e in h.log.of(partition)]
        assert zxids == sorted(zxids) and len(set(zxids)) == len(zxids)   # in order, no repeats


def test_leader_killed_then_preferred_election_restores_it(stack: LocalStack, topic_name: str) -> None:
    controller = stack.controller_id()
    preferred, second = others(stack, controller)
    create(stack, topic_name, [[preferred, second, controller]])
    with collecting(stack, stack) as h:
        partition = f"partition:{topic_name}:0"
        stack.kill_broker(preferred)
        moved = h.log.wait(lambda l: [s for s in l.upserts(partition) if s.leader != preferred], "new leader")[0]
        assert moved.leader in (second, controller) and moved.leader_epoch > h.log.upserts(partition)[0].leader_epoch
        stack.start_broker(preferred)
        h.log.wait(lambda l: preferred in l.upserts(partition)[-1].isr, "preferred replica back in the ISR")
        assert h.log.upserts(partition)[-1].leader != preferred   # auto rebalance is off in the test stack

        zk_create(stack, "/admin/preferred_replica_election",
                  {"version": 1, "partitions": [{"topic": topic_name, "partition": 0}]})
        elected = h.log.wait(lambda l: (s := l.upserts(partition)[-1]).leader == preferred and s, "preferred leader")
        assert elected.leader_epoch > moved.leader_epoch
        seen = h.log.of("preferred_election")
        if seen:   # the controller removes the request at once; if it was read, its removal is seen too
            assert seen[0].data.partitions == (f"{topic_name}:0",)
            h.log.wait(lambda l: l.ops("preferred_election") == ["upsert", "delete"], "request done")


def test_controller_failover_shows_new_id_and_epoch(stack: LocalStack) -> None:
    with collecting(stack, stack) as h:
        first = h.log.upserts("controller")[-1]
        stack.kill_broker(first.broker_id)
        new = h.log.wait(lambda l: [s for s in l.upserts("controller") if s.broker_id not in (-1, first.broker_id)],
                         "a new controller")[0]
        assert new.epoch > first.epoch and new.broker_id == stack.controller_id()
        zxids = [e.zxid for e in h.log.of("controller")]
        assert zxids == sorted(zxids)
        stack.start_broker(first.broker_id)


def test_reassignment_start_progress_done(stack: LocalStack, topic_name: str) -> None:
    controller = stack.controller_id()
    source, down = others(stack, controller)
    create(stack, topic_name, [[source], [source]])
    topic = f"topic:{topic_name}"
    with collecting(stack, stack) as h:
        stack.kill_broker(down)   # partition 1 moves there, so its move waits for the restart
        h.log.wait(lambda l: l.ops(f"broker:{down}")[-1:] == ["delete"], "broker down")
        plan = {"version": 1, "partitions": [{"topic": topic_name, "partition": 0, "replicas": [controller]},
                                             {"topic": topic_name, "partition": 1, "replicas": [down]}]}
        zk_create(stack, "/admin/reassign_partitions", plan)
        started = h.log.wait(lambda l: l.upserts("reassignment"), "reassignment started")[0]
        assert started.partitions[f"{topic_name}:1"] == (down,)
        h.log.wait(lambda l: l.upserts("reassignment")[-1].partitions == {f"{topic_name}:1": (down,)},
                   "partition 0 done, partition 1 still moving")
        moving = h.log.wait(lambda l: [t for t in l.upserts(topic) if t.adding.get(1) == (down,)], "adding replica")
        assert moving[0].removing.get(1) == (source,)

        stack.start_broker(down)
        h.log.wait(lambda l: l.ops("reassignment")[-1:] == ["delete"], "reassignment done")
        final = h.log.wait(lambda l: [t for t in l.upserts(topic) if t.replicas == {0: (controller,), 1: (down,)}
                                      and not t.adding and not t.removing], "final assignment")[0]
        assert final.topic == topic_name


class ZkProxy:
    """A TCP forwarder to ZooKeeper that the test can cut: the collector goes blind, Kafka does not."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.open = True
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        self.open = False
        for s in self.sockets:
            s.close()
        self.sockets.clear()

    def restore(self) -> None:
        self.open = True

    def close(self) -> None:
        self.cut()
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                s.close()


def test_resyncs_after_reconnect_and_expiry_show_what_was_deleted_meanwhile(stack: LocalStack,
                                                                            topic_name: str) -> None:
    assert stack.state
    create(stack, topic_name, [[1, 2, 3]])
    eventually(lambda: partition_state(stack, topic_name, 0), 30, "partition state")
    proxy = ZkProxy(stack.state.components["zookeeper"].port)
    try:
        with collecting(stack, stack, hosts=f"127.0.0.1:{proxy.port}", session_timeout_s=4) as h:
            published = {key: events[-1] for key, events in h.log.poll().by_key.items()}

            proxy.cut()    # shorter than the session timeout: same session, watches re-armed
            proxy.restore()
            _, repeated = h.log.snapshot("reconnect")
            assert repeated and all(e.op == "upsert" and e.zxid == published[e.message_key].zxid
                                    for e in repeated)

            proxy.cut()
            admin(stack, lambda a: a.delete_topics([topic_name]))
            eventually(lambda: topic_name not in zk_children(stack, "/brokers/topics"), 60, "topic deleted")
            time.sleep(2 * 4)   # not an assertion: let the server expire the blind collector's session
            proxy.restore()
            end, _ = h.log.snapshot("expired")
            expected = {f"topic:{topic_name}", f"partition:{topic_name}:0"}
            h.log.wait(lambda l: {e.entity for e in l.in_snapshot(end.data.snapshot_id) if e.op == "delete"}
                       == expected, "the deletions inside the snapshot")
            snapshot = h.log.in_snapshot(end.data.snapshot_id)
            assert all(e.zxid == published[e.message_key].zxid for e in snapshot if e.op == "upsert")
            assert h.metric("kmon_collector_resyncs_total", source="zk") == 3
            # the watches were re-armed on the new session: later changes still arrive
            create(stack, topic_name + "-after", [[1]])
            h.log.wait(lambda l: l.of(f"partition:{topic_name}-after:0"), "a change after the expiry")
    finally:
        proxy.close()


def test_malformed_znodes_are_counted_and_valid_data_later_emitted(stack: LocalStack, topic_name: str) -> None:
    create(stack, topic_name, [[1, 2]])
    config_path = f"/config/topics/{topic_name}"
    with stack.zk() as client:
        try:
            with collecting(stack, stack) as h:
                # brokers only read topic configs after a /config/changes notification: safe to garble
                client.set(config_path, b"{garbage")
                eventually(lambda: h.metric("kmon_collector_malformed_total", source="zk", kind="topic_config") == 1,
                           30, "malformed config counted")
                client.set(config_path, json.dumps({"version": 1, "config": {"retention.ms": "1234"}}).encode())
                state = h.log.wait(lambda l: [t for t in l.upserts(f"topic:{topic_name}") if t.config], "valid config")
                assert state[0].config == {"retention.ms": "1234"}
                assert h.log.of(f"topic:{topic_name}")[-1].znode.version_gap == 1   # the garbage version
                assert h.health()[0] == 200
        finally:   # a broker restarted later reads every topic config
            client.set(config_path, json.dumps({"version": 1, "config": {}}).encode())


def test_admin_znodes_in_a_tree_without_kafka(stack: LocalStack) -> None:
    """Garbage and requests in /admin of a chroot no broker reads: deterministic, and harmless to Kafka."""
    assert stack.state
    chroot = f"/synthetic-{uuid.uuid4().hex[:8]}"
    with stack.zk() as client:
        try:
            client.ensure_path(chroot + "/admin")
            config = ZkCollectorConfig(hosts=stack.state.zk_address, chroot=chroot, cluster=CLUSTER)
            topic = f"kmon-events-{uuid.uuid4().hex[:8]}"
            log = EventLog(stack.state.bootstrap_servers, topic)
            with run_zk(config, PublisherConfig(stack.state.bootstrap_servers, topic)) as run:
                h = Harness(run, log)
                log.snapshot("start")
                [controller] = log.upserts("controller")
                assert (controller.broker_id, controller.epoch) == (-1, None)   # no Kafka here

                client.create(chroot + "/admin/reassign_partitions", b"\xff not utf-8")
                eventually(lambda: h.metric("kmon_collector_malformed_total", source="zk", kind="reassignment") == 1,
                           30, "malformed reassignment counted")
                plan = {"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2]}]}
                client.set(chroot + "/admin/reassign_partitions", json.dumps(plan).encode())
                [event] = log.wait(lambda l: l.of("reassignment"), "valid reassignment after garbage")
                assert event.data.partitions == {"a:0": (1, 2)} and event.znode.version == 1
                client.delete(chroot + "/admin/reassign_partitions")
                log.wait(lambda l: l.ops("reassignment") == ["upsert", "delete"], "request removed")

                election = {"version": 1, "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 2}]}
                client.create(chroot + "/admin/preferred_replica_election", json.dumps(election).encode())
                [event] = log.wait(lambda l: l.of("preferred_election"), "preferred election request")
                assert event.data.partitions == ("a:0", "b:2")
                client.delete(chroot + "/admin/preferred_replica_election")
                log.wait(lambda l: l.ops("preferred_election") == ["upsert", "delete"], "request done")

                client.create(chroot + "/controller_epoch", b"seven")
                eventually(lambda: h.metric("kmon_collector_malformed_total", source="zk",
                                            kind="controller_epoch") == 1, 30, "malformed epoch counted")
                client.set(chroot + "/controller_epoch", b"7")
                log.wait(lambda l: l.upserts("controller")[-1].epoch == 7, "valid epoch")
                assert h.health()[0] == 200
            log.close()
        finally:
            client.delete(chroot, recursive=True)


def test_chroot_cluster_is_watched_below_its_chroot(small_stack: LocalStack, stack: LocalStack,
                                                    topic_name: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kmon.collector")
    with collecting(small_stack, stack) as h:
        assert h.log.upserts("broker:1")[0].broker_id == 1
        eventually(lambda: "not the monitored cluster" in caplog.text, 30, "events cluster told apart")
        assert h.metric("kmon_collector_events_on_monitored_cluster") == 0
        assert h.log.of("controller")[0].znode.path.startswith("/kafka/")
        create(small_stack, topic_name, [[1]])
        [event] = h.log.wait(lambda l: l.of(f"partition:{topic_name}:0"), "partition of the new topic")
        assert event.znode.path == f"/kafka/brokers/topics/{topic_name}/partitions/0/state"
        assert event.data.leader == 1


def test_events_cluster_down_buffers_drops_oldest_and_resyncs_when_back(small_stack: LocalStack, stack: LocalStack,
                                                                        topic_name: str) -> None:
    with collecting(stack, small_stack, buffer_size=5, max_in_flight=2, unhealthy_after_s=1) as h:
        eventually(lambda: h.metric("kmon_collector_buffered_events") == 0, 30, "start snapshot delivered")
        small_stack.kill_broker(1)
        create(stack, topic_name, [[1], [2], [3]] * 4)   # 13 events while the events cluster is down
        eventually(lambda: h.metric("kmon_collector_dropped_events_total") > 0, 60, "oldest events dropped")
        assert h.metric("kmon_collector_buffered_events") == 5 + 2
        status, body = eventually(lambda: (r := h.health())[0] == 503 and r, 30, "unhealthy while undelivered")
        assert "events not delivered" in body
        assert h.run.collector.health() is None   # the ZooKeeper side is fine

        small_stack.start_broker(1)
        # the resync re-sends the whole shared stack's tree (every earlier test's topics) through an
        # in-flight window of 2 events, after the producer's reconnect backoff (up to 10 s)
        _, snapshot = h.log.snapshot("buffer_overflow", timeout=240)
        assert {f"partition:{topic_name}:{p}" for p in range(12)} <= {e.entity for e in snapshot}
        eventually(lambda: h.metric("kmon_collector_buffered_events") == 0, 60, "buffer drained")
        assert h.metric("kmon_collector_producer_errors_total") > 0
        eventually(lambda: h.health()[0] == 200, 30, "healthy again")


def test_cli_collects_until_sigterm(stack: LocalStack, tmp_path: Path) -> None:
    assert stack.state
    topic = f"kmon-events-{uuid.uuid4().hex[:8]}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "KMON_ZOOKEEPER": stack.state.zk_connect, "KMON_CLUSTER": CLUSTER,
           "KMON_EVENTS_BOOTSTRAP_SERVERS": stack.state.bootstrap_servers}
    log_file = tmp_path / "collector.log"
    with log_file.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "collect", "zk", "--events-topic", topic,
                                 "--metrics-port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT)
    log = EventLog(stack.state.bootstrap_servers, topic)
    try:
        log.snapshot("start")
        assert eventually(lambda: http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 30, "healthy")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        text = log_file.read_text()
        assert "snapshot (start):" in text and "received SIGTERM" in text and "stopped" in text
    finally:
        log.close()
        if proc.poll() is None:
            proc.kill()


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def test_cli_starts_the_collector_again_when_an_abort_kills_it(stack: LocalStack, tmp_path: Path) -> None:
    """librdkafka can abort the process on an internal assertion (seen in CI): the command's
    child is started again and the cluster is watched again; SIGTERM still ends it with 0."""
    assert stack.state
    port = free_port()
    log_file = tmp_path / "collector.log"
    with log_file.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "collect", "zk", "--zookeeper", stack.state.zk_connect,
                                 "--cluster", CLUSTER, "--events-bootstrap-servers", stack.state.bootstrap_servers,
                                 "--events-topic", f"kmon-events-{uuid.uuid4().hex[:8]}", "--metrics-port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        eventually(lambda: http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
                   and "snapshot (start):" in log_file.read_text(), 60, "healthy, its start snapshot out")
        [first] = _children(proc.pid)
        os.kill(first, signal.SIGABRT)
        eventually(lambda: _children(proc.pid) not in ([], [first])
                   and http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 60, "a new collector, healthy")
        [second] = _children(proc.pid)
        # healthy comes before the new collector's start snapshot is out
        eventually(lambda: log_file.read_text().count("snapshot (start):") == 2, 60, "a new start snapshot")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        eventually(lambda: not Path(f"/proc/{second}").exists(), 10, "the collector stopped with the command")
        text = log_file.read_text()
        assert f"the collector process (pid {first}) died of SIGABRT" in text
        # faulthandler: where each thread of the dead child was, for a native crash's report
        assert "Fatal Python error: Aborted" in text and "File " in text
        assert "received SIGTERM" in text
    finally:
        if proc.poll() is None:
            proc.kill()
