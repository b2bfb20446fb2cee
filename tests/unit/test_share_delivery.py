"""Tests of collectors.groups.share_delivery: how far share-partitions' delivery has come, folded
from __share_group_state records as the share coordinator replays them."""

from __future__ import annotations

from collectors.groups.share_delivery import ShareProgress, delivered_to, fold_progress
from collectors.groups.codec.share_state_codec import (
    ShareSnapshot,
    ShareStateRecordType,
    ShareStateTombstone,
    ShareUpdate,
    StateBatch,
    UnknownRecord,
    decode_share_state,
)
from tests.unit.offsets_builders import EARLY_ACCESS, encode_share_state

G, ORDERS, PAYMENTS = "orders-share", "5f1c2a3e-8b4d-4e6f-9a0b-1c2d3e4f5a6b", "00000000-0000-0000-0000-00000000abcd"
AVAILABLE, ACQUIRED, ACKED, ARCHIVED = 0, 1, 2, 4   # Kafka's RecordState


def batch(first: int, last: int, state: int = ACKED) -> StateBatch:
    return StateBatch(first, last, state, 1)


def snapshot(start: int, *batches: StateBatch, partition: int = 0, epoch: int = 0, group: str = G,
             topic: str = ORDERS) -> ShareSnapshot:
    return ShareSnapshot(group, topic, partition, epoch, 1, 5, start, 1_700_000_000_000, 1_700_000_000_000, -1,
                         batches)


def update(start: int, *batches: StateBatch, partition: int = 0, group: str = G, topic: str = ORDERS) -> ShareUpdate:
    return ShareUpdate(group, topic, partition, 0, -1, start, -1, batches)


def tombstone(partition: int = 0, record_type: ShareStateRecordType = ShareStateRecordType.SHARE_SNAPSHOT
              ) -> ShareStateTombstone:
    return ShareStateTombstone(G, ORDERS, partition, record_type)


def done(*records: object, key: tuple[str, str, int] = (G, ORDERS, 0)) -> int | None:
    progress = fold_progress(records)   # type: ignore[arg-type]
    return delivered_to(progress[key]) if key in progress else None


def test_acknowledged_batches_from_the_start_offset_on_are_done() -> None:
    # Kafka moves the start offset up lazily: what was acknowledged since is in the batches
    assert done(snapshot(0), update(-1, batch(0, 49))) == 50
    assert done(snapshot(0), update(-1, batch(0, 49)), update(-1, batch(50, 59, ARCHIVED))) == 60


def test_a_batch_not_done_or_a_gap_stops_what_is_done() -> None:
    assert done(snapshot(0, batch(0, 9), batch(10, 19, ACQUIRED), batch(20, 29))) == 10
    assert done(snapshot(0, batch(0, 9), batch(15, 19))) == 10         # 10-14 never delivered
    assert done(snapshot(5, batch(8, 9))) == 5


def test_an_update_overrides_what_the_held_batches_said_of_its_offsets() -> None:
    held = snapshot(0, batch(0, 19, ACQUIRED))
    assert done(held, update(-1, batch(0, 9))) == 10                     # half acknowledged, half in flight
    assert done(held, update(-1, batch(5, 14, AVAILABLE)), update(-1, batch(0, 4))) == 5
    progress = fold_progress([held, update(-1, batch(5, 9))])[G, ORDERS, 0]
    assert progress.batches == (batch(0, 4, ACQUIRED), batch(5, 9), batch(10, 19, ACQUIRED))


def test_a_moved_start_offset_drops_what_lies_below_it() -> None:
    progress = fold_progress([snapshot(0, batch(0, 9, ACQUIRED), batch(10, 19, ACQUIRED)), update(15)])[G, ORDERS, 0]
    assert progress == ShareProgress(15, (batch(15, 19, ACQUIRED),))
    assert done(snapshot(100), update(110), update(-1)) == 110


def test_an_update_before_any_snapshot_stands_alone() -> None:
    assert done(update(50)) == 50
    assert done(update(-1)) is None          # the state exists, its start offset not chosen yet
    assert done(update(-1), update(60, batch(60, 61))) == 62


def test_a_newer_snapshot_replaces_the_state() -> None:
    # a snapshot is the whole state, even one whose start offset is behind the updates'
    assert done(snapshot(100), update(130), snapshot(120, epoch=1), update(-1)) == 120


def test_a_tombstone_deletes_the_state_and_what_follows_starts_anew() -> None:
    assert done(snapshot(100), update(110), tombstone()) is None
    assert done(snapshot(100), tombstone(record_type=ShareStateRecordType.SHARE_UPDATE)) is None
    assert done(snapshot(100, batch(100, 120)), tombstone(), snapshot(0)) == 0


def test_unknown_records_change_nothing() -> None:
    assert done(snapshot(100), UnknownRecord(2, 0), UnknownRecord(1, 1)) == 100


def test_share_partitions_fold_apart() -> None:
    records = [snapshot(100, partition=0), snapshot(7, partition=1), update(110, partition=0), tombstone(partition=1),
               snapshot(3, topic=PAYMENTS), snapshot(40, group="other"), update(41, group="other")]
    assert {key: delivered_to(p) for key, p in fold_progress(records).items()} == {
        (G, ORDERS, 0): 110, (G, PAYMENTS, 0): 3, ("other", ORDERS, 0): 41}


def test_folded_from_the_records_bytes() -> None:
    written = [encode_share_state(snapshot(100), EARLY_ACCESS), encode_share_state(update(110, batch(110, 114))),
               (encode_share_state(update(-1))[0], None), encode_share_state(snapshot(5, batch(5, 6), epoch=1))]
    assert done(*(decode_share_state(key, value) for key, value in written)) == 7
