"""Issue 5: the Spark app on a real Kafka, fed with schema events, read back over /metrics."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator

import pytest

from kmon.codec import encode
from kmon.events import BrokerState, ControllerState, Event, PartitionState, TopicState
from stack.local import LocalStack
from stack.process import free_port
from streaming.app import StreamApp
from streaming.cluster_share import ClusterShare
from streaming.config import StreamConfig
from streaming.checkpoint_lock import JVM_LOCK_FILE
from tests import support
from tests.support import Events, eventually, metrics

pytestmark = pytest.mark.integration
CLUSTER = "itest"
OTHER = "other"   # in the other share of two: crc32("itest") is odd, crc32("other") even
value = partial(support.value, cluster=CLUSTER)


@pytest.fixture
def app_factory(stack: LocalStack, tmp_path: Path) -> Iterator:
    apps: list[StreamApp] = []
    assert stack.state

    def start(topic: str, share: ClusterShare = ClusterShare()) -> StreamApp:
        app = StreamApp(StreamConfig(bootstrap_servers=stack.state.bootstrap_servers, events_topic=topic,
                                     cluster_share=share,
                                     checkpoint=tmp_path / "checkpoint", metrics_host="127.0.0.1",
                                     metrics_port=0, master="local[2]", trigger_seconds=0.5,
                                     shuffle_partitions=2, spark_jars=tuple(stack.tools.spark_jar_list())))
        apps.append(app)
        app.start()
        return app

    yield start
    for app in apps:
        app.stop()


def test_views_follow_events_and_survive_replays_restarts_and_garbage(stack: LocalStack, app_factory) -> None:
    topic = "kmon-events-stream-test"
    ev = Events(stack, topic, CLUSTER)
    ev.send("controller", "controller", ControllerState(1, 5))
    for b in (1, 2, 3):
        ev.send("broker", f"broker:{b}", BrokerState(b, "127.0.0.1", 9000 + b, None))
    ev.send("topic", "topic:orders", TopicState("orders", None, {0: (1, 2, 3), 1: (2, 3, 1)},
                                                config={"min.insync.replicas": "2"}))
    ev.partition(0, 1, (1, 2, 3), 0)
    ev.partition(1, 2, (2, 3, 1), 0)
    # a second cluster on the same topic, which the restart below leaves to another app of a fleet
    other = Events(stack, topic, OTHER)
    other.send("controller", "controller", ControllerState(7, 1))

    app = app_factory(topic)
    port = app.metrics_port
    eventually(lambda: value(port, "kmon_partitions", topic="orders") == 2, 120, "partitions exported")
    eventually(lambda: support.value(port, "kmon_controller_id", cluster=OTHER) == 7, 60, "the other cluster")
    # the checkpoint is held by Spark's JVM itself, which may outlive this process (checkpoint_lock.py)
    jvm_lock = app.cfg.checkpoint / JVM_LOCK_FILE
    holder = int(jvm_lock.read_text())
    assert holder != os.getpid() and "java" in Path(f"/proc/{holder}/cmdline").read_text()
    with open(jvm_lock, "r+b") as f:
        with pytest.raises(OSError):
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert value(port, "kmon_controller_id") == 1
    assert value(port, "kmon_brokers") == 3
    assert value(port, "kmon_under_replicated_partitions", topic="orders") == 0

    # broker 3 dies: it leaves both ISRs; partition 1's leader moves from 2 to 3? no: 2 stays leader
    ev.send("broker", "broker:3", None, op="delete")
    ev.partition(0, 1, (1, 2), 0)
    ev.partition(1, 2, (2, 1), 0)
    eventually(lambda: value(port, "kmon_under_replicated_partitions", topic="orders") == 2, 60, "URP")
    assert value(port, "kmon_isr_shrinks_total", topic="orders", broker="3") == 2
    assert value(port, "kmon_broker_up", broker="3") == 0
    assert value(port, "kmon_at_min_isr_partitions", topic="orders") == 2

    # the same changes replayed (a collector resync re-reading the same znodes): nothing counts twice
    zxid = ev.zxid
    ev.partition(0, 1, (1, 2), 0, zxid=zxid - 1)
    ev.partition(1, 2, (2, 1), 0, zxid=zxid)
    # garbage on the topic: counted, skipped, the query keeps running; and the right shape with the
    # wrong types (broker ids as strings): rejected at decode, so the partition keeps its last good
    # state and every /metrics request is still served
    hostile = json.loads(encode(Event(cluster=CLUSTER, source="zk", kind="partition", entity="partition:orders:0",
                                      op="upsert", observed_ms=1, data=PartitionState("orders", 0, 1, 9, (1,), 1),
                                      zxid=10**6)))
    hostile["data"]["isr"] = ["1", "x"]
    ev.raw(f"{CLUSTER}/partition:orders:0".encode(), json.dumps(hostile).encode())
    ev.raw(b"itest/partition:orders:0", b"{not json")
    ev.raw(None, b"\x00\x01garbage")
    eventually(lambda: (value(port, "kmon_malformed_total", source="unknown") or 0) >= 2, 60, "malformed counted")
    assert [v for (name, labels), v in metrics(port).items()
            if name == "kmon_partition_isr_size" and ("partition", "0") in labels] == [2.0]
    # a leader election after the garbage still applies
    ev.partition(1, 1, (1,), 1)
    eventually(lambda: value(port, "kmon_leader_elections_total", topic="orders") == 1, 60, "election")
    assert value(port, "kmon_isr_shrinks_total", topic="orders", broker="3") == 2
    assert value(port, "kmon_isr_shrinks_total", topic="orders", broker="2") == 1
    assert app.failure() is None
    before = {k: v for k, v in metrics(port).items() if k[0].startswith("kmon_") and "stream" not in k[0]
              and not k[0].startswith(("kmon_events", "kmon_malformed", "kmon_last_event", "kmon_event_delay",
                                           "kmon_history"))   # per process, as Prometheus counters are
              and not k[0].endswith("_created")}
    app.stop()
    # "stopped" means Spark's JVM is gone too (a service manager or a user finds nothing of it left),
    # and with it its hold on the checkpoint; the next app in this process launches a JVM of its own
    assert not Path(f"/proc/{holder}").exists()
    with open(jvm_lock, "r+b") as f:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)

    # restart from the checkpoint, now taking only this cluster's share of a fleet split in two (the
    # other cluster's share is 0/2): this cluster's values as before any new event arrives, the other
    # cluster's gone from the restored views, and its later events left to the other share's app
    assert [ClusterShare(i, 2).takes(c) for c in (CLUSTER, OTHER) for i in (0, 1)] == [False, True, True, False]
    before = {k: v for k, v in before.items() if ("cluster", OTHER) not in k[1]}
    app2 = app_factory(topic, ClusterShare(1, 2))
    port2 = app2.metrics_port
    eventually(lambda: value(port2, "kmon_partitions", topic="orders") == 2, 120, "restored views")
    after = {k: v for k, v in metrics(port2).items() if k in before}
    assert after == before
    other.send("controller", "controller", ControllerState(8, 2))
    ev.partition(1, 2, (1, 2), 2)  # broker 2 back in, and leader again
    eventually(lambda: value(port2, "kmon_leader_elections_total", topic="orders") == 2, 60, "second election")
    assert not [k for k in metrics(port2) if ("cluster", OTHER) in k[1]]
    assert value(port2, "kmon_isr_expands_total", topic="orders", broker="2") == 1
    assert value(port2, "kmon_isr_shrinks_total", topic="orders", broker="3") == 2


def stream_process(stack: LocalStack, tmp_path: Path, topic: str, port: int, *flags: str
                   ) -> tuple[subprocess.Popen, Path]:
    """``kmon stream`` on ``topic`` as its own process group (as a service manager runs it),
    with its log file."""
    assert stack.state
    log = tmp_path / "stream.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "stream", "--bootstrap-servers", stack.state.bootstrap_servers,
             "--events-topic", topic, "--checkpoint", str(tmp_path / "checkpoint"), "--metrics-host", "127.0.0.1",
             "--metrics-port", str(port), "--master", "local[1]", *flags],
            stdout=subprocess.DEVNULL, stderr=out, start_new_session=True)
    return proc, log


def kill(pids: Iterable[int], group: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def test_sigterm_to_the_whole_process_group_stops_cleanly(stack: LocalStack, tmp_path: Path) -> None:
    """Issue 13: systemd's default KillMode=control-group, `timeout` and Kubernetes signal every
    process of the service, so Spark's JVM gets SIGTERM with kmon stream and may be gone before
    the app stops it: still exit 0 within seconds, no traceback. Here while its first micro-batch
    (a backlog of 100k events, garbage to kmon) runs: the JVM's context stops under the batch, which
    once printed a stack trace per broken call and could hang the stop for minutes."""
    from confluent_kafka import Producer

    assert stack.state
    topic = "itest-group-sigterm"
    producer = Producer({"bootstrap.servers": stack.state.bootstrap_servers, "linger.ms": 50})
    for i in range(100_000):
        producer.produce(topic, key=b"broker:%d" % (i % 500), value=b"not an event %d" % i)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    proc, log = stream_process(stack, tmp_path, topic, free_port())
    try:
        eventually(lambda: f"streaming {topic} from" in log.read_text(), 180, "the query running")
        time.sleep(3)   # into the first micro-batch (tens of seconds for the backlog)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        kill([], proc.pid)
        proc.wait()
    text = log.read_text()
    assert "received SIGTERM" in text and "stream stopped" in text
    assert "Traceback" not in text, text[-3000:]


def test_a_batch_stuck_in_a_stopped_python_worker_ends_the_app_after_the_stall_timeout(
        stack: LocalStack, tmp_path: Path) -> None:
    """A Python worker that stops (SIGSTOP here; a frozen cgroup, a hung socket) holds its task,
    and nothing in Spark times out: the views froze for good. kmon stream exits 1 once a batch
    has run --stall-timeout seconds, for the service manager to start it again."""
    topic, port = "itest-stall", free_port()
    ev = Events(stack, topic, CLUSTER)
    proc, log = stream_process(stack, tmp_path, topic, port, "--stall-timeout", "30")   # 30: a loaded machine's first batch took 16 s

    def parent(pid: int) -> int:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))

    def workers() -> list[int]:
        """The Python worker daemon of this app and the workers it forked (their own process
        group: pyspark's daemon makes one)."""
        found = []
        for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
            try:
                if b"-m\0streaming.pydaemon" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                    continue   # not the JVM either, which names the module in its settings
                ancestor = pid
                while ancestor > 1 and ancestor != proc.pid:
                    ancestor = parent(ancestor)
            except (OSError, StopIteration):
                continue
            if ancestor == proc.pid:
                found.append(pid)
        return found

    stopped: list[int] = []
    try:
        ev.send("controller", "controller", ControllerState(1, 5))
        try:
            eventually(lambda: value(port, "kmon_controller_id") == 1, 180, "the first batch through the workers")
        except AssertionError as e:
            raise AssertionError(f"{e}; kmon stream {'runs' if proc.poll() is None else f'exited {proc.returncode}'}"
                                 f", its log:\n{log.read_text()[-4000:]}") from None
        stopped += workers()
        assert stopped, "no Python worker found"
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        ev.send("controller", "controller", ControllerState(2, 6))
        assert proc.wait(timeout=180) == 1
    finally:
        kill(workers() + stopped, proc.pid)   # stopped: they would not see that the JVM is gone
        proc.wait()
    text = log.read_text()
    assert "a micro-batch has run for" in text and "--stall-timeout 30 s" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
