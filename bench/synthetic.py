"""Synthetic clusters as kmon events: a healthy cluster, then a broker failure storm."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

from kmon.events import (BrokerState, ControllerState, Event, PartitionState, TopicState, ZnodeMeta,
                         entity_key)


@dataclass(frozen=True)
class Shape:
    partitions: int
    brokers: int = 12
    partitions_per_topic: int = 50
    rf: int = 3
    cluster: str = "bench"

    @property
    def topics(self) -> int:
        return max(1, self.partitions // self.partitions_per_topic)

    @staticmethod
    def topic(t: int) -> str:
        return f"topic-{t:05d}"

    def replicas(self, t: int, p: int) -> tuple[int, ...]:
        first = (t * self.partitions_per_topic + p) % self.brokers
        return tuple((first + i) % self.brokers + 1 for i in range(self.rf))


class Zxids:
    def __init__(self, start: int = 1):
        self.next = start

    def __call__(self) -> int:
        self.next += 1
        return self.next


def _event(shape: Shape, kind: str, entity: str, data: object, zxid: int, op: str = "upsert") -> Event:
    now = int(time.time() * 1000)
    return Event(cluster=shape.cluster, source="zk", kind=kind, entity=entity, op=op, observed_ms=now,
                 data=data, zxid=zxid, znode=ZnodeMeta(f"/{entity}", zxid, 0, now))


def healthy(shape: Shape, zxid: Zxids) -> Iterator[Event]:
    yield _event(shape, "controller", "controller", ControllerState(1, 1), zxid())
    for b in range(1, shape.brokers + 1):
        yield _event(shape, "broker", entity_key("broker", b), BrokerState(b, "127.0.0.1", 9000 + b, None), zxid())
    for t in range(shape.topics):
        name = shape.topic(t)
        yield _event(shape, "topic", entity_key("topic", name),
                     TopicState(name, None, {p: shape.replicas(t, p) for p in range(shape.partitions_per_topic)},
                                config={"min.insync.replicas": "2"}), zxid())
        for p in range(shape.partitions_per_topic):
            r = shape.replicas(t, p)
            yield _event(shape, "partition", entity_key("partition", name, p),
                         PartitionState(name, p, r[0], 0, r, 1), zxid())


def broker_failure(shape: Shape, zxid: Zxids, broker: int) -> Iterator[Event]:
    """What the ZooKeeper collector emits when ``broker`` dies: it leaves every ISR, and
    partitions it led elect the next replica."""
    yield _event(shape, "broker", entity_key("broker", broker), None, zxid(), op="delete")
    for t in range(shape.topics):
        name = shape.topic(t)
        for p in range(shape.partitions_per_topic):
            r = shape.replicas(t, p)
            if broker not in r:
                continue
            isr = tuple(b for b in r if b != broker)
            leader = r[0] if r[0] != broker else isr[0]
            yield _event(shape, "partition", entity_key("partition", name, p),
                         PartitionState(name, p, leader, 1 if leader != r[0] else 0, isr, 1), zxid())
