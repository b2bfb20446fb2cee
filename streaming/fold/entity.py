"""Per-entity state of the streaming app: one EntityRecord per (cluster, entity) key.

Spark groups the events by key; the step (streaming/fold/entity_step.py) sorts a key's events by
offset and folds each with :func:`apply_event` into the record its state store keeps (as JSON,
see :func:`record_to_json`). Counters are absolute and live in the record, so re-applying
events that were already applied (a replay after a restart, a resync snapshot) never
counts a transition twice. An applied event's transitions are named once, as history rows
(streaming/fold/history.py); its counts are those rows, tallied by kmon.history.COUNTED.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, NamedTuple, NewType, TypeVar

from kmon.codec import from_plain, parse_json, to_json
from kmon.events import (MARKER_KINDS, STATE_TYPES, BrokerId, Event, GroupState, Int64, MalformedEvent, Source,
                         SnapshotMarker)
from kmon.history import COUNTED_BY_KIND, Transition, topic_key
from streaming.fold.history import rows

RESYNCS = "resyncs"   # a snapshot marker's counter: no transition of the cluster, no history row


K = TypeVar("K")

# the source label of what no collector can be named for: an unreadable event or stored record
UNKNOWN_SOURCE = "unknown"
# the cluster of a message key that is not kmon's (no "<cluster>/" in front)
UNKNOWN_CLUSTER = "unknown"


def cluster_of(key: str) -> str:
    """The cluster part of a message key; UNKNOWN_CLUSTER when the key is not kmon's."""
    cluster, sep, _ = key.partition("/")
    return cluster if sep and cluster else UNKNOWN_CLUSTER


class Applied(enum.StrEnum):
    """What apply_event did with an event (for the self-metrics)."""
    APPLIED = "applied"        # the record took the event's state
    DUPLICATE = "duplicate"    # already applied: same position, same marker, or an equal state
    STALE = "stale"            # older than the record (lower position / generation): ignored
    MALFORMED = "malformed"    # does not fit the record: kind/op mismatch, end marker without its begin


@dataclass(frozen=True)
class EntityRecord:
    """One entity's state and counters. Stored as itself in JSON (record_to_json), its fields
    typed like an event's, so a stored record is validated as strictly as an event."""
    cluster: str
    entity: str
    kind: str                  # for snapshot:<source>, the kind of the latest marker
    source: Source
    state: Any                 # STATE_TYPES[kind]; None when deleted
    # newest position applied (Event.position: a zxid or a metadata offset; kept on a tombstone
    # against resurrection)
    position: Int64 | None
    counters: Mapping[str, Int64] = field(default_factory=dict)
    last_observed_ms: Int64 = 0
    # groups: when the current group state began; snapshot:<source>: when the last
    # completed snapshot began
    state_since_ms: Int64 | None = None
    deleted: bool = False
    # entities: the last resync snapshot that contained them;
    # snapshot:<source>: the last snapshot that completed
    snapshot_id: str | None = None
    # name -> broker id -> count: a partition's ISR shrinks and expands, per broker that left or joined
    broker_counters: Mapping[str, Mapping[BrokerId, Int64]] = field(default_factory=dict)


class Folded(NamedTuple):
    """What apply_event made of one event."""
    record: EntityRecord | None
    applied: Applied
    transitions: tuple[Transition, ...] = ()   # what it counted and the history tells, in order


def apply_event(record: EntityRecord | None, event: Event) -> Folded:
    """Fold one event into its key's record; returns the new record, what happened, and the
    transitions it counted (the history rows)."""
    if not _fits(record, event):
        return Folded(record, Applied.MALFORMED)
    if event.kind in MARKER_KINDS:
        return Folded(*_apply_marker(record, event))
    position = event.position
    if record is not None and record.position is not None and position is not None:
        # Only an older event is ignored. An upsert at the record's zxid is a re-read when its
        # state is the record's (_upsert finds it a duplicate); with another state it is newer:
        # an entity of several znodes (/controller + /controller_epoch) read one part before and
        # one after a multi-op that wrote both at one zxid (Kafka's controller election) was
        # half stale, and the read that follows it carries the same zxid. A delete at that zxid
        # removes the state it was read with.
        if position < record.position:
            return Folded(_touch(record, event), Applied.STALE)
    if event.op == "delete":
        return _delete(record, event)
    return _upsert(record, event)


