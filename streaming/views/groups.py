"""The groups family: each consumer group's state, members, generation (a modern group's epoch),
rebalances, time in its state, assignor, lag, records lost unread and the verdict on its consumers
(per partition where not ok), and for the protocols of Kafka 4 (consumer, share, streams) its target assignment's epoch
and the members still reconciling. Every series carries the
group's type. Rendered per group, so a change re-renders its group only; the time in state is
rendered by each scrape."""
from __future__ import annotations

from typing import Iterator

from kmon.events import GroupState
from kmon.history import LOST_MESSAGES, REBALANCES, topic_counts
from kmon.metrics import CONSUMER_STATUSES, GROUP_STATES
from streaming.fold.entity import EntityRecord
from streaming.views.cluster import ClusterModel
from streaming.views.exposition import Sample, Since, Text, render

FAMILY = "groups"


def render_family(model: ClusterModel) -> list[Text]:
    return list(model.per_entity("group", _group_text).values())


def _group_text(model: ClusterModel, record: EntityRecord) -> Text:
    return render(model.name, _samples(record))


def _samples(record: EntityRecord) -> Iterator[Sample]:
    g: GroupState = record.state
    group = {"group": g.group, "type": g.group_type}
    # a state (or type) this kmon does not know still shows, as the one set to 1
    known = GROUP_STATES.get(g.group_type, ())
    for s in known if g.state in known else (*known, g.state):
        yield "kmon_consumer_group_state", {**group, "state": s}, int(s == g.state)
    yield "kmon_consumer_group_members", group, len(g.members)
    yield "kmon_consumer_group_generation", group, g.generation
    yield "kmon_consumer_group_rebalances_total", group, record.counters.get(REBALANCES, 0)
    since = record.state_since_ms if record.state_since_ms is not None else record.last_observed_ms
    yield "kmon_consumer_group_state_seconds", group, Since(since)
    if g.protocol:
        yield "kmon_consumer_group_info", {**group, "assignor": g.protocol}, 1
    if g.assignment_epoch is not None:
        yield "kmon_consumer_group_assignment_epoch", group, g.assignment_epoch
        yield "kmon_consumer_group_reconciling_members", group, g.reconciling
    if g.status is not None:
        for s in CONSUMER_STATUSES if g.status in CONSUMER_STATUSES else (*CONSUMER_STATUSES, g.status):
            yield "kmon_consumer_group_status", {**group, "status": s}, int(s == g.status)
    for where, verdict in g.partition_status.items():
        topic, _, partition = where.rpartition(":")
        yield "kmon_consumer_group_partition_status", {**group, "topic": topic, "partition": partition,
                                                       "status": verdict}, 1
    # 0 from the first lag on, so that the first loss is an increase Prometheus sees
    lost = topic_counts(record.counters, LOST_MESSAGES)
    for t in sorted(g.lag.keys() | lost.keys()):
        yield "kmon_consumer_group_lost_messages_total", {**group, "topic": t}, lost.get(t, 0)
    for t, lag in g.lag.items():
        yield "kmon_consumer_group_lag", {**group, "topic": t}, lag.lag
        if lag.lag_seconds is not None:
            yield "kmon_consumer_group_lag_seconds", {**group, "topic": t,
                                                      "method": lag.lag_seconds_method or "interpolated"}, lag.lag_seconds
            if lag.retention_ms is not None and lag.retention_ms > 0:   # -1: kept forever, no margin to lose
                yield ("kmon_consumer_group_retention_used_ratio", {**group, "topic": t},
                       lag.lag_seconds / (lag.retention_ms / 1000))
