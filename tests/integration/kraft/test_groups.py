"""Kafka 4's group protocols on the real KRaft cluster, end to end: consumers of the consumer
rebalance protocol (KIP-848) joining, leaving, fenced and held mid-reconcile, a share group (KIP-932,
Kafka's console share consumer) and a Kafka Streams application (KIP-1071, Kafka's WordCountDemo).
The reference is what the group coordinator wrote: its __consumer_offsets records, read here and
decoded with kmon's decoder, and DescribeGroups as Kafka's tools ask it."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from collectors.groups.codec.offsets_codec import ConsumerGroupMetadata, decode_record
from collectors.kafka_encoding import MalformedRecord
from stack.local import LocalStack
from tests.integration.kraft.conftest import CLUSTER
from tests.support import create_topic, eventually, history_rows, value

pytestmark = pytest.mark.integration


def v(stack: LocalStack, name: str, group: str, **labels: str) -> float | None:
    assert stack.state
    return value(stack.state.stream_port, name, CLUSTER, group=group, **labels)


class Member(threading.Thread):
    """A consumer of the consumer rebalance protocol that polls until it leaves; asked to give up
    partitions, it holds them ``hold_s`` seconds first (a slow revocation: its group reconciles)."""

    def __init__(self, stack: LocalStack, group: str, topic: str, name: str, hold_s: float = 0.0) -> None:
        super().__init__(daemon=True, name=name)
        assert stack.state
        self.hold_s = hold_s
        self.revoked: list[float] = []   # when it was asked to give partitions up (monotonic)
        self.holding = threading.Event()   # it has been given partitions
        self.released = threading.Event()
        self._leaving = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": stack.state.bootstrap_servers, "group.id": group,
                                   "group.protocol": "consumer", "client.id": name, "auto.offset.reset": "earliest"})
        self._consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.start()

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self.holding.set()

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self.revoked.append(time.monotonic())
        if partitions and self.hold_s:
            self._leaving.wait(self.hold_s)
            self.released.set()

    def run(self) -> None:
        while not self._leaving.is_set():
            self._consumer.poll(0.2)
        self._consumer.close()   # leaves the group

    def leave(self) -> None:
        self._leaving.set()
        self.join(30)


@pytest.fixture
def member(mon: LocalStack) -> Iterator[Callable[..., Member]]:
    """Makes members of the consumer protocol; each leaves after the test, whatever happened."""
    made: list[Member] = []

    def make(group: str, topic: str, name: str, hold_s: float = 0.0) -> Member:
        made.append(Member(mon, group, topic, name, hold_s))
        return made[-1]
    yield make
    for m in made:
        m.leave()


def group_epochs(stack: LocalStack, group: str) -> list[int]:
    """The group epochs the coordinator wrote for ``group`` (ConsumerGroupMetadata records), in order."""
    assert stack.state
    reader = Consumer({"bootstrap.servers": stack.state.bootstrap_servers, "group.id": "kmon-test-records",
                       "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = reader.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
        reader.assign([TopicPartition("__consumer_offsets", p, OFFSET_BEGINNING) for p in partitions])
        epochs, ended = [], set()
        while len(ended) < len(partitions):
            for message in reader.consume(500, timeout=5):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        ended.add(message.partition())
                    continue
                try:
                    record = decode_record(message.key(), message.value())
                except MalformedRecord:
                    continue
                if isinstance(record, ConsumerGroupMetadata) and record.group == group:
                    epochs.append(record.epoch)
        return epochs
    finally:
        reader.close()


def rebalance_rows(stack: LocalStack, group: str) -> list:
    return [t for t in history_rows(stack, CLUSTER) if t.group == group and t.kind == "rebalance"]


def java(stack: LocalStack, name: str, main: str, *args: str) -> subprocess.Popen:
    """One of Kafka's Java programs on the cluster's jars, logging to the stack's logs."""
    log = (stack.dir / "logs" / f"{name}.log").open("w")
    return subprocess.Popen([stack.tools.java, "-Xmx256m", f"-Dlog4j2.configurationFile={stack.dir / 'log4j2.properties'}",
                             "-cp", stack.tools.kafka4_classpath, main, *args], stdout=log, stderr=subprocess.STDOUT)


