"""KRaft: a Kafka cluster's true transitions, from a node's metadata log (``__cluster_metadata-0``), as
Kafka's DumpLogSegments decodes it (bench/oracle/kraft_dump.py). The records (Kafka's
metadata/src/main/resources/common/metadata/*.json) and what the oracle makes of them:

* LeaderChange (a raft control record): the quorum's leader from that offset on, in its batch's epoch:
  a controller_change whenever another node leads or the same one is elected again (a new epoch);
* RegisterBrokerRecord: broker_registered, also for a restarted broker (a new incarnation id);
  UnregisterBrokerRecord: broker_gone; BrokerRegistrationChangeRecord (and the older Fence/Unfence
  records): broker_fenced, broker_unfenced, broker_controlled_shutdown;
* TopicRecord, RemoveTopicRecord: topic_created, topic_deleted, by topic id (a name made again is a new topic);
* PartitionRecord, PartitionChangeRecord (merged as Kafka's PartitionRegistration.merge does): isr_shrink
  and isr_expand per broker (replica_removed instead of a shrink for a broker the record takes out of
  the replicas, or names as removing); leader_election, elr_leader_election (from the eligible leader replicas,
  outside the last ISR), unclean_leader_election (outside both, or the leader entering recovery); adding
  and removing replicas: reassignment_started and reassignment_finished; ClearElrRecord empties ELRs;
* Begin/End/AbortTransactionRecord: a metadata transaction's records take effect at its end, each at its
  own offset, and never when it is aborted (or not ended when the log ends).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from bench.oracle import OracleTransition
from bench.oracle.kraft_dump import MetadataRecord, dump, parse, segments
from bench.oracle.rules import (Assignment, At, PartitionVersion, broker_step, controller_change, partition_steps,
                                reassignment_steps, topic_step)
from kmon.toolchain import Toolchain

NO_LEADER_CHANGE = -2     # PartitionChangeRecord's Leader default
NO_RECOVERY_CHANGE = -1   # PartitionChangeRecord's LeaderRecoveryState default
RECOVERING = 1


def transitions(metadata_log_dir: Path, toolchain: Toolchain) -> list[OracleTransition]:
    """Every transition in a node's metadata log directory (``<metadata.log.dir>/__cluster_metadata-0``), in
    offset order. Raises IncompleteLog unless the log starts at offset 0 and has no gap."""
    return derive(parse(dump(segments(metadata_log_dir), toolchain)))


@dataclass(frozen=True)
class _Registration:
    incarnation: str
    epoch: int                 # the broker epoch: the offset of its registration
    fenced: bool
    controlled_shutdown: bool  # Kafka keeps it until the broker registers again


@dataclass(frozen=True)
class _Partition:
    version: PartitionVersion
    assignment: Assignment


def derive(records: Iterable[MetadataRecord]) -> list[OracleTransition]:
    """The transitions of ``records``, which start at the log's offset 0."""
    cluster = _Cluster()
    rows: list[OracleTransition] = []
    pending: list[MetadataRecord] | None = None   # the records of an open metadata transaction
    for r in records:
        if r.type == "BEGIN_TRANSACTION_RECORD":
            pending = []
        elif r.type in ("END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"):
            held, pending = pending or [], None
            if r.type == "END_TRANSACTION_RECORD":
                rows += [row for h in held for row in cluster.apply(h)]
        elif pending is not None and not r.control:
            pending.append(r)
        else:
            rows += cluster.apply(r)
    return rows


