"""The consumer-group collector against real brokers and real consumers.

Kafka is real; the collector runs in the test's process, its output captured (an in-memory EventSink),
but where brokers die: there `kmon collect groups` runs as a user runs it.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from collectors.groups.collector import GroupsCollector, GroupsConfig, NameFilter
from collectors.telemetry import Telemetry
from kmon.events import Event, GroupState
from stack.local import LocalStack
from stack.process import free_port
from tests.support import create_topic, events_on, eventually, leave_group, partition_state, value
from tests.unit.fakes import ListSink

pytestmark = pytest.mark.integration


class Recorder(ListSink):
    """Every event kept, read by group."""

    def of_group(self, group: str) -> list[Event]:
        return [e for e in self.taken() if e.entity == f"group:{group}"]

    def states(self, group: str, origin: str) -> list[GroupState]:
        return [e.data for e in self.of_group(group) if e.op == "upsert" and e.data.origin == origin]


class Member:
    """A real consumer polling in its own thread; the test can pause its polling."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, **conf: Any) -> None:
        self.name = name
        self.polling = threading.Event()
        self.polling.set()
        self._done = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000, **conf})
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._done.is_set():
                if self.polling.is_set():
                    self._consumer.poll(0.2)
                else:
                    self._done.wait(0.2)
        finally:
            leave_group(self._consumer)

    def close(self) -> None:
        self._done.set()
        self._thread.join(30)


class Scenario:
    """One test's topic, group, consumers and collector on the shared stack; all closed after."""

    def __init__(self, stack: LocalStack) -> None:
        assert stack.state
        self.stack = stack
        self.bootstrap = stack.state.bootstrap_servers
        suffix = uuid.uuid4().hex[:8]
        self.topic, self.group = f"topic-{suffix}", f"group-{suffix}"
        self.recorder = Recorder()
        self.members: dict[str, Member] = {}
        self._collectors: list[GroupsCollector] = []

    def create_topic(self, partitions: int) -> None:
        create_topic(self.stack, self.topic, partitions=partitions)

    def collect(self, **settings: Any) -> None:
        """Start a collector of this scenario's group."""
        config = GroupsConfig(bootstrap_servers=self.bootstrap, cluster="test",
                              groups=NameFilter(include=self.group), **settings)
        self._collectors.append(GroupsCollector(config, self.recorder, Telemetry("test")))
        self._collectors[-1].start()
        if config.read_offsets_topic:  # the history read first, so each new generation is live
            eventually(self._collectors[-1].caught_up, 60, "__consumer_offsets read to its end")

    def join(self, name: str, **conf: Any) -> None:
        self.members[name] = Member(self.bootstrap, self.group, self.topic, name, **conf)

    def leave(self, name: str) -> None:
        self.members.pop(name).close()

    @property
    def collectors(self) -> list[GroupsCollector]:
        return self._collectors

    def states(self, origin: str) -> list[GroupState]:
        return self.recorder.states(self.group, origin)

    def generation(self, expected: set[str], what: str, after: GroupState | None = None) -> GroupState:
        """The first generation (newer than `after`) whose members are `expected`."""
        newer = -1 if after is None else after.generation
        return eventually(lambda: next((s for s in self.states("offsets")
                                        if s.generation > newer and clients(s) == expected), None), 60, what)

    def generations(self) -> list[GroupState]:
        """The generations recorded from __consumer_offsets, checked: each once, in order."""
        states = [s for s in self.states("offsets") if s.members]
        numbers = [s.generation for s in states]
        assert numbers == sorted(set(numbers)), f"generations repeated or out of order: {numbers}"
        return states

    def close(self) -> None:
        for member in self.members.values():
            member.close()
        for collector in self._collectors:
            collector.stop()


@pytest.fixture
def scenario(stack: LocalStack) -> Iterator[Scenario]:
    s = Scenario(stack)
    try:
        yield s
    finally:
        s.close()


def clients(state: GroupState) -> set[str]:
    return {m.client_id for m in state.members}


def test_members_join_and_leave_each_generation_once(scenario: Scenario) -> None:
    scenario.create_topic(6)
    scenario.collect(poll_interval_s=1, lag_interval_s=5)
    for name in ("a", "b", "c"):
        scenario.join(name)
    first = scenario.generation({"a", "b", "c"}, "a generation of a, b, c")
    assert first.state == "Stable" and first.generation >= 1
    assert first.protocol == "range" and first.protocol_type == "consumer"
    assert first.leader in {m.member_id for m in first.members}
    assert sorted(p for m in first.members for p in m.assignment) == sorted(
        f"{scenario.topic}:{p}" for p in range(6))

    scenario.join("d")
    with_d = scenario.generation({"a", "b", "c", "d"}, "a generation with d", first)
    scenario.leave("b")
    scenario.generation({"a", "c", "d"}, "a generation without b", with_d)

    after = [clients(s) for s in scenario.generations() if s.generation > first.generation]
    assert after == [{"a", "b", "c", "d"}, {"a", "c", "d"}]
    eventually(lambda: any(s.state == "Stable" and clients(s) == {"a", "c", "d"}
                           for s in scenario.states("admin")), 30, "admin poll sees the new members")


def test_member_that_stops_polling_is_rebalanced_out(scenario: Scenario) -> None:
    scenario.create_topic(4)
    scenario.collect(poll_interval_s=0.3, lag_interval_s=30)
    slow = {"max.poll.interval.ms": 6000}
    scenario.join("a", **slow)
    scenario.join("b", **slow)
    before = scenario.generation({"a", "b"}, "a generation of a, b")

    scenario.members["b"].polling.clear()
    scenario.join("c", **slow)  # a rebalance that b holds up until it is evicted
    eventually(lambda: any(s.state == "PreparingRebalance" for s in scenario.states("admin")),
               60, "PreparingRebalance seen by the admin poll")
    scenario.generation({"a", "c"}, "a generation without the stalled member", before)
    scenario.generations()


