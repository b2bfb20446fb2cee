"""The event schema: the one contract between the collectors and the streaming app.

Events are state-carrying: each carries the full new state of one entity, so the
latest event per key is the entity's current state (the events topic is compacted).

Wire format: the Kafka message key is ``<cluster>/<entity>`` (so several clusters can
share one compacted topic); the value is UTF-8 JSON of :class:`Event`. A deleted entity
is an event with ``op="delete"`` followed by a tombstone (null value) on the same key.

Versioning: ``v`` is the schema version. Consumers accept every version they know
(``SUPPORTED_VERSIONS``) and count anything else as malformed.
"""
from __future__ import annotations

import functools
import json
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Mapping

SCHEMA_VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})

Source = Literal["zk", "groups"]
Op = Literal["upsert", "delete", "marker"]

# kind -> how its entity id is built (see entity_key)
KINDS = (
    "controller",            # /controller + /controller_epoch           entity: controller
    "broker",                # /brokers/ids/<id>                         entity: broker:<id>
    "topic",                 # /brokers/topics/<t> + /config/topics/<t>  entity: topic:<t>
    "partition",             # /brokers/topics/<t>/partitions/<p>/state  entity: partition:<t>:<p>
    "reassignment",          # /admin/reassign_partitions                entity: reassignment
    "preferred_election",    # /admin/preferred_replica_election         entity: preferred_election
    "topic_deletion",        # /admin/delete_topics/<t>                  entity: topic_deletion:<t>
    "isr_change",            # /isr_change_notification/<seq>            entity: isr_change:<seq>
    "group",                 # consumer group                            entity: group:<g>
    "snapshot_begin",        # resync markers                            entity: snapshot:<source>
    "snapshot_end",
)
MARKER_KINDS = frozenset({"snapshot_begin", "snapshot_end"})


class MalformedEvent(ValueError):
    """An event value that does not follow this schema; the message names what is wrong."""


@dataclass(frozen=True)
class ZnodeMeta:
    """Where a zk-sourced state came from; lets the stream order and de-duplicate."""
    path: str
    mzxid: int
    version: int
    mtime_ms: int
    # versions skipped since the previous event of this znode: ZooKeeper coalesced
    # that many updates into one notification (0 = none missed)
    version_gap: int = 0


# ---------------------------------------------------------------- typed entity states

@dataclass(frozen=True)
class ControllerState:
    broker_id: int                    # -1 when no controller is registered
    epoch: int | None                 # /controller_epoch, None if absent
    timestamp_ms: int | None = None   # from the /controller registration
    kraft_controller_epoch: int | None = None  # /controller v2 (migration), else None


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int
    protocol: str


@dataclass(frozen=True)
class BrokerState:
    broker_id: int
    host: str | None
    port: int | None
    rack: str | None
    endpoints: tuple[Endpoint, ...] = ()
    jmx_port: int = -1
    timestamp_ms: int | None = None
    format_version: int = 0
    features: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicState:
    topic: str
    topic_id: str | None
    replicas: Mapping[int, tuple[int, ...]]            # partition -> assigned replicas (preferred first)
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)    # under reassignment
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    config: Mapping[str, str] = field(default_factory=dict)               # /config/topics/<t>
    format_version: int = 1


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int                      # -1 = no leader, -2 = topic being deleted (ZK mode)
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0   # 0 recovered, 1 recovering (KIP-704)
    format_version: int = 1


@dataclass(frozen=True)
class ReassignmentState:
    # "topic:partition" -> target replicas, while /admin/reassign_partitions exists
    partitions: Mapping[str, tuple[int, ...]]


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
    assignment: tuple[str, ...] = ()  # "topic:partition"


@dataclass(frozen=True)
class TopicLag:
    lag: int
    lag_seconds: float | None
    partitions: Mapping[int, int] = field(default_factory=dict)  # partition -> lag


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str                       # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead, ...
    generation: int                  # -1 when unknown
    protocol_type: str = ""
    protocol: str = ""               # chosen assignor
    leader: str | None = None
    members: tuple[GroupMember, ...] = ()
    coordinator: int | None = None
    group_type: str = "classic"
    state_since_ms: int | None = None
    lag: Mapping[str, TopicLag] = field(default_factory=dict)
    origin: str = "admin"            # "admin" (poll) or "offsets" (__consumer_offsets record)