class _Cluster:
    """What the records said so far."""

    def __init__(self) -> None:
        self.controller: tuple[int, int] | None = None   # the quorum's leader and its epoch
        self.brokers: dict[int, _Registration] = {}
        self.topics: dict[str, str] = {}                  # topic id -> name
        self.partitions: dict[tuple[str, int], _Partition] = {}

    def apply(self, r: MetadataRecord) -> list[OracleTransition]:
        at, d = At(r.offset, r.time_ms), r.data
        match r.type:
            case "LeaderChange":
                return self._leader(d["leaderId"], r.epoch, at)
            case "REGISTER_BROKER_RECORD":
                return self._register(d, at)
            case "BROKER_REGISTRATION_CHANGE_RECORD":
                # int8 changes: fenced 1 / unfenced -1 / 0 none; in controlled shutdown 1 / 0 none
                fenced = {1: True, -1: False}.get(d.get("fenced", 0))
                return self._broker_change(d, fenced, d.get("inControlledShutdown", 0) == 1, at)
            case "FENCE_BROKER_RECORD" | "UNFENCE_BROKER_RECORD":
                return self._broker_change(d, r.type == "FENCE_BROKER_RECORD", False, at)
            case "UNREGISTER_BROKER_RECORD":
                gone = self.brokers.pop(d["brokerId"], None)
                return [] if gone is None else [broker_step("broker_gone", d["brokerId"], at)]
            case "TOPIC_RECORD":
                self.topics[d["topicId"]] = d["name"]
                return [topic_step("topic_created", d["name"], at)]
            case "REMOVE_TOPIC_RECORD":
                return self._remove_topic(d["topicId"], at)
            case "PARTITION_RECORD":
                return self._partition(d["topicId"], d["partitionId"], _registration(d), at)
            case "PARTITION_CHANGE_RECORD":
                old = self.partitions.get((d["topicId"], d["partitionId"]))
                return [] if old is None else self._partition(d["topicId"], d["partitionId"], _merge(old, d), at)
            case "CLEAR_ELR_RECORD":
                self._clear_elr(d.get("topicName", ""))
        return []

    def _leader(self, leader: int, epoch: int, at: At) -> list[OracleTransition]:
        before, self.controller = self.controller, (leader, epoch)
        if before is None or before == self.controller:   # the first leader the log names: a first sight
            return []
        return [controller_change(before[0], leader, epoch, at)]

    def _register(self, d: dict[str, Any], at: At) -> list[OracleTransition]:
        broker = d["brokerId"]
        before = self.brokers.get(broker)
        now = self.brokers[broker] = _Registration(d["incarnationId"], d["brokerEpoch"], d.get("fenced", True),
                                                   d.get("inControlledShutdown", False))
        if before is None or before.incarnation != now.incarnation:   # a new process of the broker
            return [broker_step("broker_registered", broker, at)]
        return _broker_steps(broker, before, now, at)

    def _broker_change(self, d: dict[str, Any], fenced: bool | None, shutting_down: bool,
                       at: At) -> list[OracleTransition]:
        broker, before = d["brokerId"], self.brokers.get(d["brokerId"])
        if before is None or before.epoch != d["brokerEpoch"]:   # of a registration replaced since (Kafka: refused)
            return []
        now = self.brokers[broker] = replace(before, fenced=before.fenced if fenced is None else fenced,
                                             controlled_shutdown=before.controlled_shutdown or shutting_down)
        return _broker_steps(broker, before, now, at)

    def _remove_topic(self, topic_id: str, at: At) -> list[OracleTransition]:
        name = self.topics.pop(topic_id, None)
        for key in [k for k in self.partitions if k[0] == topic_id]:   # its partitions go uncounted
            del self.partitions[key]
        return [] if name is None else [topic_step("topic_deleted", name, at)]

    def _partition(self, topic_id: str, p: int, new: _Partition, at: At) -> list[OracleTransition]:
        name = self.topics.get(topic_id)
        if name is None:   # of a topic removed already
            return []
        old, self.partitions[(topic_id, p)] = self.partitions.get((topic_id, p)), new
        if old is None:
            return []
        return (partition_steps(name, p, old.version, new.version, at, new.assignment.target())
                + reassignment_steps(name, p, old.assignment, new.assignment, at))

    def _clear_elr(self, topic: str) -> None:
        for (topic_id, p), part in self.partitions.items():
            if not topic or self.topics.get(topic_id) == topic:
                self.partitions[(topic_id, p)] = replace(part, version=replace(part.version, elr=()))


def _broker_steps(broker: int, before: _Registration, now: _Registration, at: At) -> list[OracleTransition]:
    steps = (("broker_controlled_shutdown", now.controlled_shutdown and not before.controlled_shutdown),
             ("broker_fenced", now.fenced and not before.fenced),
             ("broker_unfenced", before.fenced and not now.fenced))
    return [broker_step(kind, broker, at) for kind, happened in steps if happened]


def _registration(d: dict[str, Any]) -> _Partition:
    return _Partition(
        PartitionVersion(d["leader"], d["leaderEpoch"], tuple(d["isr"]), tuple(d.get("eligibleLeaderReplicas") or ()),
                         d.get("leaderRecoveryState", 0) == RECOVERING),
        Assignment(tuple(d["replicas"]), tuple(d.get("addingReplicas") or ()), tuple(d.get("removingReplicas") or ())))


def _merge(old: _Partition, d: dict[str, Any]) -> _Partition:
    """As Kafka's PartitionRegistration.merge: a field the record leaves out (or null) stays; a record
    naming a leader (even the same one) bumps the leader epoch."""
    def given(key: str, default: Any) -> Any:
        value = d.get(key)
        return default if value is None else tuple(value) if isinstance(value, list) else value

    v, a = old.version, old.assignment
    leader = given("leader", NO_LEADER_CHANGE)
    recovery = given("leaderRecoveryState", NO_RECOVERY_CHANGE)
    return _Partition(
        PartitionVersion(v.leader if leader == NO_LEADER_CHANGE else leader,
                         v.leader_epoch + (leader != NO_LEADER_CHANGE), given("isr", v.isr),
                         given("eligibleLeaderReplicas", v.elr),
                         v.recovering if recovery == NO_RECOVERY_CHANGE else recovery == RECOVERING),
        Assignment(given("replicas", a.replicas), given("addingReplicas", a.adding),
                   given("removingReplicas", a.removing)))
