"""Issue 2: the local stack is a real cluster whose failures show up in ZooKeeper."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Producer

from stack.local import LocalStack

from stack.state import StackError, StackRequest
from tests.conftest import running_stack
from tests.support import assigned_replicas, create_topic, eventually, partition_state

pytestmark = pytest.mark.integration


@pytest.fixture(params=["plain", "chroot"])
def any_stack(request, stack, chroot_stack) -> Iterator[LocalStack]:
    chosen = stack if request.param == "plain" else chroot_stack
    yield chosen
    chosen.restart_stopped()


def test_brokers_register_and_rf3_topic_is_created(any_stack: LocalStack) -> None:
    assert any_stack.registered_brokers() == [1, 2, 3]
    create_topic(any_stack, "rf3", partitions=3, rf=3)
    for p in range(3):
        assert sorted(assigned_replicas(any_stack, "rf3", p)) == [1, 2, 3]
        assert sorted(partition_state(any_stack, "rf3", p)["isr"]) == [1, 2, 3]


def test_chroot_holds_the_kafka_tree(chroot_stack: LocalStack) -> None:
    assert chroot_stack.state
    from kazoo.client import KazooClient
    root = KazooClient(hosts=chroot_stack.state.zk_address)
    root.start(timeout=15)
    try:
        assert root.exists("/kafka/controller") and root.exists("/kafka/brokers/ids/1")
        assert not root.exists("/controller") and not root.exists("/brokers")
    finally:
        root.stop(); root.close()


def test_killed_follower_leaves_isr_and_returns_after_restart(any_stack: LocalStack) -> None:
    topic = "follower-kill"
    create_topic(any_stack, topic, partitions=1, rf=3)
    state = partition_state(any_stack, topic, 0)
    controller = any_stack.controller_id()
    # a follower that is not the controller, so only the ISR changes
    victim = next(b for b in state["isr"] if b != state["leader"] and b != controller)
    any_stack.kill_broker(victim)
    eventually(lambda: victim not in partition_state(any_stack, topic, 0)["isr"], 60,
               f"broker {victim} out of the ISR")
    # the replica-lag check may shrink the ISR before the dead broker's session expires
    eventually(lambda: victim not in any_stack.registered_brokers(), 60, f"broker {victim} deregistered")
    any_stack.start_broker(victim)
    eventually(lambda: victim in partition_state(any_stack, topic, 0)["isr"], 90,
               f"broker {victim} back in the ISR")


def test_killed_controller_is_replaced_with_a_higher_epoch(any_stack: LocalStack) -> None:
    before, epoch = any_stack.controller_id(), any_stack.controller_epoch()
    any_stack.kill_broker(before)
    new = eventually(lambda: (c := any_stack.controller_id()) not in (-1, before) and c, 60, "new controller")
    assert new in any_stack.broker_ids()
    assert any_stack.controller_epoch() > epoch
    any_stack.start_broker(before)


def test_second_up_on_a_running_stack_says_so(stack: LocalStack) -> None:
    with pytest.raises(StackError, match="already running"):
        LocalStack(Path(stack.dir), stack.tools).up(StackRequest(brokers=3, fast=True, prometheus=False))


def test_cli_status_reports_processes_and_registered_brokers(stack: LocalStack) -> None:
    out = subprocess.run([sys.executable, "-m", "cli", "stack", "status", "--dir", str(stack.dir)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "registered brokers: [1, 2, 3]" in out.stdout
    for name in ("zookeeper", "broker-1", "broker-2", "broker-3"):
        assert f"{name}" in out.stdout
    assert "STOPPED" not in out.stdout


def test_events_cluster_outlives_the_monitored_cluster_and_down_stops_only_what_up_started(
        tmp_path: Path, toolchain) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        with running_stack(tmp_path / "s", toolchain, brokers=1, events_cluster=True) as stack:
            assert stack.state
            events = stack.state.events_bootstrap_servers
            assert events != stack.state.bootstrap_servers
            out = subprocess.run([sys.executable, "-m", "cli", "stack", "status", "--dir", str(stack.dir)],
                                 capture_output=True, text=True, timeout=60)
            assert f"events cluster (kmon's own: one KRaft node)\n    bootstrap        {events}" in out.stdout
            # the whole monitored cluster dies; kmon's events cluster still takes events
            stack.kill_broker(1)
            stack.kill("zookeeper")
            producer = Producer({"bootstrap.servers": events, "acks": "all"})
            producer.produce("outlives", b"still here")
            assert producer.flush(30) == 0
            pids = [c.pid for c in stack.state.components.values()]
            stopped = stack.down(timeout=10)
        assert stopped == ["events"]   # the others were dead already
        from stack.process import pid_alive
        assert not any(pid_alive(p) for p in pids)
        assert bystander.poll() is None
    finally:
        bystander.kill()
