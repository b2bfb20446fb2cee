"""The ISR family: per topic, partitions under-replicated, under/at min ISR, offline, the
elections and ISR shrinks/expands counted, and per-partition detail of the unhealthy ones.
Rendered per topic, so a change re-renders its topic only."""
from __future__ import annotations

from collections import Counter

from streaming.records import ISR_EXPANDS, ISR_SHRINKS, LEADER_ELECTIONS, UNCLEAN_LEADER_ELECTIONS
from streaming.views.cluster import ClusterModel, Partition
from streaming.views.exposition import Sample, Text, joined, render, render_rows

FAMILY = "isr"


def texts(model: ClusterModel) -> list[Text]:
    return list(model.per_topic(_topic_text).values())


# per-partition detail of the partitions that are not fully healthy (--partition-detail)
DETAIL = ("kmon_partition_isr_size", "kmon_partition_replicas", "kmon_partition_leader")


def _topic_text(model: ClusterModel, topic: str) -> Text:
    aggregates, detailed = _summed(model, model.partitions(topic))
    text = render(model.name, aggregates)
    if not detailed:
        return text
    return joined(text, render_rows(model.name, DETAIL, ("topic", "partition"), (
        ((p.topic, p.partition), (len(p.state.isr), len(p.replicas), p.state.leader))
        for p in detailed if p.state is not None)))


def _summed(model: ClusterModel, partitions: list[Partition]) -> tuple[list[Sample], list[Partition]]:
    """The topic's aggregate samples, and the partitions that get detail series."""
    if not partitions:
        return [], []
    topic = {"topic": partitions[0].topic}
    detail = model.options.detail
    # one pass over the topic's partitions: at 100k partitions the view is rebuilt per batch
    under = under_min = at_min = offline = 0
    counted: Counter[str] = Counter()   # counter name -> sum
    per_broker: dict[str, Counter[int]] = {ISR_SHRINKS: Counter(), ISR_EXPANDS: Counter()}   # name -> broker -> sum
    replicas: set[int] = set()
    detailed: list[Partition] = []
    for p in partitions:
        under += p.under_replicated
        under_min += p.under_min_isr
        at_min += p.at_min_isr
        offline += p.offline
        for key, n in p.counters.items():   # not Counter.update: its Python-level checks cost more than the sum
            counted[key] += n
        for name, by_broker in p.broker_counters.items():
            if (sums := per_broker.get(name)) is not None:
                for broker, n in by_broker.items():
                    sums[broker] += n
        replicas.update(p.replicas)
        if p.state is not None and detail != "none" and (
                detail == "all" or p.offline or p.under_replicated or p.under_min_isr):
            detailed.append(p)
    samples: list[Sample] = [
        ("kmon_partitions", topic, len(partitions)),
        ("kmon_under_replicated_partitions", topic, under),
        ("kmon_under_min_isr_partitions", topic, under_min),
        ("kmon_at_min_isr_partitions", topic, at_min),
        ("kmon_offline_partitions", topic, offline),
        ("kmon_leader_elections_total", topic, counted[LEADER_ELECTIONS]),
        ("kmon_unclean_leader_elections_total", topic, counted[UNCLEAN_LEADER_ELECTIONS]),
    ]
    for name, counter in (("kmon_isr_shrinks_total", ISR_SHRINKS), ("kmon_isr_expands_total", ISR_EXPANDS)):
        sums = per_broker[counter]
        # every replica from 0, so that an alert on increase() sees the first shrink
        for broker in sorted(replicas | sums.keys()):
            samples.append((name, {**topic, "broker": broker}, sums[broker]))
    return samples, detailed