def test_rebalances_faster_than_the_poll_interval_are_each_seen(scenario: Scenario) -> None:
    scenario.create_topic(2)
    scenario.collect(poll_interval_s=30, lag_interval_s=30)
    steps = [("join", "a", {"a"}), ("join", "b", {"a", "b"}), ("leave", "b", {"a"}), ("join", "c", {"a", "c"})]
    latest = None
    for action, name, expected in steps:
        if action == "join":
            scenario.join(name)
        else:
            scenario.leave(name)
        latest = scenario.generation(expected, f"after {action} {name}", latest)
    states = scenario.generations()
    assert [clients(s) for s in states] == [expected for _, _, expected in steps]
    # the Admin API poll saw fewer of them (it may not have run since the group appeared)
    assert len(scenario.states("admin")) < len(states)


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit these offsets as `group` (lag depends only on what is committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], timestamp_ms: int = 0) -> None:
    """``timestamp_ms``: the records' CreateTime (0: now)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=str(i).encode(), partition=partition, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def test_lag_in_messages_and_seconds_then_group_deleted(scenario: Scenario) -> None:
    """Lag in seconds is the age of the oldest unread record, read from the topic: partition 0's records
    were written (CreateTime) an hour before kmon started, which no end-offset sample can know."""
    bootstrap, topic, group = scenario.bootstrap, scenario.topic, scenario.group
    scenario.create_topic(2)
    hour_ago = time.time() - 3600
    produce(bootstrap, topic, {0: 60}, timestamp_ms=int(hour_ago * 1000))
    produce(bootstrap, topic, {1: 40})
    commit(bootstrap, group, topic, {0: 20, 1: 10})
    scenario.collect(poll_interval_s=0.5, lag_interval_s=1)

    def lag() -> Any:
        states = [s for s in scenario.states("admin") if topic in s.lag]
        return states[-1].lag[topic] if states else None

    first = eventually(lag, 30, "a lag event")
    assert (first.lag, dict(first.partitions)) == (70, {0: 40, 1: 30})
    unknown = scenario.collectors[-1].telemetry.registry.get_sample_value(
        "kmon_collector_end_offsets_unknown", {"cluster": "test"})
    assert unknown == 0
    assert first.lag_seconds_method == "record"
    assert first.retention_ms == 24 * 3600 * 1000   # the stack's brokers keep a day (log.retention.hours)
    assert abs(first.lag_seconds - (time.time() - hour_ago)) < 10, first
    grown = eventually(lambda: (x := lag()) and x.lag_seconds > first.lag_seconds + 1 and x, 30,
                       "lag seconds growing while the group is stopped")
    assert grown.lag == 70

    commit(bootstrap, group, topic, {0: 60, 1: 40})
    caught_up = eventually(lambda: (x := lag()) and x.lag == 0 and x, 30, "lag back to 0")
    assert caught_up.lag_seconds == 0.0

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups([group], request_timeout=30)[group].result(30)
    eventually(lambda: any(e.op == "delete" for e in scenario.recorder.of_group(group)), 30, "a delete event")


def test_lag_follows_the_end_offset_after_the_leader_moved_twice(scenario: Scenario, tmp_path: Path) -> None:
    """The admin client's cached leader epochs went stale when a leader moved: list_offsets was
    answered FENCED_LEADER_EPOCH at every poll and the partition's lag stayed at its old value
    or went missing. Each poll now looks the leaders up afresh (GroupsConfig.admin_client).
    `kmon collect groups` itself runs here, as a user runs it: librdkafka aborted the process now
    and then while the leaders died (the suite's xdist worker, 2026-11-29), which the command's
    supervisor survives (cli/supervise.py)."""
    bootstrap, topic, group = scenario.bootstrap, scenario.topic, scenario.group
    scenario.create_topic(1)
    produce(bootstrap, topic, {0: 10})
    commit(bootstrap, group, topic, {0: 4})
    events, port = f"kmon-events-{uuid.uuid4().hex[:8]}", free_port()
    with (tmp_path / "collector.log").open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "collect", "groups", "--bootstrap-servers", bootstrap,
                                 "--cluster", "test", "--include-groups", group, "--events-bootstrap-servers", bootstrap,
                                 "--events-topic", events,
                                 "--metrics-port", str(port), "--poll-interval", "0.5", "--lag-interval", "1"],
                                stdout=out, stderr=subprocess.STDOUT)

    def lag() -> int | None:
        states = [e.data for e in events_on(bootstrap, events) if e.entity == f"group:{group}" and e.op == "upsert"
                  and e.data.origin == "admin" and topic in e.data.lag]
        return states[-1].lag[topic].lag if states else None

    try:
        eventually(lambda: lag() == 6, 60, "the lag before the leader moves")
        for _ in range(2):
            leader = partition_state(scenario.stack, topic, 0)["leader"]
            scenario.stack.kill_broker(leader)
            eventually(lambda: partition_state(scenario.stack, topic, 0)["leader"] not in (-1, leader), 30,
                       "a new leader")
            scenario.stack.start_broker(leader)
            eventually(lambda: len(partition_state(scenario.stack, topic, 0)["isr"]) == 3, 60, "the ISR full again")
        produce(bootstrap, topic, {0: 5})
        eventually(lambda: lag() == 11, 30, "the lag of the messages produced after the moves")
        eventually(lambda: value(port, "kmon_collector_end_offsets_unknown", "test") == 0, 10,
                   "every end offset known")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in (tmp_path / "collector.log").read_text()
