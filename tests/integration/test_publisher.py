"""The events publisher against a cluster whose brokers die under it: every event arrives, in order.

This is the case where the events topic lives on the cluster kmon watches (or on an events
cluster of several brokers): a killed leader of the events topic must cost seconds, not events.
"""
from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

import pytest
from collectors.publisher import Publisher, PublisherConfig
from collectors.telemetry import Telemetry
from kmon.events import ControllerState, Event
from stack.local import LocalStack
from tests.support import eventually, events_on

pytestmark = pytest.mark.integration
CLUSTER = "pubtest"
KEYS = 12   # entities: spread over every partition of the events topic


def event(key: int, seq: int) -> Event:
    return Event(cluster=CLUSTER, source="zk", kind="controller", entity=f"controller-{key}", op="upsert",
                 observed_ms=seq, data=ControllerState(broker_id=key, epoch=seq), zxid=seq)


class Feeder(threading.Thread):
    """Publishes one event per entity every few milliseconds until stopped, like a busy collector."""

    def __init__(self, publisher: Publisher, pause: float) -> None:
        super().__init__(daemon=True)
        self.publisher = publisher
        self.pause = pause
        self.sent = 0
        self.halt = threading.Event()

    def run(self) -> None:
        for seq in itertools.count():
            if self.halt.wait(self.pause):
                return
            for key in range(KEYS):
                self.publisher.publish(event(key, seq))
            self.sent = seq + 1


@dataclass
class Publishing:
    publisher: Publisher
    feeder: Feeder
    topic: str


# a busy collector (an event per entity every 20 ms) and a sparse one (every 2 s), side by side
PACES = {"busy": 0.02, "sparse": 2.0}


@pytest.fixture
def publishing(stack: LocalStack) -> Iterator[dict[str, Publishing]]:
    """One publisher per pace, each on an events topic of its own on the session stack, fed until the end."""
    assert stack.state
    started: dict[str, Publishing] = {}
    try:
        for pace, pause in PACES.items():
            topic = f"kmon-events-pub-{pace}-{uuid.uuid4().hex[:8]}"
            # unhealthy as soon as an event waits 2 s: "healthy" then says deliveries flow
            publisher = Publisher(PublisherConfig(stack.state.bootstrap_servers, topic, unhealthy_after_s=2),
                                  Telemetry(CLUSTER))
            publisher.start()
            started[pace] = Publishing(publisher, Feeder(publisher, pause), topic)
            started[pace].feeder.start()
        yield started
    finally:
        for each in started.values():
            each.feeder.halt.set()
            each.feeder.join(10)
            each.publisher.close(timeout=5)


def leaders(stack: LocalStack, topic: str) -> dict[int, int]:
    """Each partition's leader, once every partition has its state: the controller writes a partition's
    state znode after the partition's own (seen missing on a loaded machine)."""
    from tests.support import partition_state

    def read() -> dict[int, int]:
        with stack.zk() as client:
            partitions = client.get_children(f"/brokers/topics/{topic}/partitions")
        return {int(p): partition_state(stack, topic, int(p))["leader"] for p in partitions}
    return eventually(read, 30, f"the state of every partition of {topic}")


def test_every_event_arrives_in_order_while_leaders_of_the_events_topic_die(
        stack: LocalStack, publishing: dict[str, Publishing]) -> None:
    """A busy and a sparse publisher at once, through the same two broker deaths."""
    assert stack.state

    def healthy() -> bool:
        return all(p.feeder.sent > 3 and p.publisher.health() is None for p in publishing.values())
    eventually(healthy, 60, "both publishing steadily")
    for round_ in range(2):
        # the broker leading most of the events topics' partitions, then the controller
        by_leader = [b for p in publishing.values() for b in leaders(stack, p.topic).values() if b >= 0]
        victim = (max(set(by_leader), key=by_leader.count) if round_ == 0 else stack.controller_id())
        stack.kill_broker(victim)
        killed = time.monotonic()
        # publishing goes on through the failover (the ZooKeeper session, then new leaders), and
        # deliveries flow again: nothing waits longer than 2 s
        eventually(lambda: time.monotonic() - killed > 15 and healthy(), 90,
                   f"events delivered again after broker {victim} died (round {round_})")
        stack.start_broker(victim)
    for pace, p in publishing.items():
        p.feeder.halt.set()
        p.feeder.join(10)
        assert p.publisher.flush(60) == 0, f"{pace}: events still waiting after the brokers are back"
        in_order(pace, stack.state.bootstrap_servers, p)


def in_order(pace: str, bootstrap: str, p: Publishing) -> None:
    """Every event ``p`` sent is on its topic, each entity's in order, a retried batch at most repeated once."""
    seen: dict[str, list[int]] = {}
    for e in events_on(bootstrap, p.topic):
        seen.setdefault(e.entity, []).append(e.zxid)
    assert sorted(seen) == sorted(f"controller-{k}" for k in range(KEYS)), pace
    for entity, seqs in seen.items():
        # in order, nothing missing; a retried batch may only repeat what came right before it
        assert seqs == sorted(seqs), f"{pace}: {entity} out of order"
        assert sorted(set(seqs)) == list(range(p.feeder.sent)), \
            f"{pace}: {entity}: missing {sorted(set(range(p.feeder.sent)) - set(seqs))[:20]}"
        # The idempotent producer can still write a batch twice during a leader change
        # (confluentinc/librdkafka#4953); the stream folds a repeated zxid as a duplicate. A
        # repeat is a retry: adjacent (checked by the order above) and once at most.
        repeated = {seq: n for seq, n in Counter(seqs).items() if n > 1}
        assert all(n == 2 for n in repeated.values()), f"{pace}: {entity}: events written more than twice: {repeated}"