@dataclass(frozen=True)
class SnapshotMarker:
    snapshot_id: str
    reason: str                      # start | reconnect | expired | buffer_overflow
    entities: int = 0                # on snapshot_end: entities in the snapshot
    # on snapshot_end: observed_ms of its snapshot_begin, so a consumer of the compacted
    # topic that never saw the begin marker still knows what the snapshot covered
    begun_ms: int | None = None


STATE_TYPES: dict[str, type] = {
    "controller": ControllerState,
    "broker": BrokerState,
    "topic": TopicState,
    "partition": PartitionState,
    "reassignment": ReassignmentState,
    "preferred_election": PreferredElectionState,
    "topic_deletion": TopicDeletionState,
    "isr_change": IsrChangeState,
    "group": GroupState,
    "snapshot_begin": SnapshotMarker,
    "snapshot_end": SnapshotMarker,
}


def entity_key(kind: str, *parts: object) -> str:
    """``controller``, ``broker:1``, ``partition:orders:3``, ``snapshot:zk`` ..."""
    if kind not in STATE_TYPES:
        raise ValueError(f"unknown event kind {kind!r}")
    prefix = "snapshot" if kind in MARKER_KINDS else kind
    return ":".join([prefix, *map(str, parts)])


# ---------------------------------------------------------------- the envelope

@dataclass(frozen=True)
class Event:
    cluster: str
    source: str
    kind: str
    entity: str
    op: str
    observed_ms: int
    data: Any                        # one of STATE_TYPES[kind]; None for deletes
    zxid: int | None = None          # zk ordering key: newest zxid the state reflects
    znode: ZnodeMeta | None = None
    snapshot_id: str | None = None   # set on events emitted as part of a resync snapshot
    v: int = SCHEMA_VERSION

    @property
    def message_key(self) -> str:
        return f"{self.cluster}/{self.entity}"


def encode(event: Event) -> bytes:
    return json.dumps(plain(event), separators=(",", ":"), sort_keys=True).encode()