def _fits(record: EntityRecord | None, event: Event) -> bool:
    marker = event.kind in MARKER_KINDS
    if (event.op == "marker") != marker:
        return False
    if event.op != "delete" and not isinstance(event.data, STATE_TYPES[event.kind]):
        return False
    if record is None:
        return True
    same_kind = record.kind == event.kind or (marker and record.kind in MARKER_KINDS)
    return same_kind and (record.cluster, record.entity) == (event.cluster, event.entity)


def _empty(event: Event) -> EntityRecord:
    return EntityRecord(cluster=event.cluster, entity=event.entity, kind=event.kind,
                        source=event.source, state=None, position=None,
                        last_observed_ms=event.observed_ms)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _touch(record: EntityRecord, event: Event, **changes: Any) -> EntityRecord:
    """Bookkeeping of a seen event: ordering key, time, and the snapshot it was part of
    (also for ignored events, so a resync does not sweep an entity it re-read); plus
    ``changes``, in the same copy (the fold's hot path: ``dataclasses.replace`` scans the
    fields at every call; a record's ``__dict__`` is its fields)."""
    copy = object.__new__(EntityRecord)   # filled as the fast decoder does: the frozen __init__ sets field by field
    copy.__dict__.update(record.__dict__, position=_max(record.position, event.position),
                         last_observed_ms=max(record.last_observed_ms, event.observed_ms),
                         snapshot_id=event.snapshot_id or record.snapshot_id, **changes)
    return copy


def _delete(record: EntityRecord | None, event: Event) -> Folded:
    if record is not None and record.deleted:
        return Folded(_touch(record, event), Applied.DUPLICATE)
    # The tombstone keeps the position so an older replayed upsert cannot resurrect the
    # entity; the counters go with the entity.
    told = rows(record.state if record is not None else None, None, event, first_sight=record is None)
    return Folded(_touch(record or _empty(event), event, state=None, counters={}, broker_counters={},
                         state_since_ms=None, deleted=True), Applied.APPLIED, told)


def _upsert(record: EntityRecord | None, event: Event) -> Folded:
    live = record if record is not None and not record.deleted else None  # a revival starts afresh
    prev = live.state if live is not None else None
    told_prev = prev   # what the history compares with, even when the counting starts afresh
    new = event.data
    if isinstance(new, GroupState) and isinstance(prev, GroupState):
        if _moved_protocol(prev, new):   # one group throughout: Kafka's epochs go on from its generations
            new = _merge_group(prev, new)
        elif 0 <= new.generation < prev.generation and _recreated(prev, new, live):
            # its generations restart, as after a delete
            live = prev = None
        elif 0 <= new.generation < prev.generation:
            return Folded(_touch(live, event), Applied.STALE)
        else:
            new = _merge_group(prev, new)
    if live is not None and prev == new:
        return Folded(_touch(live, event), Applied.DUPLICATE)
    told = rows(told_prev, new, event, first_sight=record is None)
    increments, per_broker = _tally(told)
    counters = _add(live.counters if live is not None else {}, increments)
    broker_counters = live.broker_counters if live is not None else {}
    if per_broker:
        broker_counters = {**broker_counters, **{name: _add(broker_counters.get(name, {}), by_broker)
                                                 for name, by_broker in per_broker.items()}}
    return Folded(_touch(record or _empty(event), event, kind=event.kind, source=event.source, state=new,
                         counters=counters, broker_counters=broker_counters,
                         state_since_ms=_state_since(prev, new, live, event), deleted=False),
                  Applied.APPLIED, told)


def _recreated(prev: GroupState, new: GroupState, live: EntityRecord) -> bool:
    """A lower generation is a new group of the same name, not a stale record, when the
    old one was Dead or the new state began (by the coordinator's clock) after the known
    one: deleted and recreated while the collector did not see the delete."""
    if prev.state == "Dead":
        return True
    return (new.state_since_ms is not None and live.state_since_ms is not None
            and new.state_since_ms > live.state_since_ms)


def _moved_protocol(prev: GroupState, new: GroupState) -> bool:
    """Upgraded from the classic protocol to the consumer protocol (KIP-848), or downgraded back, as
    its __consumer_offsets records say: never stale, whatever its epoch."""
    return new.origin == "offsets" and new.group_type != prev.group_type


