"""The ISR family: per topic, partitions under-replicated, under/at min ISR, offline, the
elections and ISR shrinks/expands counted, under KRaft the eligible leader replicas (KIP-966),
and per-partition detail of the unhealthy ones.
Rendered per topic, so a change re-renders its topic only; a topic's sums are kept by
difference (:class:`IsrTally`), so a change costs the partitions it touched."""
from __future__ import annotations

from collections import Counter

from kmon.history import ELR_LEADER_ELECTIONS, ISR_EXPANDS, ISR_SHRINKS, LEADER_ELECTIONS, UNCLEAN_LEADER_ELECTIONS
from streaming.views.cluster import ClusterModel, PartitionView, SplitTally
from streaming.views.exposition import Rows, Sample, Text, joined, render

FAMILY = "isr"


def render_family(model: ClusterModel) -> list[Text]:
    return list(model.per_topic(_topic_text).values())


# per-partition detail of the partitions that are not fully healthy (--partition-detail)
DETAIL = ("kmon_partition_isr_size", "kmon_partition_replicas", "kmon_partition_leader")


class IsrTally(SplitTally):
    """One topic's counts and counter sums, and its partitions that are not fully healthy."""

    def __init__(self) -> None:
        self.partitions = self.under = self.under_min = self.at_min = self.offline = 0
        self.kraft = self.elr = 0   # partitions with a KRaft state; ... with eligible leader replicas
        self.counted: Counter[str] = Counter()   # counter name -> sum
        self.per_broker: dict[str, Counter[int]] = {ISR_SHRINKS: Counter(), ISR_EXPANDS: Counter()}
        self.replicas: Counter[int] = Counter()   # broker -> replicas it holds (every one gets series)
        self.unhealthy: dict[int, PartitionView] = {}
        # partition -> (Partition, its detail lines) as last rendered: kept while the partition
        # is the same object, i.e. until it is judged again
        self.rendered: dict[int, tuple[PartitionView, tuple[str, ...]]] = {}

    def _placement(self, p: PartitionView, sign: int) -> None:
        self.partitions += sign
        for broker in p.replicas:
            self.replicas[broker] += sign

    def _judgement(self, p: PartitionView, sign: int) -> None:
        # plain loops, not Counter.update: its Python-level checks cost more than the sum
        self.under += sign * p.under_replicated
        self.under_min += sign * p.under_min_isr
        self.at_min += sign * p.at_min_isr
        self.offline += sign * p.offline
        if p.state is not None and p.state.elr is not None:   # None: a ZooKeeper-mode state
            self.kraft += sign
            self.elr += sign * bool(p.state.elr)
        for key, n in p.counters.items():
            self.counted[key] += sign * n
        for name, by_broker in p.broker_counters.items():
            if (sums := self.per_broker.get(name)) is not None:
                for broker, n in by_broker.items():
                    sums[broker] += sign * n
        if p.state is not None and (p.offline or p.under_replicated or p.under_min_isr):
            if sign > 0:
                self.unhealthy[p.partition] = p
            else:
                del self.unhealthy[p.partition]


def _topic_text(model: ClusterModel, topic: str) -> Text:
    tally = model.tally(IsrTally, topic)
    text = render(model.name, _samples(topic, tally))
    detail = model.options.detail
    if detail == "none":
        return text
    detailed = [p for p in model.partitions(topic) if p.state is not None] if detail == "all" \
        else [tally.unhealthy[p] for p in sorted(tally.unhealthy)]
    if not detailed:
        return text
    rows, kept, rendered = Rows(model.name, DETAIL, ("topic", "partition")), tally.rendered, {}
    for p in detailed:
        hit = kept.get(p.partition)
        rendered[p.partition] = hit if hit is not None and hit[0] is p else (
            p, rows.row((p.topic, p.partition), (len(p.state.isr), len(p.replicas), p.state.leader)))
    tally.rendered = rendered
    return joined(text, rows.text(lines for _, lines in rendered.values()))


def _samples(topic: str, tally: IsrTally) -> list[Sample]:
    if not tally.partitions:
        return []
    labels = {"topic": topic}
    samples: list[Sample] = [
        ("kmon_partitions", labels, tally.partitions),
        ("kmon_under_replicated_partitions", labels, tally.under),
        ("kmon_under_min_isr_partitions", labels, tally.under_min),
        ("kmon_at_min_isr_partitions", labels, tally.at_min),
        ("kmon_offline_partitions", labels, tally.offline),
        ("kmon_leader_elections_total", labels, tally.counted[LEADER_ELECTIONS]),
        ("kmon_unclean_leader_elections_total", labels, tally.counted[UNCLEAN_LEADER_ELECTIONS]),
    ]
    if tally.kraft:
        samples += [("kmon_elr_leader_elections_total", labels, tally.counted[ELR_LEADER_ELECTIONS]),
                    ("kmon_elr_partitions", labels, tally.elr)]
    holding = {b for b, n in tally.replicas.items() if n}
    for name, counter in (("kmon_isr_shrinks_total", ISR_SHRINKS), ("kmon_isr_expands_total", ISR_EXPANDS)):
        sums = tally.per_broker[counter]
        # every replica from 0, so that an alert on increase() sees the first shrink
        for broker in sorted(holding | {b for b, n in sums.items() if n}):
            samples.append((name, {**labels, "broker": broker}, sums[broker]))
    return samples
