"""A steady load: a producer writing to a few topics and consumer groups reading them, for the
length of a bench, so that faults hit a cluster at work (ISR changes under traffic, groups
rebalancing while they commit) and the quiet stretches are a cluster at work too, not an idle one.
Members join and leave as a bench asks (``Load.join``/``leave``). The soak and the peers bench run it."""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer

RATE_PER_S = 50.0


class Member(threading.Thread):
    """One consumer of a group that polls and commits (auto) until it leaves."""

    def __init__(self, bootstrap: str, group: str, protocol: str, name: str, topics: tuple[str, ...]) -> None:
        super().__init__(daemon=True, name=name)
        self.group = group
        self._leaving = threading.Event()
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "log_level": 0,
                "auto.offset.reset": "earliest", "group.protocol": protocol}
        if protocol == "classic":
            conf["session.timeout.ms"] = 10_000
        self._consumer = Consumer(conf)
        self._consumer.subscribe(list(topics))
        self.start()

    def run(self) -> None:
        while not self._leaving.is_set():
            self._consumer.poll(0.2)
        self._consumer.close()

    def leave(self) -> None:
        self._leaving.set()
        self.join(30)


@dataclass
class Load:
    bootstrap: str
    groups: dict[str, str]   # group -> its rebalance protocol (classic, consumer)
    topics: tuple[str, ...]  # written in turn, each group subscribed to all; made by the bench
    members: list[Member] = field(default_factory=list)
    produced: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _names: itertools.count = field(default_factory=itertools.count)

    def start(self) -> None:
        threading.Thread(target=self._produce, name="load-producer", daemon=True).start()
        for group in self.groups:
            self.join(group)
            self.join(group)

    def join(self, group: str) -> Member:
        member = Member(self.bootstrap, group, self.groups[group], f"{group}-{next(self._names)}", self.topics)
        self.members.append(member)
        return member

    def leave(self, group: str) -> bool:
        """One member of ``group`` leaves; False when it has one member or none (a group keeps one)."""
        of_group = [m for m in self.members if m.group == group]
        if len(of_group) < 2:
            return False
        self.members.remove(of_group[0])
        of_group[0].leave()
        return True

    def stop(self) -> None:
        self._stop.set()
        for member in self.members:
            member.leave()

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "log_level": 0, "acks": "all",
                             "message.timeout.ms": 60_000})
        for i in itertools.count():
            if self._stop.wait(1 / RATE_PER_S):
                break
            try:
                producer.produce(self.topics[i % len(self.topics)], value=f"load {i}".encode())
                self.produced += 1
            except BufferError:   # the cluster is in a failover: the queue is full, skip
                pass
            producer.poll(0)
        producer.flush(30)