def records_behind_are_timed_then_lost(stack: LocalStack, group: str, group_type: str, topic: str) -> None:
    """An empty group of any committing protocol set 5 records into 30 written an hour ago (an admin's
    offset commit, as kafka-consumer-groups' reset does): its lag in seconds is read from the record at
    its committed offset, then DeleteRecords to 20 loses 15 records it had not read."""
    assert stack.state
    create_topic(stack, topic, partitions=1, rf=3)
    producer = Producer({"bootstrap.servers": stack.state.bootstrap_servers})
    hour_ago_ms = int((time.time() - 3600) * 1000)
    for i in range(30):
        producer.produce(topic, value=b"r%d" % i, timestamp=hour_ago_ms)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers})
    [committed] = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 5)])]).values()
    committed.result(30)
    labels = {"type": group_type, "topic": topic}
    eventually(lambda: v(stack, "kmon_consumer_group_lag", group, **labels) == 25
               and (v(stack, "kmon_consumer_group_lag_seconds", group, method="record", **labels) or 0) >= 3500
               and v(stack, "kmon_consumer_group_lost_messages_total", group, **labels) == 0, 60,
               "25 behind, the oldest of them an hour old, nothing lost yet")
    tp = TopicPartition(topic, 0, 20)
    admin.delete_records([tp])[tp].result(30)
    eventually(lambda: v(stack, "kmon_consumer_group_lost_messages_total", group, **labels) == 15, 60,
               "15 records deleted unread")
    rows = [t for t in history_rows(stack, CLUSTER) if t.kind == "records_lost" and t.group == group]
    assert [(t.topic, t.partition, t.old, t.new) for t in rows] == [(topic, 0, "5", "20")]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts, killed after it whatever happened."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait(30)


def test_g1_consumer_protocol_epoch_steps_are_counted_as_the_coordinator_wrote_them(
        mon: LocalStack, member: Callable[..., Member]) -> None:
    group, topic = "g1-consumers", "g1-orders"
    create_topic(mon, topic, partitions=4, rf=3)
    a = member(group, topic, "g1-a")
    eventually(lambda: v(mon, "kmon_consumer_group_members", group, type="consumer") == 1
               and v(mon, "kmon_consumer_group_state", group, type="consumer", state="Stable") == 1, 90,
               "a consumer-protocol group exported")
    b = member(group, topic, "g1-b")
    eventually(lambda: v(mon, "kmon_consumer_group_members", group, type="consumer") == 2
               and v(mon, "kmon_consumer_group_state", group, type="consumer", state="Stable") == 1, 60, "b joined")
    # neither names a server-side assignor: the coordinator's default one
    assert v(mon, "kmon_consumer_group_info", group, type="consumer", assignor="default") == 1
    a.leave()
    eventually(lambda: v(mon, "kmon_consumer_group_members", group, type="consumer") == 1
               and v(mon, "kmon_consumer_group_state", group, type="consumer", state="Stable") == 1, 60, "a left")
    b.leave()
    eventually(lambda: v(mon, "kmon_consumer_group_state", group, type="consumer", state="Empty") == 1, 60, "empty")
    epochs = group_epochs(mon, group)
    assert epochs == sorted(set(epochs)) and len(epochs) >= 4, epochs   # a, b, a leaving, b leaving
    assert v(mon, "kmon_consumer_group_generation", group, type="consumer") == epochs[-1]
    assert v(mon, "kmon_consumer_group_rebalances_total", group, type="consumer") == epochs[-1] - epochs[0]
    eventually(lambda: [t.generation for t in rebalance_rows(mon, group)] == list(range(epochs[0] + 1, epochs[-1] + 1)),
               30, "one history row per epoch step")
    records_behind_are_timed_then_lost(mon, group, "consumer", "g1-behind")