def plain(value: Any) -> Any:
    """``dataclasses.asdict`` without its deep copies (events are immutable): a snapshot of a
    100k-partition tree spent a quarter of its time copying in ``asdict``."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, _SCALARS) else plain(v) for v in value]
    if isinstance(value, dict):
        return {k: v if isinstance(v, _SCALARS) else plain(v) for k, v in value.items()}
    return {f.name: v if isinstance(v := getattr(value, f.name), _SCALARS) else plain(v)
            for f in fields(value)}   # TypeError if not a dataclass


_SCALARS = (str, int, float, bool, type(None))


def decode(value: bytes | str) -> Event:
    """Parse and validate one event value; raises MalformedEvent naming the problem."""
    try:
        doc = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MalformedEvent(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise MalformedEvent(f"expected a JSON object, got {type(doc).__name__}")
    v = doc.get("v")
    if v not in SUPPORTED_VERSIONS:
        raise MalformedEvent(f"unsupported schema version v={v!r}")
    try:
        kind = _req(doc, "kind", str)
        if kind not in STATE_TYPES:
            raise MalformedEvent(f"unknown kind {kind!r}")
        op = _req(doc, "op", str)
        if op not in ("upsert", "delete", "marker"):
            raise MalformedEvent(f"unknown op {op!r}")
        raw = doc.get("data")
        if op == "delete":
            data = None
        else:
            if not isinstance(raw, dict):
                raise MalformedEvent(f"{kind} event without a data object")
            data = _build(STATE_TYPES[kind], raw)
        zn = doc.get("znode")
        return Event(
            cluster=_req(doc, "cluster", str),
            source=_req(doc, "source", str),
            kind=kind,
            entity=_req(doc, "entity", str),
            op=op,
            observed_ms=_req(doc, "observed_ms", int),
            data=data,
            zxid=_opt(doc, "zxid", int),
            znode=_build(ZnodeMeta, zn) if isinstance(zn, dict) else None,
            snapshot_id=_opt(doc, "snapshot_id", str),
            v=v,
        )
    except (TypeError, KeyError, ValueError) as e:
        if isinstance(e, MalformedEvent):
            raise
        raise MalformedEvent(str(e)) from None


def _req(doc: Mapping[str, Any], name: str, typ: type) -> Any:
    if name not in doc:
        raise MalformedEvent(f"missing field {name!r}")
    val = doc[name]
    if not isinstance(val, typ) or isinstance(val, bool):
        raise MalformedEvent(f"field {name!r} should be {typ.__name__}, got {val!r}")
    return val


def _opt(doc: Mapping[str, Any], name: str, typ: type) -> Any:
    return None if doc.get(name) is None else _req(doc, name, typ)


# Nested fields that are themselves dataclasses or need int keys after a JSON round trip.
_NESTED: dict[tuple[type, str], Any] = {
    (BrokerState, "endpoints"): lambda v: tuple(_build(Endpoint, e) for e in v),
    (TopicState, "replicas"): lambda v: {int(k): tuple(r) for k, r in v.items()},
    (TopicState, "adding"): lambda v: {int(k): tuple(r) for k, r in v.items()},
    (TopicState, "removing"): lambda v: {int(k): tuple(r) for k, r in v.items()},
    (PartitionState, "isr"): tuple,
    (ReassignmentState, "partitions"): lambda v: {k: tuple(r) for k, r in v.items()},
    (PreferredElectionState, "partitions"): tuple,
    (IsrChangeState, "partitions"): tuple,
    (GroupMember, "assignment"): tuple,
    (GroupState, "members"): lambda v: tuple(_build(GroupMember, m) for m in v),
    (GroupState, "lag"): lambda v: {t: _build(TopicLag, x) for t, x in v.items()},
    (TopicLag, "partitions"): lambda v: {int(k): int(x) for k, x in v.items()},
}


def _build(cls: type, raw: Mapping[str, Any]) -> Any:
    if not isinstance(raw, Mapping):
        raise MalformedEvent(f"{cls.__name__}: expected an object, got {raw!r}")
    names = cls.__dataclass_fields__
    unknown = set(raw) - set(names)
    if unknown:
        raise MalformedEvent(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    args = {}
    scalar_types = _scalar_types(cls)
    for name, value in raw.items():
        allowed = scalar_types.get(name)
        if allowed and not (isinstance(value, allowed) and not isinstance(value, bool)):
            raise MalformedEvent(f"{cls.__name__}.{name} should be "
                                 f"{' or '.join(t.__name__ for t in allowed)}, got {value!r}")
        conv = _NESTED.get((cls, name))
        args[name] = conv(value) if conv is not None and value is not None else value
    try:
        return cls(**args)
    except TypeError as e:  # missing required fields
        raise MalformedEvent(f"{cls.__name__}: {e}") from None


@functools.cache
def _scalar_types(cls: type) -> dict[str, tuple[type, ...]]:
    """Field -> accepted JSON scalar types, for fields typed int/str/float (optionally | None)."""
    out = {}
    for name, hint in typing.get_type_hints(cls).items():
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        args = typing.get_args(hint) if union else (hint,)
        if all(a in (int, str, float, type(None)) for a in args):
            out[name] = tuple(int if a is int else a for a in args) + ((int,) if float in args else ())
    return out


def json_schema() -> dict[str, Any]:
    """JSON Schema of the envelope (the per-kind ``data`` shapes are the dataclasses above)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kmon event",
        "type": "object",
        "required": ["v", "cluster", "source", "kind", "entity", "op", "observed_ms"],
        "properties": {
            "v": {"enum": sorted(SUPPORTED_VERSIONS)},
            "cluster": {"type": "string"},
            "source": {"enum": ["zk", "groups"]},
            "kind": {"enum": list(KINDS)},
            "entity": {"type": "string"},
            "op": {"enum": ["upsert", "delete", "marker"]},
            "observed_ms": {"type": "integer"},
            "zxid": {"type": ["integer", "null"]},
            "snapshot_id": {"type": ["string", "null"]},
            "znode": {"type": ["object", "null"],
                      "required": ["path", "mzxid", "version", "mtime_ms"]},
            "data": {"type": ["object", "null"]},
        },
    }
