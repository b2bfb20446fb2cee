"""The balance family: leaders, preferred leaders and replicas per broker, Kafka's leader
imbalance ratio, partitions not on their preferred leader or being reassigned, and the replicas those
reassignments add that have not caught up yet."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

from streaming.fold.transitions import NO_LEADER
from streaming.views.cluster import ClusterModel, PartitionView, SplitTally
from streaming.views.exposition import Sample, Text, render

FAMILY = "balance"


@dataclass
class BalanceTally(SplitTally):
    """One topic's share, kept by difference (:class:`streaming.views.cluster.Tally`), and summed over topics."""
    leaders: Counter[int] = field(default_factory=Counter)
    preferred: Counter[int] = field(default_factory=Counter)
    replicas: Counter[int] = field(default_factory=Counter)
    should_lead: Counter[int] = field(default_factory=Counter)   # Kafka's auto-rebalance: topics being deleted left out
    led_by_other: Counter[int] = field(default_factory=Counter)
    imbalanced: int = 0
    reassigning: int = 0
    pending: int = 0

    def _placement(self, p: PartitionView, sign: int) -> None:
        for b in p.replicas:   # not Counter.update: its Python-level checks cost more than the count
            self.replicas[b] += sign
        if p.preferred is not None:
            self.preferred[p.preferred] += sign
            if not p.deleting:
                self.should_lead[p.preferred] += sign

    def _judgement(self, p: PartitionView, sign: int) -> None:
        self.imbalanced += sign * p.imbalanced
        self.reassigning += sign * p.reassigning
        self.pending += sign * p.pending
        if p.state is not None and p.state.leader != NO_LEADER:
            self.leaders[p.state.leader] += sign
        if p.preferred is not None and not p.deleting:
            # Kafka counts only partitions with a leader state here
            self.led_by_other[p.preferred] += sign * (p.state is not None and p.state.leader != p.preferred)

    def update(self, other: BalanceTally) -> None:
        for name in ("leaders", "preferred", "replicas", "should_lead", "led_by_other"):
            getattr(self, name).update(getattr(other, name))
        self.imbalanced += other.imbalanced
        self.reassigning += other.reassigning
        self.pending += other.pending


def render_family(model: ClusterModel) -> list[Text]:
    return [render(model.name, _samples(model))]


def _samples(model: ClusterModel) -> Iterator[Sample]:
    total = BalanceTally()
    for topic in model.topics():
        total.update(model.tally(BalanceTally, topic))
    for b in sorted(set(model.registered) | {b for b, n in total.replicas.items() if n}):
        broker = {"broker": b}
        yield "kmon_broker_leader_partitions", broker, total.leaders[b]
        yield "kmon_broker_preferred_leader_partitions", broker, total.preferred[b]
        yield ("kmon_broker_leader_imbalance_ratio", broker,
               total.led_by_other[b] / total.should_lead[b] if total.should_lead[b] else 0.0)
        yield "kmon_broker_replica_partitions", broker, total.replicas[b]
    yield "kmon_preferred_replica_imbalance", {}, total.imbalanced
    yield "kmon_reassigning_partitions", {}, total.reassigning
    yield "kmon_reassignment_replicas_pending", {}, total.pending