def test_g2_a_member_holding_its_partitions_keeps_the_group_reconciling(
        mon: LocalStack, member: Callable[..., Member]) -> None:
    group, topic = "g2-slow", "g2-orders"
    create_topic(mon, topic, partitions=4, rf=3)
    # held long enough that a loaded machine's pipeline (collector, stream batch, scrape) sees it
    slow = member(group, topic, "g2-slow-member", hold_s=30)
    # holding partitions, not only Stable: a group is Stable at first with none while the coordinator
    # does not know the new topic yet, and a member with nothing to give up never holds anything
    eventually(lambda: slow.holding.is_set()
               and v(mon, "kmon_consumer_group_state", group, type="consumer", state="Stable") == 1, 90,
               "the group stable with one member holding the partitions")
    joined = time.monotonic()
    member(group, topic, "g2-joining")
    seen: list[tuple] = []   # each distinct view of the group, for the failure message

    def reconciling() -> bool:
        view = (tuple(s for s in ("Empty", "Assigning", "Reconciling", "Stable")
                      if v(mon, "kmon_consumer_group_state", group, type="consumer", state=s) == 1),
                v(mon, "kmon_consumer_group_reconciling_members", group, type="consumer"),
                v(mon, "kmon_consumer_group_members", group, type="consumer"))
        if not seen or seen[-1][1:] != view:
            seen.append((round(time.monotonic() - joined, 1), *view))
        return view[0] == ("Reconciling",) and (view[1] or 0) >= 1
    try:
        eventually(reconciling, 35, "Reconciling while the slow member holds the partitions it has to give up")
    except AssertionError as e:
        asked = [round(t - joined, 1) for t in slow.revoked]
        rows = [(t.kind, t.old, t.new, t.detail) for t in history_rows(mon, CLUSTER) if t.group == group]
        raise AssertionError(f"{e}\nviews (s after the join, states, reconciling, members): {seen}\n"
                             f"slow member asked to revoke at {asked} s\nhistory: {rows}") from None
    assert not slow.released.is_set()
    eventually(lambda: v(mon, "kmon_consumer_group_state", group, type="consumer", state="Stable") == 1
               and v(mon, "kmon_consumer_group_reconciling_members", group, type="consumer") == 0, 90,
               "Stable again once the slow member let go")
    # the history names who was still reconciling when the group went Reconciling
    [reconciling_row] = [t for t in history_rows(mon, CLUSTER) if t.group == group and t.kind == "group_state_change"
                         and t.new == "Reconciling"]
    assert "client g2-slow-member" in (reconciling_row.detail or ""), reconciling_row


MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "client.id": "hung"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
"""


def test_g3_a_hung_member_is_fenced_after_its_session(mon: LocalStack, member: Callable[..., Member],
                                                     processes: list[subprocess.Popen]) -> None:
    group, topic = "g3-fenced", "g3-orders"
    create_topic(mon, topic, partitions=2, rf=3)
    assert mon.state
    member(group, topic, "g3-steady")
    hung = subprocess.Popen([sys.executable, "-c", MEMBER, mon.state.bootstrap_servers, group, topic])
    processes.append(hung)
    eventually(lambda: v(mon, "kmon_consumer_group_members", group, type="consumer") == 2, 90, "two members")
    before = v(mon, "kmon_consumer_group_generation", group, type="consumer") or 0
    hung.send_signal(signal.SIGSTOP)   # no more heartbeats: fenced after the session (6 s here)
    eventually(lambda: v(mon, "kmon_consumer_group_members", group, type="consumer") == 1, 60, "fenced")
    assert (v(mon, "kmon_consumer_group_generation", group, type="consumer") or 0) > before


def test_g4_a_share_group_is_a_group_of_its_own_type(mon: LocalStack, processes: list[subprocess.Popen]) -> None:
    group, topic = "g4-share", "g4-jobs"
    create_topic(mon, topic, partitions=2, rf=3)
    assert mon.state
    producer = Producer({"bootstrap.servers": mon.state.bootstrap_servers})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, value=f"job {i}".encode(), partition=i % 2)
        producer.flush(30)
    # from the earliest offset: a share-partition starts where it is when first fetched, which can
    # be after jobs produced as soon as the group is Stable (before its partitions are assigned)
    configs = java(mon, "g4-config", "kafka.admin.ConfigCommand", "--bootstrap-server", mon.state.bootstrap_servers,
                   "--alter", "--entity-type", "groups", "--entity-name", group,
                   "--add-config", "share.auto.offset.reset=earliest")
    processes.append(configs)
    assert configs.wait(60) == 0, (mon.dir / "logs" / "g4-config.log").read_text()
    consumer = java(mon, "g4-share-consumer", "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
                    "--bootstrap-server", mon.state.bootstrap_servers, "--topic", topic, "--group", group)
    processes.append(consumer)
    eventually(lambda: v(mon, "kmon_consumer_group_members", group, type="share") == 1
               and v(mon, "kmon_consumer_group_state", group, type="share", state="Stable") == 1, 90,
               "the share group exported with its member")
    assert v(mon, "kmon_consumer_group_state", group, type="consumer", state="Stable") is None
    # its lag is how far delivery is behind: the share-partitions' start offsets against the end offsets
    produce(100)
    eventually(lambda: v(mon, "kmon_consumer_group_lag", group, type="share", topic=topic) == 0, 90,
               "every job delivered")
    consumer.send_signal(signal.SIGTERM)
    consumer.wait(30)
    eventually(lambda: v(mon, "kmon_consumer_group_state", group, type="share", state="Empty") == 1, 60,
               "empty once its member left")
    # what it had taken but not acknowledged when it stopped goes back to be delivered again
    lag = lambda: v(mon, "kmon_consumer_group_lag", group, type="share", topic=topic)  # noqa: E731

    def settled() -> tuple[float] | None:   # the same over two lag intervals (2 s here)
        before = lag()
        time.sleep(5)
        return (before,) if before is not None and lag() == before else None
    [left] = eventually(settled, 60, "the lag settled after the member left")
    produce(50)
    eventually(lambda: lag() == left + 50, 90, "50 more jobs nobody took")
    # in seconds: the age of the record at a share-partition's start offset, read from the topic
    eventually(lambda: (v(mon, "kmon_consumer_group_lag_seconds", group, type="share", topic=topic, method="record")
                        or 0) > 0, 30, "the share group's lag in seconds from its oldest undelivered record")
    assert (v(mon, "kmon_consumer_group_retention_used_ratio", group, type="share", topic=topic) or 0) > 0
    # deleted undelivered: the share-partition start offsets stay where delivery stopped, so every
    # record from them to the end is lost to the group
    admin = AdminClient({"bootstrap.servers": mon.state.bootstrap_servers})
    for tp in [TopicPartition(topic, p, -1) for p in (0, 1)]:   # -1: up to the end offset
        admin.delete_records([tp])[tp].result(30)
    eventually(lambda: v(mon, "kmon_consumer_group_lost_messages_total", group, type="share", topic=topic) == left + 50,
               60, "every undelivered job counted lost")
    rows = [t for t in history_rows(mon, CLUSTER) if t.kind == "records_lost" and t.group == group]
    assert sorted(t.partition for t in rows) == [0, 1] and sum(int(t.new) - int(t.old) for t in rows) == left + 50, rows


def test_g5_a_kafka_streams_application_is_a_streams_group(mon: LocalStack, processes: list[subprocess.Popen],
                                                           tmp_path: Path) -> None:
    group = "g5-wordcount"
    for topic in ("streams-plaintext-input", "streams-wordcount-output"):
        create_topic(mon, topic, partitions=2, rf=3)
    assert mon.state
    config = tmp_path / "wordcount.properties"
    config.write_text(f"bootstrap.servers={mon.state.bootstrap_servers}\napplication.id={group}\n"
                      f"group.protocol=streams\nstate.dir={tmp_path / 'state'}\n")
    app = java(mon, "g5-wordcount", "org.apache.kafka.streams.examples.wordcount.WordCountDemo", str(config))
    processes.append(app)
    eventually(lambda: v(mon, "kmon_consumer_group_members", group, type="streams") == 1
               and v(mon, "kmon_consumer_group_state", group, type="streams", state="Stable") == 1, 120,
               "the streams application exported as a streams group")
    assert (v(mon, "kmon_consumer_group_generation", group, type="streams") or 0) >= 1
    started = time.monotonic()
    app.send_signal(signal.SIGTERM)
    app.wait(60)
    eventually(lambda: v(mon, "kmon_consumer_group_state", group, type="streams", state="Empty") == 1,
               60 + time.monotonic() - started, "empty once the application stopped")
    records_behind_are_timed_then_lost(mon, group, "streams", "g5-behind")
