"""The soak's faults: one drawn at random every few tens of seconds, from a seeded generator so
that a failing run can be played again. Each fault does its harm and undoes it before it returns
(a killed process is started again after a pause), so that at most one part is down at a time and
the cluster always comes back; what it did is returned for the report."""
from __future__ import annotations

import functools
import json
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NodeExistsError

from bench.support.load import Load
from stack.local import LocalStack
from tests.support import preferred_election, quorum, reassign

LOAD_TOPICS = ("soak-orders", "soak-payments")   # the load's topics: faults pick among them too


@dataclass
class Chaos:
    stack: LocalStack
    load: Load
    rng: random.Random
    log: Callable[[str], None]
    injected: Counter[str] = field(default_factory=Counter)
    topics: list[str] = field(default_factory=list)   # the topics the soak created and has not deleted
    restarted: set[str] = field(default_factory=set)   # the stack's parts the last fault started again
    instead: str | None = None   # the fault made in place of the one drawn, which the state did not allow
    _serial: int = 0

    @property
    def kraft(self) -> bool:
        assert self.stack.state
        return self.stack.state.kraft

    @functools.cached_property
    def admin(self) -> AdminClient:
        """One client for the whole soak: a client dropped before its call's future resolved fails it (_DESTROY)."""
        assert self.stack.state
        return AdminClient({"bootstrap.servers": self.stack.state.bootstrap_servers, "log_level": 0})

    def brokers(self) -> list[int]:
        return self.stack.broker_ids()

    def pause(self, lo: float, hi: float) -> float:
        seconds = self.rng.uniform(lo, hi)
        time.sleep(seconds)
        return seconds

    # ------------------------------------------------------------------ the faults
    def broker_kill(self) -> str:
        victim = self.rng.choice(self.brokers())
        self.stack.kill(f"broker-{victim}")
        down = self.pause(3, 15)
        self.stack.start(f"broker-{victim}", timeout=120)
        return f"broker {victim} SIGKILLed, started again after {down:.0f} s"

    def broker_stall(self) -> str:
        victim = self.rng.choice(self.brokers())
        self.stack.send_signal(f"broker-{victim}", signal.SIGSTOP)
        try:
            hung = self.pause(2, 12)
        finally:
            self.stack.send_signal(f"broker-{victim}", signal.SIGCONT)
        return f"broker {victim} SIGSTOPped for {hung:.0f} s"

    def controller_kill(self) -> str:
        victim = self._controller()
        self.stack.kill(f"broker-{victim}")
        down = self.pause(3, 10)
        self.stack.start(f"broker-{victim}", timeout=120)
        return f"the controller, broker {victim}, SIGKILLed, started again after {down:.0f} s"

    def zookeeper_restart(self) -> str:
        self.stack.kill("zookeeper")
        down = self.pause(1, 8)
        self.stack.start("zookeeper")
        return f"ZooKeeper SIGKILLed, started again after {down:.0f} s"

    def kmon_part_kill(self) -> str:
        assert self.stack.state
        part = self.rng.choice([n for n in self.stack.state.components if n.startswith("collector-") or n == "stream"])
        self.stack.kill(part)
        self.stack.start(part, timeout=180)
        self.restarted.add(part)
        return f"{part} SIGKILLed and started again"

    def events_node_kill(self) -> str:
        self.stack.kill("events")
        down = self.pause(2, 10)
        self.stack.start("events", timeout=120)
        return f"kmon's events node SIGKILLed, started again after {down:.0f} s"

    def topic_create(self) -> str:
        self._serial += 1
        name = f"soak-t{self._serial}"
        self.admin.create_topics([NewTopic(name, 3, 3)])[name].result(60)
        self.topics.append(name)
        return f"topic {name} created"

    def topic_delete(self) -> str:
        if not self.topics:
            self.instead = "topic_create"
            return self.topic_create()
        name = self.topics.pop(self.rng.randrange(len(self.topics)))
        self.admin.delete_topics([name])[name].result(60)
        return f"topic {name} deleted"

    def reassignment(self) -> str:
        topic = self.rng.choice([*LOAD_TOPICS, *self.topics])
        brokers = self.brokers()
        partitions = self.admin.list_topics(topic, timeout=30).topics[topic].partitions
        p = self.rng.choice(sorted(partitions))
        target = self.rng.sample(brokers, k=len(partitions[p].replicas))
        if self.kraft:
            reassign(self.stack, topic, p, target)
        else:
            with self.stack.zk() as zk:
                try:
                    zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
                        {"topic": topic, "partition": p, "replicas": target}]}).encode(), makepath=True)
                except NodeExistsError:   # the last one still runs
                    return "a reassignment still running: none started"
        return f"{topic}:{p} reassigned to {target}"

    def preferred_election(self) -> str:
        preferred_election(self.stack)
        return "a preferred leader election"

    def member_join(self) -> str:
        group = self.rng.choice(sorted(self.load.groups))
        self.load.join(group)
        return f"a member joined {group}"

    def member_leave(self) -> str:
        group = self.rng.choice(sorted(self.load.groups))
        if self.load.leave(group):
            return f"a member left {group}"
        self.instead = "member_join"
        return self.member_join()

    def _controller(self) -> int:
        if not self.kraft:
            return self.stack.controller_id()
        return quorum(self.stack).leader_id

    # ------------------------------------------------------------------ drawing them
    def weights(self) -> dict[Callable[[], str], int]:
        faults: dict[Callable[[], str], int] = {
            self.broker_kill: 3, self.broker_stall: 3, self.controller_kill: 2, self.kmon_part_kill: 3,
            self.events_node_kill: 1, self.topic_create: 2, self.topic_delete: 2, self.reassignment: 2,
            self.preferred_election: 2, self.member_join: 3, self.member_leave: 3}
        if not self.kraft:
            faults[self.zookeeper_restart] = 1
        return faults

    def one(self) -> None:
        """Draw a fault and inject it."""
        weights = self.weights()
        fault = self.rng.choices(list(weights), list(weights.values()))[0]
        self.restarted, self.instead = set(), None
        started = time.monotonic()
        try:
            said = fault()
            name = self.instead or fault.__name__   # the table counts what was done, not what was drawn
        except Exception as e:   # the cluster in the middle of an earlier fault's failover: logged, counted
            said = f"failed: {e}"
            name = f"{self.instead or fault.__name__} (failed)"
        self.injected[name] += 1
        self.log(f"fault {sum(self.injected.values())}: {name}: {said} ({time.monotonic() - started:.0f} s)")