def _merge_group(prev: GroupState, new: GroupState) -> GroupState:
    """Keep what the new event does not know: the Admin API has no generation (-1),
    and a __consumer_offsets record measures no lag and judges no offsets."""
    generation = prev.generation if new.generation < 0 else new.generation
    lag = prev.lag if new.origin == "offsets" and not new.lag else new.lag
    judged = new if new.status is not None else prev
    return replace(new, generation=generation, lag=lag, status=judged.status, partition_status=judged.partition_status)


def _state_since(prev: Any, new: Any, live: EntityRecord | None, event: Event) -> int | None:
    if not isinstance(new, GroupState):
        return None
    if new.state_since_ms is not None:
        return new.state_since_ms
    if live is not None and isinstance(prev, GroupState) and prev.state == new.state:
        return live.state_since_ms
    return event.observed_ms


def _tally(told: tuple[Transition, ...]) -> tuple[dict[str, int], dict[str, dict[int, int]]]:
    """What the transitions add to the entity's counters, and to its per-broker counters."""
    counts: dict[str, int] = {}
    per_broker: dict[str, dict[int, int]] = {}
    for row in told:
        for counted in COUNTED_BY_KIND.get(row.kind, ()):
            n = counted.of(row)
            if counted.per_broker:
                by_broker = per_broker.setdefault(counted.key, {})
                by_broker[row.broker] = by_broker.get(row.broker, 0) + n
            else:
                key = topic_key(counted.key, row.topic) if counted.per_topic and row.topic else counted.key
                counts[key] = counts.get(key, 0) + n
    return counts, per_broker


def _add(counters: Mapping[K, int], increments: Mapping[K, int]) -> dict[K, int]:
    out = dict(counters)
    for key, n in increments.items():
        if n:
            out[key] = out.get(key, 0) + n
    return out


def _apply_marker(record: EntityRecord | None, event: Event) -> tuple[EntityRecord | None, Applied]:
    """snapshot:<source> keeps the latest marker, and the last completed snapshot with
    when it began: what the views need to sweep entities deleted while the collector was
    blind (see streaming.views)."""
    marker: SnapshotMarker = event.data
    in_progress = record is not None and record.kind == "snapshot_begin"
    begun_here = in_progress and record.state.snapshot_id == marker.snapshot_id
    if record is not None and (record.snapshot_id == marker.snapshot_id
                               or (event.kind == "snapshot_begin" and begun_here)):
        return record, Applied.DUPLICATE
    if event.kind == "snapshot_begin":
        base = record or _empty(event)
        return replace(base, kind=event.kind, source=event.source, state=marker,
                       last_observed_ms=event.observed_ms), Applied.APPLIED
    if begun_here:
        begun = record.last_observed_ms
    elif marker.begun_ms is not None:  # the begin marker was compacted away or never seen
        begun = marker.begun_ms
    else:
        # Without its start the snapshot's coverage is unknown, and sweeping on a guess
        # could hide live entities.
        return record, Applied.MALFORMED
    base = record or _empty(event)
    return replace(base, kind=event.kind, state=marker, snapshot_id=marker.snapshot_id,
                   state_since_ms=begun, last_observed_ms=event.observed_ms,
                   counters=_add(base.counters, {RESYNCS: 1})), Applied.APPLIED


# ---------------------------------------------------------------- state-store form

# A record as record_to_json wrote it: what the state store, the sink's record column and the
# record log hold.
RecordJson = NewType("RecordJson", str)


def record_to_json(record: EntityRecord) -> RecordJson:
    """The record as the state store and the record log hold it: its fields as JSON."""
    return RecordJson(to_json(record))


def record_from_json(text: str, trusted: bool = False) -> EntityRecord:
    """Inverse of record_to_json; raises kmon.events.MalformedEvent, and nothing else, on a
    corrupt record or one that a laxer version of kmon let in. ``trusted``: written by this
    kmon from a record it checked (kmon.codec.from_plain's ``trusted``)."""
    doc = parse_json(text)
    kind = doc.get("kind") if type(doc) is dict else None
    if type(kind) is not str or kind not in STATE_TYPES:
        raise MalformedEvent(f"a stored record of unknown kind {kind!r:.80}")
    if doc.get("deleted") is not True:
        doc["state"] = from_plain(STATE_TYPES[kind], doc.get("state"), trusted)
    elif doc.get("state") is not None:
        raise MalformedEvent("a stored record of a deleted entity with a state")
    return from_plain(EntityRecord, doc, trusted)

