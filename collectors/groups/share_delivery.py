"""How far each share-partition's delivery has come (KIP-932), as the share coordinator keeps it in
``__share_group_state``: folded in each partition's offset order (one share-partition's records
all live in one partition of that topic). Pure.

A share-partition's state is its start offset (every offset below it is done: acknowledged or
archived) and batches of offsets at or above it with their delivery state. The start offset is
moved up lazily, so offsets acknowledged since are in the batches: what is done is the start
offset, then every batch from it on, without a gap, that is acknowledged or archived
(:func:`delivered_to`). The rules, after ShareCoordinatorShard's replay (4.0-4.3):

* A ShareSnapshot is the whole state: it replaces the one held.
* A ShareUpdate applies on top: its start offset replaces the held one unless it is -1 ("not
  updated"); its batches replace what the held batches said of their offsets, and what lies below
  the start offset is dropped. An update with no state held (before any snapshot, or after a
  tombstone) stands as the whole state.
* A tombstone deletes the state (Kafka writes them on ShareSnapshot keys, 4.1+; one on a
  ShareUpdate key, which it never writes, is taken alike).
* An :class:`UnknownRecord` changes nothing: the coordinator skips unknown types.

A start offset of -1 is Kafka's "uninitialized": the share-partition's leader has not chosen it
(``share.auto.offset.reset``), so how far delivery is is not known yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from collectors.groups.keyed_fold import fold_by_key
from collectors.groups.codec.share_state_codec import (
    ShareSnapshot,
    ShareStateRecord,
    ShareStateTombstone,
    ShareUpdate,
    StateBatch,
    UnknownRecord,
)

SharePartition = tuple[str, str, int]  # (group, topic id, partition)
_NOT_UPDATED = -1  # a ShareUpdate's start offset that keeps the held one
_DONE = frozenset({2, 4})  # Kafka's RecordState: ACKNOWLEDGED, ARCHIVED


@dataclass(frozen=True)
class ShareProgress:
    start_offset: int  # -1: not chosen yet
    batches: tuple[StateBatch, ...] = ()  # at or above the start offset, by first offset, not overlapping


def progress_after(held: ShareProgress | None, record: ShareSnapshot | ShareUpdate | ShareStateTombstone
                   ) -> ShareProgress | None:
    """A share-partition's state after one more of its records; None: it has none."""
    match record:
        case ShareSnapshot(start_offset=start, state_batches=batches):
            return _trimmed(start, batches)
        case ShareUpdate(start_offset=start, state_batches=batches) if held is not None:
            merged = held.batches
            for batch in batches:
                merged = _overlaid(merged, batch)
            return _trimmed(held.start_offset if start == _NOT_UPDATED else start, merged)
        case ShareUpdate(start_offset=start, state_batches=batches):
            return _trimmed(start, batches)
    return None  # a tombstone


def delivered_to(progress: ShareProgress) -> int | None:
    """The first offset whose delivery is not done; None while the start offset is not chosen."""
    if progress.start_offset < 0:
        return None
    done = progress.start_offset
    for batch in progress.batches:
        if batch.first_offset > done or batch.delivery_state not in _DONE:
            break
        done = max(done, batch.last_offset + 1)
    return done


def fold_progress(records: Iterable[ShareStateRecord]) -> dict[SharePartition, ShareProgress]:
    """Every share-partition's state after a sequence of records (in offset order)."""
    return fold_by_key(records, share_partition, progress_after)


def share_partition(record: ShareStateRecord) -> SharePartition | None:
    """The share-partition a record is of; None for an unknown record, which names none."""
    return None if isinstance(record, UnknownRecord) else (record.group, record.topic_id, record.partition)


def _trimmed(start: int, batches: Iterable[StateBatch]) -> ShareProgress:
    """The state, without what lies below its start offset (done, whatever a batch said)."""
    kept = []
    for b in sorted(batches, key=lambda b: b.first_offset):
        if b.last_offset >= start:
            kept.append(b if b.first_offset >= start else _cut(b, start, b.last_offset))
    return ShareProgress(start, tuple(kept))


def _overlaid(batches: tuple[StateBatch, ...], new: StateBatch) -> tuple[StateBatch, ...]:
    """``batches`` with ``new`` in place of what they said of its offsets."""
    out = []
    for b in batches:
        if b.last_offset < new.first_offset or b.first_offset > new.last_offset:
            out.append(b)
            continue
        if b.first_offset < new.first_offset:
            out.append(_cut(b, b.first_offset, new.first_offset - 1))
        if b.last_offset > new.last_offset:
            out.append(_cut(b, new.last_offset + 1, b.last_offset))
    return tuple(sorted((*out, new), key=lambda b: b.first_offset))


def _cut(batch: StateBatch, first: int, last: int) -> StateBatch:
    return StateBatch(first, last, batch.delivery_state, batch.delivery_count)
