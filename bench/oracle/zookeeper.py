"""ZooKeeper mode: a Kafka cluster's true transitions, from ZooKeeper's transaction log.

Kafka (2.x-3.9, kafka.zk.ZkData) keeps its control plane in these znodes, below an optional chroot:

* ``/controller`` (``{"brokerid": 1, "timestamp": "..."}``, ephemeral) and ``/controller_epoch`` ("N"):
  a controller_change whenever another broker holds it, or none does (-1);
* ``/brokers/ids/<id>`` (ephemeral): broker_registered when created, broker_gone when deleted (a
  closed or expired session deletes it);
* ``/brokers/topics/<t>``: topic_created, topic_deleted; its ``adding_replicas``/``removing_replicas``:
  reassignment_started when a partition begins moving, reassignment_finished when it stops;
* ``/brokers/topics/<t>/partitions/<p>/state`` (``{"leader", "leader_epoch", "isr", ...}``), every
  version: isr_shrink and isr_expand per broker (replica_removed instead of a shrink for a broker the
  assignment written last is removing, or no longer names), and leader_election or
  unclean_leader_election when a broker becomes leader (from outside the last ISR: unclean);
* ``/admin/delete_topics/<t>``: while it exists the controller takes the topic's replicas offline one
  by one, on purpose: those versions count nothing (as kmon).

Every version of every znode is in the log, so the oracle judges each against the one just before.
A version whose data does not parse is not Kafka's: the last one that did stands (as kmon).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable

from bench.oracle import OracleTransition
from bench.oracle.rules import (NO_LEADER, Assignment, At, PartitionVersion, broker_step, controller_change,
                                partition_steps, reassignment_steps, topic_step)
from bench.oracle.zk_tree import ZnodeChange, changes, versions
from bench.oracle.zk_txnlog import Txn, read_logs


def transitions(data_dir: Path, chroot: str = "") -> list[OracleTransition]:
    """Every transition in ZooKeeper's ``data_dir`` (its dataDir, or dataLogDir: the one holding
    ``version-2/log.*``), in zxid order. Raises IncompleteLog unless its logs start at its first transaction."""
    return derive(read_logs(data_dir), chroot)


def znode_versions(data_dir: Path, chroot: str = "") -> dict[str, int]:
    """Each znode below the chroot (absolute path) -> how many versions it had: created, and each write
    of its data. ZooKeeper may apply several between two watch notifications; a watcher that saw fewer
    skipped the rest (kmon counts them in ZnodeMeta.version_gap)."""
    prefix = _root(chroot) + "/"
    return {path: n for path, n in versions(read_logs(data_dir)).items() if path.startswith(prefix)}


def derive(txns: Iterable[Txn], chroot: str = "") -> list[OracleTransition]:
    """The transitions of ``txns``, which start with ZooKeeper's first (an empty tree)."""
    cluster = _Cluster(_root(chroot))
    return [row for txn, touched in changes(txns) for row in cluster.apply(txn, touched)]


def _root(chroot: str) -> str:
    root = chroot.rstrip("/")
    if root and not root.startswith("/"):
        raise ValueError(f"a chroot is an absolute ZooKeeper path, not {chroot!r}")
    return root


Controller = tuple[int, str | None]   # the broker holding /controller (-1: none), its registration's timestamp


