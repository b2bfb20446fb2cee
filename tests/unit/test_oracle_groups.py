"""The groups oracle: ``__consumer_offsets`` records -> each group's rebalances, on records written by
the group collector's test encoders (tests/unit/offsets_builders.py) and on the records of two real runs
(tests/data/oracle/*-consumer-offsets.jsonl: a classic group on Kafka 3.9, a KIP-848 consumer group on
Kafka 4.3, each a member joining, a second joining, the second leaving, the first leaving)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.oracle import MalformedLog, OracleTransition
from bench.oracle.groups import read, transitions
from collectors.groups.codec.offsets_codec import (ConsumerGroupMember, ConsumerGroupMetadata, GroupMetadata,
                                             GroupTombstone, GroupType, OffsetCommit, ShareGroupMetadata,
                                             StreamsGroupMetadata, decode_record)
from tests.unit.offsets_builders import encode, group_key, group_value, offset_key, offset_value, tombstone

DATA = Path(__file__).parents[1] / "data" / "oracle"


def _classic(generation: int, version: int = 3, since: int = -1, group: str = "g") -> tuple[bytes, bytes]:
    return group_key(group), group_value(GroupMetadata(group, version, "consumer", generation, "range", "m-1", since, ()))


def _rebalance(index: int, generation: int, group: str = "g", time_ms: int | None = None) -> OracleTransition:
    return OracleTransition(kind="rebalance", entity=f"group:{group}", position=index, time_ms=time_ms, group=group,
                            old=str(generation - 1), new=str(generation), generation=generation)


def test_a_classic_group_s_generations() -> None:
    commit = OffsetCommit("g", "orders", 0, 3, 42, -1, "", 1_700_000_000_000, -1)
    assert transitions([
        _classic(1, version=0),                                   # a first sight
        (offset_key("g", "orders", 0), offset_value(commit)),    # offsets say nothing of it
        _classic(2, version=2, since=1_700_000_000_500),
        _classic(5, version=4, since=1_700_000_009_000),          # two generations between two writes
        _classic(5, version=4),                                   # written again: no new generation
        (group_key("g"), None),                                   # deleted
        _classic(7),                                              # made again: a first sight, whatever it says
        _classic(2, group="h"), _classic(3, group="h"),
    ]) == [
        _rebalance(2, 2, time_ms=1_700_000_000_500),
        _rebalance(3, 3, time_ms=1_700_000_009_000), _rebalance(3, 4, time_ms=1_700_000_009_000),
        _rebalance(3, 5, time_ms=1_700_000_009_000),
        _rebalance(8, 3, group="h"),
    ]


def test_the_group_epochs_of_kafka_4_s_protocols() -> None:
    member = ConsumerGroupMember("c", "m-1", None, None, "client", "/127.0.0.1", ("orders",), None, 30000, None,
                                None)
    assert transitions([
        encode(ConsumerGroupMetadata("c", 2, 0)), encode(member), encode(ConsumerGroupMetadata("c", 3, 77)),
        encode(ShareGroupMetadata("s", 1, 0)), encode(ShareGroupMetadata("s", 2, 0)),
        encode(StreamsGroupMetadata("st", 4, 0, -1)), encode(StreamsGroupMetadata("st", 6, 0, 5)),
        tombstone(GroupTombstone("c", GroupType.CONSUMER)), encode(ConsumerGroupMetadata("c", 1, 0)),
    ]) == [_rebalance(2, 3, "c"), _rebalance(4, 2, "s"), _rebalance(6, 5, "st"), _rebalance(6, 6, "st")]


def test_a_record_cut_short_is_refused() -> None:
    key, value = _classic(3)
    assert read(key, value, 0) is not None
    with pytest.raises(MalformedLog, match="record 7: 4 bytes at byte 12 run past its 14"):   # the generation
        read(key, value[:14], 7)
    with pytest.raises(MalformedLog, match="record 7: a key of 1 bytes"):
        read(b"\x00", value, 7)
    with pytest.raises(MalformedLog, match="record 7: a key of 0 bytes"):
        read(None, value, 7)


def _records(name: str) -> list[tuple[bytes | None, bytes | None]]:
    lines = [json.loads(line) for line in (DATA / name).read_text().splitlines()]
    return [(bytes.fromhex(r["key"]) if r["key"] else None, bytes.fromhex(r["value"]) if r["value"] else None)
            for r in lines]


def test_real_groups() -> None:
    assert transitions(_records("zk-consumer-offsets.jsonl")) == [
        _rebalance(1, 2, "g1", 1795740352560), _rebalance(2, 3, "g1", 1795740355455),
        _rebalance(3, 4, "g1", 1795740357770),   # the last member left: the group turned Empty
    ]   # then it was deleted (no offsets were ever committed)
    # KIP-848: the first member's join already made epoch 2 (the group's subscription metadata)
    assert transitions(_records("kraft-consumer-offsets.jsonl")) == [
        _rebalance(6, 3, "g1"), _rebalance(17, 4, "g1"), _rebalance(24, 5, "g1")]


def test_kmon_s_own_decoder_reads_the_same_generations() -> None:
    """Two decoders written apart from each other agree on every record that says a generation."""
    for name in ("zk-consumer-offsets.jsonl", "kraft-consumer-offsets.jsonl"):
        for i, (key, value) in enumerate(_records(name)):
            theirs = decode_record(key, value)
            ours = read(key, value, i)
            if isinstance(theirs, (GroupMetadata, ConsumerGroupMetadata)):
                generation = theirs.generation if isinstance(theirs, GroupMetadata) else theirs.epoch
                assert ours is not None and (ours.group, ours.generation) == (theirs.group, generation), i
            elif isinstance(theirs, GroupTombstone):
                assert ours is not None and (ours.group, ours.generation) == (theirs.group, None), i
            else:
                assert ours is None, i
