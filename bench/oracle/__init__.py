"""The oracle: what really happened to a Kafka cluster's control plane, from the cluster's own durable
record, read with parsers of its documented formats (or Kafka's own tools), never from anything kmon
produced. The chaos soak (``python -m bench soak``) holds kmon's history up against it.

* :func:`bench.oracle.zookeeper.transitions`: ZooKeeper mode, from ZooKeeper's transaction log;
* :func:`bench.oracle.kraft.transitions`: KRaft, from a node's metadata log (``__cluster_metadata-0``);
* :func:`bench.oracle.groups.transitions`: consumer groups, from ``__consumer_offsets`` records.

Each gives :class:`OracleTransition` rows named as kmon names its history rows (kmon/history.py), one
per transition, in the order the source recorded them. What each kind means, and where the oracle's
meaning has to differ from kmon's, is in bench/oracle/README.md.
"""
from __future__ import annotations

from dataclasses import dataclass

from kmon.history import TRANSITION_KINDS


class MalformedLog(ValueError):
    """A log that does not follow its documented format; the message says where."""


class IncompleteLog(ValueError):
    """A log whose beginning (or a stretch of its middle) is gone: what happened there is unknown, so
    no transition after it can be told for sure. The soak keeps every log whole (no ZooKeeper autopurge,
    a long metadata retention); this says when it did not."""


@dataclass(frozen=True)
class OracleTransition:
    kind: str                  # one of kmon.history.TRANSITION_KINDS
    entity: str                # kmon's key of it: partition:<t>:<p>, broker:<id>, controller, topic:<t>, group:<g>
    # the source's order: a zxid (ZooKeeper), a metadata offset (KRaft), the record's index among those
    # given (groups)
    position: int
    time_ms: int | None        # when the source wrote it; None where its record carries no time
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None  # the broker it is about: left/joined, new leader, new controller (-1: none)
    group: str | None = None
    old: str | None = None
    new: str | None = None
    epoch: int | None = None   # leader epoch, controller epoch or raft epoch, as kmon's row has it
    generation: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in TRANSITION_KINDS:
            raise ValueError(f"not a kind of kmon's history: {self.kind!r}")
