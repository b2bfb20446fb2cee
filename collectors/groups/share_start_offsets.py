"""Each share-partition's start offset (KIP-932's SPSO: the first offset whose delivery is not
done; every offset below it was acknowledged or archived) as the share coordinator derives it
from its ``__share_group_state`` records, folded in each partition's offset order (one
share-partition's records all live in one partition of that topic).

The rules, after ShareCoordinatorShard's replay (4.0-4.3):

* A ShareSnapshot is the share-partition's whole state: its start offset replaces the held one.
* A ShareUpdate applies on top: its start offset replaces the held one, unless it is -1 ("not
  updated"), which keeps it. An update with no state held (before any snapshot, or after a
  tombstone) stands as the whole state, its start offset as it is.
* A tombstone deletes the state (Kafka writes them on ShareSnapshot keys, 4.1+; one on a
  ShareUpdate key, which it never writes, is taken alike).
* An :class:`UnknownRecord` changes nothing: the coordinator skips unknown types (an unknown
  value version stops its load instead; the caller counts them).

A start offset of -1 is Kafka's "uninitialized": the state exists without one yet, and the
share-partition's leader will choose it by ``share.auto.offset.reset``.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from collectors.groups.keyed_fold import fold_by_key
from collectors.groups.share_state_codec import (
    ShareSnapshot,
    ShareStateRecord,
    ShareStateTombstone,
    ShareUpdate,
    UnknownRecord,
)

SharePartition = tuple[str, str, int]  # (group, topic id, partition)
_NOT_UPDATED = -1  # a ShareUpdate's start offset that keeps the held one


def start_offset_after(held: int | None, record: ShareSnapshot | ShareUpdate | ShareStateTombstone) -> int | None:
    """A share-partition's start offset after one more of its records; None: it has no state."""
    match record:
        case ShareSnapshot(start_offset=start):
            return start
        case ShareUpdate(start_offset=start) if start == _NOT_UPDATED and held is not None:
            return held
        case ShareUpdate(start_offset=start):
            return start
    return None  # a tombstone


def fold_start_offsets(records: Iterable[ShareStateRecord]) -> dict[SharePartition, int]:
    """Every share-partition's start offset after a sequence of records (in offset order)."""
    return fold_by_key(records, _share_partition, start_offset_after)


def group_start_offsets(offsets: Mapping[SharePartition, int], group: str) -> dict[tuple[str, int], int]:
    """One share group's start offsets, by (topic id, partition)."""
    return {(topic_id, partition): start for (g, topic_id, partition), start in offsets.items() if g == group}


def _share_partition(record: ShareStateRecord) -> SharePartition | None:
    """The share-partition a record is of; None for an unknown record, which names none."""
    return None if isinstance(record, UnknownRecord) else (record.group, record.topic_id, record.partition)
