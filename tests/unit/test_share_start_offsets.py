"""Tests of collectors.groups.share_start_offsets: share-partitions' start offsets folded from
__share_group_state records as the share coordinator replays them."""

from __future__ import annotations

from collectors.groups.share_start_offsets import fold_start_offsets, group_start_offsets
from collectors.groups.share_state_codec import (
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
ACKED = (StateBatch(90, 99, 2, 1),)


def snapshot(start: int, partition: int = 0, epoch: int = 0, group: str = G, topic: str = ORDERS) -> ShareSnapshot:
    return ShareSnapshot(group, topic, partition, epoch, 1, 5, start, 1_700_000_000_000, 1_700_000_000_000, -1, ())


def update(start: int, partition: int = 0, group: str = G, topic: str = ORDERS) -> ShareUpdate:
    return ShareUpdate(group, topic, partition, 0, -1, start, -1, ACKED)


def tombstone(partition: int = 0, record_type: ShareStateRecordType = ShareStateRecordType.SHARE_SNAPSHOT
              ) -> ShareStateTombstone:
    return ShareStateTombstone(G, ORDERS, partition, record_type)


def test_updates_advance_the_snapshots_start_offset() -> None:
    records = [snapshot(100), update(110), update(-1), update(125)]
    assert fold_start_offsets(records) == {(G, ORDERS, 0): 125}


def test_an_update_that_does_not_set_the_start_offset_keeps_it() -> None:
    assert fold_start_offsets([snapshot(100), update(110), update(-1)]) == {(G, ORDERS, 0): 110}


def test_an_update_before_any_snapshot_stands_alone() -> None:
    assert fold_start_offsets([update(50)]) == {(G, ORDERS, 0): 50}
    # no start offset in it: the state exists, uninitialized, until one comes
    assert fold_start_offsets([update(-1)]) == {(G, ORDERS, 0): -1}
    assert fold_start_offsets([update(-1), update(60)]) == {(G, ORDERS, 0): 60}


def test_a_newer_snapshot_replaces_the_state() -> None:
    # a snapshot is the whole state, even one whose start offset is behind the updates'
    records = [snapshot(100), update(130), snapshot(120, epoch=1), update(-1)]
    assert fold_start_offsets(records) == {(G, ORDERS, 0): 120}


def test_a_tombstone_deletes_the_state() -> None:
    assert fold_start_offsets([snapshot(100), update(110), tombstone()]) == {}
    assert fold_start_offsets([tombstone()]) == {}


def test_records_after_a_tombstone_start_anew() -> None:
    assert fold_start_offsets([snapshot(100), tombstone(), update(-1)]) == {(G, ORDERS, 0): -1}
    assert fold_start_offsets([snapshot(100), tombstone(), snapshot(0)]) == {(G, ORDERS, 0): 0}


def test_a_tombstone_on_an_update_key_deletes_alike() -> None:
    assert fold_start_offsets([snapshot(100), tombstone(record_type=ShareStateRecordType.SHARE_UPDATE)]) == {}


def test_unknown_records_change_nothing() -> None:
    assert fold_start_offsets([snapshot(100), UnknownRecord(2, 0), UnknownRecord(1, 1)]) == {(G, ORDERS, 0): 100}


def test_share_partitions_fold_apart() -> None:
    records = [
        snapshot(100, partition=0), snapshot(7, partition=1), update(110, partition=0), tombstone(partition=1),
        snapshot(3, topic=PAYMENTS), snapshot(40, group="other"), update(41, group="other"),
    ]
    assert fold_start_offsets(records) == {(G, ORDERS, 0): 110, (G, PAYMENTS, 0): 3, ("other", ORDERS, 0): 41}


def test_a_groups_start_offsets_by_topic_id_and_partition() -> None:
    offsets = fold_start_offsets([snapshot(100, partition=0), snapshot(7, partition=3), snapshot(3, topic=PAYMENTS),
                                  snapshot(40, group="other")])
    assert group_start_offsets(offsets, G) == {(ORDERS, 0): 100, (ORDERS, 3): 7, (PAYMENTS, 0): 3}
    assert group_start_offsets(offsets, "other") == {(ORDERS, 0): 40}
    assert group_start_offsets(offsets, "absent") == {}


def test_folded_from_the_records_bytes() -> None:
    written = [encode_share_state(snapshot(100), EARLY_ACCESS), encode_share_state(update(110)),
               (encode_share_state(update(-1))[0], None), encode_share_state(snapshot(5, epoch=1))]
    records = [decode_share_state(key, value) for key, value in written]
    assert group_start_offsets(fold_start_offsets(records), G) == {(ORDERS, 0): 5}