class _Cluster:
    """What the znodes said so far."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.controller: Controller = (NO_LEADER, None)
        self.controller_epoch: int | None = None
        self.partitions: dict[tuple[str, int], PartitionVersion] = {}
        self.assignments: dict[str, dict[int, Assignment]] = {}   # topic -> partition -> its replicas
        self.deleting: set[str] = set()

    def apply(self, txn: Txn, touched: list[ZnodeChange]) -> list[OracleTransition]:
        at = At(txn.zxid, txn.time_ms)
        before = self.controller
        rows = [row for change in touched for row in self._change(change, at)]
        # a new controller's registration and its epoch's increment are one multi: one change
        if _controller_changed(before, self.controller):
            rows.append(controller_change(before[0], self.controller[0], self.controller_epoch, at))
        return rows

    def _change(self, c: ZnodeChange, at: At) -> list[OracleTransition]:
        match self._segments(c.path):
            case ["controller"]:
                self.controller = (_controller(c.data) or self.controller) if c.exists else (NO_LEADER, None)
            case ["controller_epoch"]:
                self.controller_epoch = _epoch(c.data) if c.exists else None
            case ["brokers", "ids", broker] if broker.isdigit():
                return _came_or_went(c, broker_step, int(broker), at, "broker_registered", "broker_gone")
            case ["brokers", "topics", topic]:
                return self._topic(topic, c, at)
            case ["brokers", "topics", topic, "partitions", partition, "state"] if partition.isdigit():
                return self._partition(topic, int(partition), c, at)
            case ["admin", "delete_topics", topic]:
                (self.deleting.add if c.exists else self.deleting.discard)(topic)
        return []

    def _segments(self, path: str) -> list[str]:
        return path[len(self.root) + 1:].split("/") if path.startswith(self.root + "/") else []

    def _topic(self, topic: str, c: ZnodeChange, at: At) -> list[OracleTransition]:
        if not c.exists or c.created:
            self.assignments.pop(topic, None)
            rows = _came_or_went(c, topic_step, topic, at, "topic_created", "topic_deleted")
            if c.exists:
                self.assignments[topic] = _assignment(c.data) or {}
            return rows
        new = _assignment(c.data)
        if new is None:
            return []
        old, self.assignments[topic] = self.assignments.get(topic, {}), new
        return [row for p in sorted(old.keys() | new.keys())
                for row in reassignment_steps(topic, p, old.get(p, Assignment(())), new.get(p, Assignment(())), at)]

    def _partition(self, topic: str, partition: int, c: ZnodeChange, at: At) -> list[OracleTransition]:
        key = (topic, partition)
        if not c.exists:   # a partition created again starts afresh
            self.partitions.pop(key, None)
            return []
        new = _partition_version(c.data)
        if new is None:
            return []
        prev, self.partitions[key] = self.partitions.get(key), new
        if prev is None or topic in self.deleting:
            return []
        # the controller takes a move's removing replicas out of the ISR before it writes the new
        # assignment: the one written last still names them
        assignment = self.assignments.get(topic, {}).get(partition)
        return partition_steps(topic, partition, prev, new, at, assignment.target() if assignment else None)


def _came_or_went(c: ZnodeChange, step: Callable[[str, Any, At], OracleTransition], about: Any, at: At, came: str,
                  went: str) -> list[OracleTransition]:
    if c.created:
        return [step(came, about, at)]
    return [] if c.exists else [step(went, about, at)]


def _controller_changed(before: Controller, after: Controller) -> bool:
    """Another broker (or none); or the same broker registered anew (kmon: a new registration timestamp)."""
    if before[0] != after[0]:
        return True
    return after[0] != NO_LEADER and None not in (before[1], after[1]) and before[1] != after[1]


def _document(data: bytes | None) -> dict[str, Any] | None:
    try:
        doc = json.loads(data or b"")
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _brokers(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or any(_number(b) is None for b in value):
        return None
    return tuple(value)


def _controller(data: bytes | None) -> Controller | None:
    doc = _document(data) or {}
    broker = _number(doc.get("brokerid"))
    return None if broker is None else (broker, None if doc.get("timestamp") is None else str(doc["timestamp"]))


def _epoch(data: bytes | None) -> int | None:
    text = (data or b"").decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _partition_version(data: bytes | None) -> PartitionVersion | None:
    doc = _document(data) or {}
    leader, epoch, isr = _number(doc.get("leader")), _number(doc.get("leader_epoch")), _brokers(doc.get("isr"))
    return None if leader is None or epoch is None or isr is None else PartitionVersion(leader, epoch, isr)


def _assignment(data: bytes | None) -> dict[int, Assignment] | None:
    """``{"partitions": {"0": [1, 2]}, "adding_replicas": {...}, "removing_replicas": {...}}``."""
    doc = _document(data)
    if doc is None:
        return None
    replicas, adding, removing = (_partition_map(doc.get(key, {}))
                                  for key in ("partitions", "adding_replicas", "removing_replicas"))
    if replicas is None or adding is None or removing is None:
        return None
    return {p: Assignment(r, adding.get(p, ()), removing.get(p, ())) for p, r in replicas.items()}


def _partition_map(value: Any) -> dict[int, tuple[int, ...]] | None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and k.isdigit() for k in value):
        return None
    out = {int(k): _brokers(v) for k, v in value.items()}
    return None if any(v is None for v in out.values()) else out  # type: ignore[return-value]
