"""The event schema: the one contract between the collectors and the streaming app.

Events are state-carrying: each carries the full new state of one entity, so the
latest event per key is the entity's current state (the events topic is compacted).

Wire format: the Kafka message key is ``<cluster>/<entity>`` (so several clusters can
share one compacted topic); the value is UTF-8 JSON of :class:`Event`. A deleted entity
is an event with ``op="delete"`` followed by a tombstone (null value) on the same key.

Versioning: ``v`` is the schema version. Consumers accept every version they know
(``SUPPORTED_VERSIONS``) and count anything else as malformed.

This module is the schema alone; :mod:`kmon.codec` writes and checks it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Iterable, Literal, Mapping

SCHEMA_VERSION = 1
EVENTS_TOPIC = "kmon-events"   # the events topic unless a command is told another
SUPPORTED_VERSIONS = frozenset({1})

Source = Literal["zk", "kraft", "groups"]
Op = Literal["upsert", "delete", "marker"]


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a number field (in ``Annotated``); decode rejects a value outside them."""
    lo: int
    hi: int


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Kafka's ranges. Every int is bounded: an unbounded JSON number would overflow the float
# that a Prometheus sample is.
Int32 = Annotated[int, Range(0, INT32_MAX)]     # partitions, epochs, versions, counts
Int64 = Annotated[int, Range(0, INT64_MAX)]     # milliseconds since the epoch, zxids, offsets, lags
BrokerId = Int32
BrokerOrNone = Annotated[int, Range(-1, INT32_MAX)]   # -1: no broker
Port = Annotated[int, Range(0, 65535)]

MARKER_KINDS = frozenset({"snapshot_begin", "snapshot_end"})


class MalformedEvent(ValueError):
    """An event value that does not follow this schema; the message names what is wrong."""


@dataclass(frozen=True)
class ZnodeMeta:
    """Where a zk-sourced state came from; lets the stream order and de-duplicate."""
    path: str
    mzxid: Int64
    version: Int32
    mtime_ms: Int64
    # versions skipped since the previous event of this znode: ZooKeeper coalesced
    # that many updates into one notification (0 = none missed)
    version_gap: Int32 = 0


@dataclass(frozen=True)
class LogMeta:
    """Where a kraft-sourced state came from: its place in the metadata log, ``__cluster_metadata``."""
    offset: Int64                    # metadata offset of the newest record the state reflects
    epoch: Int32                     # raft epoch of that record's batch: the controller that wrote it
    append_ms: Int64 | None = None   # when that controller appended the batch


# ---------------------------------------------------------------- typed entity states

@dataclass(frozen=True)
class ControllerState:
    # KRaft: the quorum leader and its epoch (never what DescribeCluster/Metadata answer)
    broker_id: BrokerOrNone           # -1 when no controller is registered
    epoch: Int32 | None               # /controller_epoch, None if absent
    timestamp_ms: Int64 | None = None   # from the /controller registration
    kraft_controller_epoch: Int32 | None = None  # /controller v2 (migration), else None


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: Port
    protocol: str


@dataclass(frozen=True)
class BrokerState:
    broker_id: BrokerId
    host: str | None
    port: Annotated[int, Range(-1, 65535)] | None   # -1: no PLAINTEXT listener
    rack: str | None
    endpoints: tuple[Endpoint, ...] = ()
    jmx_port: Annotated[int, Range(-1, 65535)] = -1
    timestamp_ms: Int64 | None = None
    format_version: Int32 = 0
    # feature -> {"min_version": .., "max_version": ..}: KIP-584's int16 version levels
    features: Mapping[str, Mapping[str, Annotated[int, Range(0, 2**15 - 1)]]] = field(default_factory=dict)
    # KRaft only: a registered broker is fenced (not serving: no heartbeat within its session, or
    # just registered) or unfenced, and may be in a controlled shutdown
    fenced: bool = False
    in_controlled_shutdown: bool = False
    incarnation_id: str | None = None     # a new one each time the broker process starts
    broker_epoch: Int64 | None = None     # KRaft: the metadata offset of its registration
    # ZooKeeper mode: the creation zxid of its registration znode (ephemeral), so a new one each time
    # the broker registers (its process started, or its session expired): a registration made again
    # while kmon was not looking still differs from the last one kmon saw
    registration_zxid: Int64 | None = None


