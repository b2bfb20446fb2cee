"""What is wrong now, per cluster: the API's /api/v1/health (streaming/api.py), derived from the same
model and tallies the metric families read, so it says what /metrics says. Pure; run on the views'
thread, which owns the models (streaming.view_thread's ask)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from kmon.events import BrokerState, ControllerState, GroupState, QuorumState, entity_key
from streaming.fold.transitions import NO_LEADER
from streaming.views.brokers import HoldersTally
from streaming.views.cluster import ClusterModel, PartitionView
from streaming.views.isr import IsrTally

OK = "ok"   # a group's consumers judged fine (collectors/groups/consumer_status.py)
# a partition's problem is its worst: offline, then under min ISR, then under-replicated
PARTITION_PROBLEMS = ("offline_partition", "under_min_isr_partition", "under_replicated_partition")
PROBLEM_KINDS = ("no_controller", "no_quorum_leader", "broker_down", *PARTITION_PROBLEMS, "group_not_ok")


class Problem(NamedTuple):
    """One problem, cheap to make (a broker failure at 100k partitions makes 25k): its fields for the
    answer are built from ``what`` only for the problems an answer lists. Its first six fields are its
    identity: the same problem at the next request has the same ones."""
    cluster: str
    kind: str                       # one of PROBLEM_KINDS
    broker: int | None
    topic: str | None
    partition: int | None
    group: str | None
    observed_ms: int | None         # the latest observation of the entity that shows it (None: never seen)
    what: Any = None                # the PartitionView, GroupState or broker state it was judged from

    def fields(self) -> dict[str, Any]:
        """The entity fields that apply, and what says more about it."""
        named = {k: v for k, v in (("broker", self.broker), ("topic", self.topic), ("partition", self.partition),
                                   ("group", self.group)) if v is not None}
        what = self.what
        if isinstance(what, PartitionView):
            assert what.state is not None   # the tally holds judged partitions with a state only
            return {**named, "leader": None if what.state.leader == NO_LEADER else what.state.leader,
                    "isr": list(what.state.isr), "replicas": list(what.replicas), "min_isr": what.min_isr}
        if isinstance(what, GroupState):
            return {**named, "type": what.group_type, "status": what.status,
                    "partitions": dict(what.partition_status)}
        if self.kind == "broker_down":
            return {**named, "fenced": bool(isinstance(what, BrokerState) and what.fenced)}
        return named


@dataclass(frozen=True)
class ClusterHealth:
    cluster: str
    summary: dict[str, Any]          # the controller, brokers, counts, groups not ok
    problems: list[Problem]


def cluster_health(model: ClusterModel) -> ClusterHealth:
    problems: list[Problem] = []
    summary: dict[str, Any] = {"cluster": model.name}
    kraft = any(r.source == "kraft" for r in model.live("broker")) or any(True for _ in model.live("quorum"))
    summary["mode"] = "kraft" if kraft else "zookeeper"

    summary["controller"] = None
    for record in model.live("controller"):
        c: ControllerState = record.state
        summary["controller"] = {"id": None if c.broker_id == NO_LEADER else c.broker_id, "epoch": c.epoch}
        if c.broker_id == NO_LEADER:
            problems.append(Problem(model.name, "no_controller", None, None, None, None, record.last_observed_ms))
    for record in model.live("quorum"):
        q: QuorumState = record.state
        summary["quorum"] = {"leader": None if q.leader_id == NO_LEADER else q.leader_id, "epoch": q.epoch,
                             "voters": sorted(v.replica_id for v in q.voters)}
        if q.leader_id == NO_LEADER:
            problems.append(Problem(model.name, "no_quorum_leader", None, None, None, None, record.last_observed_ms))

    holding = {b for topic in model.topics() for b, n in model.tally(HoldersTally, topic).replicas.items() if n}
    serving = model.serving
    fenced = sorted(b for b, s in model.registered.items() if s.fenced)
    down = sorted(holding - serving)
    summary["brokers"] = {"up": sorted(serving), "down": down, "fenced": fenced}
    for b in down:
        record = model.records.get(entity_key("broker", b))   # a tombstone when its registration went; None: never seen
        problems.append(Problem(model.name, "broker_down", b, None, None, None,
                                record.last_observed_ms if record else None, model.registered.get(b)))

    partitions = under = under_min = offline = 0
    for topic in model.topics():
        tally = model.tally(IsrTally, topic)
        partitions += tally.partitions
        under += tally.under
        under_min += tally.under_min
        offline += tally.offline
        records = model.records
        for n in sorted(tally.unhealthy):
            p = tally.unhealthy[n]
            kind = PARTITION_PROBLEMS[0] if p.offline else PARTITION_PROBLEMS[1] if p.under_min_isr \
                else PARTITION_PROBLEMS[2]
            record = records.get(entity_key("partition", topic, n))
            problems.append(Problem(model.name, kind, None, topic, n, None,
                                    record.last_observed_ms if record else None, p))
    summary["partitions"] = {"total": partitions, "under_replicated": under, "under_min_isr": under_min,
                             "offline": offline}

    not_ok = []
    groups = 0
    for record in sorted(model.live("group"), key=lambda r: r.entity):
        g: GroupState = record.state
        groups += 1
        if g.status is not None and g.status != OK:
            not_ok.append({"group": g.group, "type": g.group_type, "status": g.status})
            problems.append(Problem(model.name, "group_not_ok", None, None, None, g.group, record.last_observed_ms, g))
    summary["groups"] = {"total": groups, "not_ok": not_ok}
    return ClusterHealth(model.name, summary, problems)
