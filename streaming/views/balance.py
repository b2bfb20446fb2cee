"""The balance family: leaders, preferred leaders and replicas per broker, Kafka's leader
imbalance ratio, and partitions not on their preferred leader or being reassigned."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

from streaming.transitions import NO_LEADER
from streaming.views.cluster import ClusterModel
from streaming.views.exposition import Sample, Text, render

FAMILY = "balance"


@dataclass
class _Counts:
    """One topic's share, summed over topics."""
    leaders: Counter[int] = field(default_factory=Counter)
    preferred: Counter[int] = field(default_factory=Counter)
    replicas: Counter[int] = field(default_factory=Counter)
    should_lead: Counter[int] = field(default_factory=Counter)   # Kafka's auto-rebalance: topics being deleted left out
    led_by_other: Counter[int] = field(default_factory=Counter)
    imbalanced: int = 0
    reassigning: int = 0

    def add(self, other: _Counts) -> None:
        for name in ("leaders", "preferred", "replicas", "should_lead", "led_by_other"):
            getattr(self, name).update(getattr(other, name))
        self.imbalanced += other.imbalanced
        self.reassigning += other.reassigning


def texts(model: ClusterModel) -> list[Text]:
    return [render(model.name, _samples(model))]


def _samples(model: ClusterModel) -> Iterator[Sample]:
    total = _Counts()
    for counts in model.per_topic(_topic_counts).values():
        total.add(counts)
    for b in sorted(set(model.registered) | set(total.replicas)):
        broker = {"broker": b}
        yield "kmon_broker_leader_partitions", broker, total.leaders[b]
        yield "kmon_broker_preferred_leader_partitions", broker, total.preferred[b]
        yield ("kmon_broker_leader_imbalance_ratio", broker,
               total.led_by_other[b] / total.should_lead[b] if total.should_lead[b] else 0.0)
        yield "kmon_broker_replica_partitions", broker, total.replicas[b]
    yield "kmon_preferred_replica_imbalance", {}, total.imbalanced
    yield "kmon_reassigning_partitions", {}, total.reassigning


def _topic_counts(model: ClusterModel, topic: str) -> _Counts:
    c = _Counts()
    for p in model.partitions(topic):
        for b in p.replicas:   # not Counter.update: its Python-level checks cost more than the count
            c.replicas[b] += 1
        c.imbalanced += p.imbalanced
        c.reassigning += p.reassigning
        if p.state is not None and p.state.leader != NO_LEADER:
            c.leaders[p.state.leader] += 1
        if p.preferred is None:
            continue
        c.preferred[p.preferred] += 1
        if not p.deleting:
            c.should_lead[p.preferred] += 1
            # Kafka counts only partitions with a leader state here
            c.led_by_other[p.preferred] += p.state is not None and p.state.leader != p.preferred
    return c