@dataclass(frozen=True)
class TopicState:
    topic: str
    topic_id: str | None
    replicas: Mapping[Int32, tuple[BrokerId, ...]]     # partition -> assigned replicas (preferred first)
    adding: Mapping[Int32, tuple[BrokerId, ...]] = field(default_factory=dict)    # under reassignment
    removing: Mapping[Int32, tuple[BrokerId, ...]] = field(default_factory=dict)
    config: Mapping[str, str] = field(default_factory=dict)               # /config/topics/<t>
    format_version: Int32 = 1


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: Int32
    leader: Annotated[int, Range(-2, INT32_MAX)]   # -1 = no leader, -2 = topic being deleted (ZK mode)
    leader_epoch: Int32
    isr: tuple[BrokerId, ...]
    controller_epoch: Int32
    leader_recovery_state: Annotated[int, Range(0, 1)] = 0   # 0 recovered, 1 recovering (KIP-704)
    format_version: Int32 = 1
    # The topic is queued for deletion (/admin/delete_topics/<t>): the controller now takes its
    # replicas offline one by one, which shrinks the ISR without any broker failing.
    deleting: bool = False
    # The replicas the partition keeps: its assignment less any a reassignment is removing (None:
    # not known). A broker that leaves the ISR and is not one of them is leaving the partition, as
    # the controller completes a move, not failing.
    remaining: tuple[BrokerId, ...] | None = None
    # KRaft only (None in ZooKeeper mode): KIP-966's eligible leader replicas, the partition epoch
    partition_epoch: Int32 | None = None
    elr: tuple[BrokerId, ...] | None = None
    last_known_elr: tuple[BrokerId, ...] | None = None


def remaining_replicas(replicas: tuple[BrokerId, ...], removing: tuple[BrokerId, ...]) -> tuple[BrokerId, ...]:
    """``PartitionState.remaining`` from a partition's assignment and the replicas a move is removing."""
    if not removing:   # nearly always: the generator cost a tenth of a KRaft record's fold (bench/NOTES.md)
        return replicas
    return tuple(b for b in replicas if b not in removing)


@dataclass(frozen=True)
class ReassignmentState:
    # "topic:partition" -> target replicas, while /admin/reassign_partitions exists
    partitions: Mapping[str, tuple[BrokerId, ...]]


@dataclass(frozen=True)
class PreferredElectionState:
    partitions: tuple[str, ...]      # "topic:partition"


@dataclass(frozen=True)
class TopicDeletionState:
    topic: str


@dataclass(frozen=True)
class IsrChangeState:
    partitions: tuple[str, ...]      # "topic:partition"


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None
    assignment: tuple[str, ...] = ()  # "topic:partition" (streams groups: "subtopology:partition" tasks)
    # the rebalance protocols of Kafka 4 (consumer KIP-848, share KIP-932, streams KIP-1071); None or
    # empty for a classic group's member
    # the target epoch it reconciled to; -1 leaving, -2 a static member away (LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    member_epoch: Annotated[int, Range(-2, INT32_MAX)] | None = None
    member_state: str | None = None    # Kafka's MemberState: STABLE, UNREVOKED_PARTITIONS, ...
    rack: str | None = None
    subscribed_topics: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    pending_revocation: tuple[str, ...] = ()   # partitions it still has to give up
    classic_protocol: bool = False     # a member of a consumer group that joined with the classic protocol


@dataclass(frozen=True)
class TopicLag:
    lag: Int64
    lag_seconds: Annotated[float, Range(0, INT64_MAX)] | None
    partitions: Mapping[Int32, Int64] = field(default_factory=dict)  # partition -> lag
    # how lag_seconds was had: the oldest unread record's own timestamp ("record"), or interpolated
    # from (end offset, time) samples where a partition's record could not be read ("interpolated")
    lag_seconds_method: Literal["record", "interpolated"] | None = None
    # the topic's retention.ms as its brokers apply it (-1: forever); None where unknown
    retention_ms: Annotated[int, Range(-1, INT64_MAX)] | None = None
    # per partition: the group's committed offset (share groups: the share-partition start offset) and the
    # partition's log start offset where it was read; records between the two were deleted unread
    committed: Mapping[Int32, Int64] = field(default_factory=dict)
    log_start: Mapping[Int32, Int64] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str                       # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead; Assigning,
                                     # Reconciling, NotReady (streams)
    generation: Annotated[int, Range(-1, INT32_MAX)]   # -1 when unknown
    protocol_type: str = ""
    protocol: str = ""               # chosen assignor
    leader: str | None = None
    members: tuple[GroupMember, ...] = ()
    coordinator: BrokerOrNone | None = None
    group_type: str = "classic"      # classic, consumer (KIP-848), share (KIP-932) or streams (KIP-1071)
    state_since_ms: Int64 | None = None
    lag: Mapping[str, TopicLag] = field(default_factory=dict)
    origin: Literal["admin", "offsets"] = "admin"   # a poll, or a __consumer_offsets record
    # the protocols of Kafka 4: the epoch of the target assignment the members reconcile to (behind
    # the group epoch, ``generation``, while Assigning), and how many members have not reconciled yet
    assignment_epoch: Annotated[int, Range(-1, INT32_MAX)] | None = None
    reconciling: Int32 = 0
    # its consumers judged from their offsets over a sliding window (collectors/groups/consumer_status.py):
    # ok, falling_behind, rewound, stopped, stalled; None: not judged (yet, or not by this event)
    status: str | None = None
    partition_status: Mapping[str, str] = field(default_factory=dict)   # "topic:partition" -> status, not ok


