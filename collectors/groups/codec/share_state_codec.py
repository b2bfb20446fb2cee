"""Decode records of the share coordinator's internal topic ``__share_group_state`` (KIP-932),
as brokers 4.0-4.3 write them: each share-partition's delivery state.

* key: ``int16`` record type, then group id, topic id (uuid) and partition, never flexible:
  0 ShareSnapshot (the share-partition's whole state), 1 ShareUpdate (a change on top of the
  last snapshot).
* value: ``int16`` version (v0 only, flexible), or none: a tombstone (4.1+ write them, on
  ShareSnapshot keys, when a share-partition's state is deleted).

4.0's v0 layouts were early access: a uint16 snapshot epoch, and no create and write
timestamps in the snapshot; 4.1 made the epoch an int32 and added the timestamps, and 4.2
the delivery complete count (a tagged field, KIP-1226). Both layouts are read, 4.1's first.

:func:`decode_share_state` returns a record or raises
:class:`collectors.kafka_encoding.MalformedRecord` naming the field and byte; a newer record type
or value version is an :class:`UnknownRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from collectors.groups.codec.record_specs import Key, Layout, RecordSpec, UnknownRecord, decode_by_spec
from collectors.kafka_encoding import Reader, tagged

__all__ = [
    "ShareSnapshot",
    "ShareStateRecord",
    "ShareStateRecordType",
    "ShareStateTombstone",
    "ShareUpdate",
    "StateBatch",
    "UnknownRecord",
    "decode_share_state",
]

NO_DELIVERY_COMPLETE_COUNT = -1  # the schema's default, before 4.2


class ShareStateRecordType(IntEnum):
    """The share coordinator's CoordinatorRecordType, from each schema's apiKey."""

    SHARE_SNAPSHOT = 0
    SHARE_UPDATE = 1


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets in one delivery state."""

    first_offset: int
    last_offset: int
    delivery_state: int  # Kafka's RecordState: 0 available, 2 acknowledged, 4 archived
    delivery_count: int


@dataclass(frozen=True)
class ShareSnapshot:
    """A share-partition's whole state: the updates after it apply on top of it."""

    group: str
    topic_id: str
    partition: int
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int  # the first offset not yet acknowledged or archived; -1: none yet
    create_timestamp_ms: int | None  # None in 4.0's layout, which has none
    write_timestamp_ms: int | None
    delivery_complete_count: int  # offsets from the start offset on whose delivery is done
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True)
class ShareUpdate:
    """A change of a share-partition's state since its last snapshot."""

    group: str
    topic_id: str
    partition: int
    snapshot_epoch: int  # of the snapshot it applies to
    leader_epoch: int  # -1: unchanged
    start_offset: int  # -1: unchanged
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]  # the batches that changed


@dataclass(frozen=True)
class ShareStateTombstone:
    """A share-partition's state was deleted (its group, or its topic, was)."""

    group: str
    topic_id: str
    partition: int
    record_type: ShareStateRecordType  # Kafka writes them on ShareSnapshot keys only


ShareStateRecord = ShareSnapshot | ShareUpdate | ShareStateTombstone | UnknownRecord


def decode_share_state(key: bytes | None, value: bytes | None) -> ShareStateRecord:
    """Decode one ``__share_group_state`` record; ``value=None`` is a tombstone."""
    return decode_by_spec(_SPECS, key, value)


def _key(reader: Reader) -> Key:
    return reader.string("group_id"), reader.uuid("topic_id"), reader.int32("partition")


def _snapshot_epoch(reader: Reader, early_access: bool) -> int:
    return reader.uint16("snapshot_epoch") if early_access else reader.int32("snapshot_epoch")


def _state_batch(reader: Reader) -> StateBatch:
    batch = StateBatch(
        reader.int64("first_offset"),
        reader.int64("last_offset"),
        reader.int8("delivery_state"),
        reader.int16("delivery_count"),
    )
    reader.skip_tagged_fields("state batch")
    return batch


def _batches_and_complete_count(reader: Reader) -> tuple[tuple[StateBatch, ...], int]:
    """The value's last fields: its state batches, then its tags (the count is tag 0)."""
    batches = reader.array("state_batches", _state_batch)
    count = tagged(
        reader.tagged_fields("value"), 0, lambda r: r.int32("delivery_complete_count"), NO_DELIVERY_COMPLETE_COUNT
    )
    return batches, count


def _snapshot(early_access: bool) -> Layout[ShareSnapshot]:
    def layout(key: Key, reader: Reader, _version: int) -> ShareSnapshot:
        snapshot_epoch = _snapshot_epoch(reader, early_access)
        state_epoch, leader_epoch = reader.int32("state_epoch"), reader.int32("leader_epoch")
        start_offset = reader.int64("start_offset")
        created = None if early_access else reader.int64("create_timestamp")
        written = None if early_access else reader.int64("write_timestamp")
        batches, complete = _batches_and_complete_count(reader)
        return ShareSnapshot(
            *key, snapshot_epoch, state_epoch, leader_epoch, start_offset, created, written, complete, batches
        )

    return layout


def _update(early_access: bool) -> Layout[ShareUpdate]:
    def layout(key: Key, reader: Reader, _version: int) -> ShareUpdate:
        snapshot_epoch = _snapshot_epoch(reader, early_access)
        leader_epoch, start_offset = reader.int32("leader_epoch"), reader.int64("start_offset")
        batches, complete = _batches_and_complete_count(reader)
        return ShareUpdate(*key, snapshot_epoch, leader_epoch, start_offset, complete, batches)

    return layout


def _spec(record_type: ShareStateRecordType, name: str, layouts: tuple[Layout, ...]) -> RecordSpec:
    return RecordSpec(name, _key, lambda key: ShareStateTombstone(*key, record_type), layouts)


_SPECS: dict[int, RecordSpec] = {
    ShareStateRecordType.SHARE_SNAPSHOT: _spec(
        ShareStateRecordType.SHARE_SNAPSHOT, "ShareSnapshot", (_snapshot(False), _snapshot(True))
    ),
    ShareStateRecordType.SHARE_UPDATE: _spec(
        ShareStateRecordType.SHARE_UPDATE, "ShareUpdate", (_update(False), _update(True))
    ),
}