@dataclass(frozen=True)
class QuorumReplica:
    """A voter or observer of the KRaft metadata quorum, as the leader last described it."""
    replica_id: BrokerId
    log_end_offset: Annotated[int, Range(-1, INT64_MAX)]    # -1: unknown to the leader
    lag_records: Int64 = 0          # behind the high watermark
    lag_ms: Int64 = 0               # since it last caught up with the leader (0 while caught up)


@dataclass(frozen=True)
class QuorumState:
    """KRaft's metadata quorum (DescribeQuorum, and the metadata log's feature levels)."""
    leader_id: BrokerOrNone          # -1 while there is no leader
    epoch: Int32
    high_watermark: Annotated[int, Range(-1, INT64_MAX)]
    voters: tuple[QuorumReplica, ...] = ()
    observers: tuple[QuorumReplica, ...] = ()
    # finalized feature levels (FeatureLevelRecord), metadata.version among them
    features: Mapping[str, Annotated[int, Range(0, 2**15 - 1)]] = field(default_factory=dict)


@dataclass(frozen=True)
class SnapshotMarker:
    snapshot_id: str
    reason: str                      # start | reconnect | expired | buffer_overflow
    entities: Int64 = 0              # on snapshot_end: entities in the snapshot
    # on snapshot_end: observed_ms of its snapshot_begin, so a consumer of the compacted
    # topic that never saw the begin marker still knows what the snapshot covered
    begun_ms: Int64 | None = None


# kind -> the state its events carry; the comment says where it comes from and its entity id (entity_key)
STATE_TYPES: dict[str, type] = {
    "controller": ControllerState,                # /controller + /controller_epoch           controller
    "broker": BrokerState,                        # /brokers/ids/<id>                         broker:<id>
    "topic": TopicState,                          # /brokers/topics/<t> + /config/topics/<t>  topic:<t>
    "partition": PartitionState,                  # /brokers/topics/<t>/partitions/<p>/state  partition:<t>:<p>
    "reassignment": ReassignmentState,            # /admin/reassign_partitions                reassignment
    "preferred_election": PreferredElectionState,  # /admin/preferred_replica_election        preferred_election
    "topic_deletion": TopicDeletionState,         # /admin/delete_topics/<t>                  topic_deletion:<t>
    "isr_change": IsrChangeState,                 # /isr_change_notification/<seq>            isr_change:<seq>
    "group": GroupState,                          # a consumer group                          group:<g>
    "quorum": QuorumState,                        # KRaft: DescribeQuorum + feature levels    quorum
    "snapshot_begin": SnapshotMarker,             # resync markers                            snapshot:<source>
    "snapshot_end": SnapshotMarker,
}
KINDS = tuple(STATE_TYPES)


_KEY_PREFIXES = {kind: "snapshot" if kind in MARKER_KINDS else kind for kind in STATE_TYPES}


def snapshot_order(kind: str, parts: Iterable[object]) -> tuple[int, tuple[str, ...]]:
    """The one order of a snapshot's entities, whichever collector sends it: by kind as KINDS lists
    them, then by id, numbers numerically (partition 2 before partition 10)."""
    return KINDS.index(kind), tuple(f"{p:>12}" if isinstance(p, int) or str(p).isdigit() else str(p) for p in parts)


def entity_key(kind: str, *parts: object) -> str:
    """``controller``, ``broker:1``, ``partition:orders:3``, ``snapshot:zk`` ..."""
    key = _KEY_PREFIXES.get(kind)
    if key is None:
        raise ValueError(f"unknown event kind {kind!r}")
    for part in parts:   # faster than str.join of a list for the one or two parts a key has
        key = f"{key}:{part!s}"
    return key


# ---------------------------------------------------------------- the envelope

@dataclass(frozen=True)
class Event:
    cluster: str
    source: Source
    kind: str
    entity: str
    op: Op
    observed_ms: Int64
    data: Any                        # one of STATE_TYPES[kind]; None for deletes
    zxid: Int64 | None = None        # zk ordering key: newest zxid the state reflects
    znode: ZnodeMeta | None = None
    log: LogMeta | None = None       # kraft: its place in the metadata log (the ordering key: log.offset)
    snapshot_id: str | None = None   # set on events emitted as part of a resync snapshot
    # kraft without the controllers: a poll of the brokers' metadata, which may have missed changes
    # between two samples (no ordering key: samples arrive in the order they were taken)
    sampled: bool = False
    v: int = SCHEMA_VERSION

    @property
    def position(self) -> int | None:
        """The source's ordering key of the state: a zxid (zk) or a metadata offset (kraft)."""
        if self.zxid is not None:
            return self.zxid
        return self.log.offset if self.log is not None else None

    @property
    def message_key(self) -> str:
        return f"{self.cluster}/{self.entity}"
