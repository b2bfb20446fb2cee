"""Tests of collectors.groups.codec.offsets_codec, its entry point and the classic records (types 0-2):
round trips, hand-built vectors, newer versions, fuzzing."""

from __future__ import annotations

import random
import struct
from dataclasses import replace

import pytest

from collectors.groups.codec.offsets_codec import (
    GroupMember,
    GroupMetadata,
    GroupTombstone,
    GroupType,
    OffsetCommit,
    OffsetTombstone,
    TopicPartition,
    UnknownRecord,
    decode_record,
)
from collectors.kafka_encoding import MalformedRecord
from tests.unit.offsets_builders import (
    Writer,
    all_valid_records,
    assignment,
    decode_or_malformed,
    group_key,
    group_value,
    offset_key,
    offset_value,
    sample_group,
    sample_offset,
)


# --- Sample records ------------------------------------------------------------------


VALID_RECORD_IDS = ["consumer-group-v0"] + [
    f"{kind}-v{v}" for v in range(5) for kind in ("offset", "group")
]


# --- Round trips ---------------------------------------------------------------------


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("key_version", [0, 1])
def test_offset_commit_round_trip(version: int, key_version: int) -> None:
    expected = sample_offset(version)
    key = offset_key("orders-app", "orders", 7, key_version)
    assert decode_record(key, offset_value(expected)) == expected


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_round_trip(version: int) -> None:
    expected = sample_group(version)
    decoded = decode_record(group_key("orders-app"), group_value(expected))
    assert decoded == expected
    assert decoded.members[0].assigned_partitions == (
        TopicPartition("orders", 0),
        TopicPartition("orders", 1),
        TopicPartition("payments", 2),
    )


def test_empty_group_has_null_protocol_and_leader() -> None:
    empty = GroupMetadata("idle", 3, "consumer", 8, None, None, 1_700_000_000_000, ())
    assert decode_record(group_key("idle"), group_value(empty)) == empty


def test_offset_v4_skips_unknown_tagged_fields() -> None:
    expected = sample_offset(4)
    value = offset_value(expected, tagged={0: b"\x01\x02", 9: b"later"})
    assert decode_record(offset_key("orders-app", "orders", 7), value) == expected


def test_tombstones() -> None:
    assert decode_record(group_key("gone"), None) == GroupTombstone("gone", GroupType.CLASSIC)
    assert decode_record(offset_key("g", "t", 3, key_version=0), None) == OffsetTombstone(
        "g", "t", 3
    )


@pytest.mark.parametrize("key_version", [25, 26, 100, 32767])
def test_newer_record_types_are_unknown(key_version: int) -> None:
    record_key = Writer().int16(key_version).string("g").string("member").done()
    assert decode_record(record_key, b"\x00\x02anything") == UnknownRecord(key_version, 2)
    assert decode_record(record_key, None) == UnknownRecord(key_version, None)


@pytest.mark.parametrize(
    ("record_key", "version"),
    [(group_key("g"), 5), (offset_key("g", "t", 0), 5), (offset_key("g", "t", 0, key_version=0), 9)],
)
def test_newer_value_versions_are_unknown_not_malformed(record_key: bytes, version: int) -> None:
    value = Writer().int16(version).done() + b"fields of a future version"
    assert decode_record(record_key, value) == UnknownRecord(record_key[1], version)


# --- Byte-exact vectors built by hand from the schemas -------------------------------

# GroupMetadataValue v3, group "g": protocol_type "consumer", generation 5, protocol
# "range", leader "m1", current_state_timestamp 1700000000000 (0x18BCFE56800), one
# member "m1" (no group_instance_id, client "c" at "/h", rebalance 300000 ms = 0x493E0,
# session 45000 ms = 0xAFC8, empty subscription, assignment of t-0 and t-1).
ASSIGNMENT_T01 = bytes.fromhex(
    "0000"  # ConsumerProtocolAssignment version 0
    "00000001" "0001" "74"  # 1 topic: "t"
    "00000002" "00000000" "00000001"  # partitions [0, 1]
    "ffffffff"  # user_data: null
)  # fmt: skip
GROUP_V3_VALUE = (
    bytes.fromhex(
        "0003"  # version 3
        "0008" "636f6e73756d6572"  # protocol_type "consumer"
        "00000005"  # generation
        "0005" "72616e6765"  # protocol "range"
        "0002" "6d31"  # leader "m1"
        "0000018bcfe56800"  # current_state_timestamp
        "00000001"  # 1 member
        "0002" "6d31"  # member_id "m1"
        "ffff"  # group_instance_id: null
        "0001" "63"  # client_id "c"
        "0002" "2f68"  # client_host "/h"
        "000493e0"  # rebalance_timeout
        "0000afc8"  # session_timeout
        "00000000"  # subscription: empty
        "00000019"  # assignment: 25 bytes
    )
    + ASSIGNMENT_T01
)  # fmt: skip


def test_group_metadata_v3_vector() -> None:
    key = bytes.fromhex("0002" "0001" "67")  # GroupMetadataKey "g"
    assert decode_record(key, GROUP_V3_VALUE) == GroupMetadata(
        group="g",
        version=3,
        protocol_type="consumer",
        generation=5,
        protocol="range",
        leader="m1",
        current_state_timestamp_ms=1_700_000_000_000,
        members=(
            GroupMember(
                member_id="m1",
                group_instance_id=None,
                client_id="c",
                client_host="/h",
                rebalance_timeout_ms=300_000,
                session_timeout_ms=45_000,
                subscription=b"",
                assignment=ASSIGNMENT_T01,
                assigned_partitions=(TopicPartition("t", 0), TopicPartition("t", 1)),
            ),
        ),
    )


def test_offset_commit_v3_vector() -> None:
    key = bytes.fromhex("0001" "0001" "67" "0001" "74" "00000003")  # g, t, partition 3
    value = bytes.fromhex(
        "0003"  # version 3
        "000000000000002a"  # offset 42
        "00000007"  # leader_epoch 7
        "0000"  # metadata ""
        "0000018bcfe5687b"  # commit_timestamp 1700000000123
    )  # fmt: skip
    assert decode_record(key, value) == OffsetCommit(
        group="g",
        topic="t",
        partition=3,
        version=3,
        offset=42,
        leader_epoch=7,
        metadata="",
        commit_timestamp_ms=1_700_000_000_123,
        expire_timestamp_ms=-1,
    )


def test_offset_commit_v4_flexible_vector() -> None:
    key = bytes.fromhex("0001" "0001" "67" "0001" "74" "00000003")
    value = bytes.fromhex(
        "0004"  # version 4 (flexible)
        "000000000000002a"  # offset 42
        "ffffffff"  # leader_epoch -1
        "03" "6f6b"  # compact string "ok" (length + 1)
        "0000018bcfe5687b"  # commit_timestamp
        "01" "05" "02" "abcd"  # one tagged field: tag 5, 2 bytes
    )  # fmt: skip
    record = decode_record(key, value)
    assert isinstance(record, OffsetCommit)
    assert (record.offset, record.leader_epoch, record.metadata) == (42, -1, "ok")


# --- Malformed input -----------------------------------------------------------------


def test_truncation_message_names_field_and_byte() -> None:
    key = group_key("g")
    expected = r"^GroupMetadataValue v3: truncated at byte 45 reading member client_id$"
    with pytest.raises(MalformedRecord, match=expected):
        decode_record(key, GROUP_V3_VALUE[:46])
    with pytest.raises(MalformedRecord, match=r"truncated at byte 47 reading member client_id"):
        decode_record(key, GROUP_V3_VALUE[:47])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        pytest.param(None, b"\x00\x00", "record has no key", id="no-key"),
        pytest.param(b"", None, "key: truncated at byte 0 reading key version", id="empty-key"),
        pytest.param(b"\xff\xfe", None, "negative key version -2", id="negative-key-version"),
        pytest.param(
            group_key("g") + b"x",
            None,
            "GroupMetadataKey: 1 trailing bytes at byte 5",
            id="key-trailing",
        ),
        pytest.param(
            group_key("g"),
            b"\xff\xff",
            "GroupMetadataValue: negative version -1",
            id="group-v-1",
        ),
        pytest.param(
            Writer().int16(99).string("g").done(),
            b"\x00",
            "value: truncated at byte 0 reading version",
            id="unknown-type-truncated-version",
        ),
        pytest.param(
            group_key("g"),
            b"",
            "GroupMetadataValue: truncated at byte 0 reading version",
            id="empty-value",
        ),
        pytest.param(
            group_key("g"),
            GROUP_V3_VALUE + b"\x00",
            "v3: 1 trailing bytes at byte 93",
            id="value-trailing",
        ),
        pytest.param(
            group_key("g"),
            b"\x00\x03\xff\xfe",
            "negative length -2 at byte 2 reading protocol_type",
            id="negative-length",
        ),
        pytest.param(group_key("g"), b"\x00\x03\xff\xff", "null protocol_type", id="null-string"),
        pytest.param(
            group_key("g"),
            b"\x00\x03\x00\x01\xff",
            "invalid UTF-8 at byte 4 reading protocol_type",
            id="bad-utf8",
        ),
        pytest.param(
            offset_key("g", "t", 0),
            Writer(flexible=True).int16(4).int64(1).int32(0).done() + b"\xff" * 6,
            "varint longer than 5 bytes",
            id="long-varint",
        ),
    ],
)
def test_malformed(key: bytes | None, value: bytes | None, message: str) -> None:
    with pytest.raises(MalformedRecord, match=message):
        decode_record(key, value)


def test_a_generation_below_minus_1_is_malformed() -> None:
    """Found by tests/fuzz/groups.py: the events' schema refuses it."""
    with pytest.raises(MalformedRecord, match="generation"):
        decode_record(group_key("g"), group_value(replace(sample_group(3), generation=-2)))


def test_huge_member_count_is_rejected_without_looping() -> None:
    value = Writer().int16(0).string("consumer").int32(1).string(None).string(None)
    value.int32(2**31 - 1)
    with pytest.raises(MalformedRecord, match="members count 2147483647 at byte"):
        decode_record(group_key("g"), value.done())


def test_null_member_bytes_is_malformed() -> None:
    w = Writer().int16(0).string("consumer").int32(1).string(None).string(None).array(1)
    w.string("m").string("c").string("/h").int32(10).blob(None)
    with pytest.raises(MalformedRecord, match="null member subscription"):
        decode_record(group_key("g"), w.done())


# --- Member assignment: best effort --------------------------------------------------


def group_with_assignment(raw: bytes, protocol_type: str = "consumer") -> GroupMetadata:
    member = GroupMember("m", None, "c", "/h", 1, 1, b"", raw, ())
    record = GroupMetadata("g", 3, protocol_type, 1, "range", "m", 0, (member,))
    decoded = decode_record(group_key("g"), group_value(record))
    assert isinstance(decoded, GroupMetadata)
    return decoded


@pytest.mark.parametrize(
    "raw",
    [
        b"",  # not assigned yet
        b"\x00",  # truncated version
        b"\xff\xff\x00\x00\x00\x00",  # negative version
        assignment({"t": [0, 1]})[:-3],  # truncated user_data
        b"\x00\x00\x00\x00\x00\x01\x00\x01\xff",  # invalid UTF-8 topic
        b"\x00\x00\x7f\xff\xff\xff",  # absurd topic count
    ],
)
def test_undecodable_assignment_is_left_empty(raw: bytes) -> None:
    member = group_with_assignment(raw).members[0]
    assert member.assignment == raw
    assert member.assigned_partitions == ()


def test_newer_assignment_version_is_read_as_v0() -> None:
    raw = assignment({"t": [3]}, version=7, user_data=b"ud") + b"future fields"
    assert group_with_assignment(raw).members[0].assigned_partitions == (TopicPartition("t", 3),)


def test_assignment_of_other_protocols_is_not_decoded() -> None:
    raw = assignment({"t": [3]})
    assert group_with_assignment(raw, protocol_type="connect").members[0].assigned_partitions == ()


# --- Fuzzing: only records or MalformedRecord, ever ----------------------------------


@pytest.mark.parametrize(("key", "value"), all_valid_records(), ids=VALID_RECORD_IDS)
def test_every_truncation_is_malformed(key: bytes, value: bytes) -> None:
    for cut in range(len(value)):
        with pytest.raises(MalformedRecord):
            decode_record(key, value[:cut])
    for cut in range(len(key)):
        with pytest.raises(MalformedRecord):
            decode_record(key[:cut], value)


def test_random_bit_flips() -> None:
    rng = random.Random(848)
    for key, value in all_valid_records():
        for _ in range(300):
            flipped = bytearray(value)
            for _ in range(rng.randint(1, 4)):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            decode_or_malformed(key, bytes(flipped))


def test_random_bytes() -> None:
    rng = random.Random(2024)
    for _ in range(5000):
        key = struct.pack(">h", rng.randint(-2, 6)) + rng.randbytes(rng.randint(0, 12))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 64))
        if value and rng.random() < 0.5:  # a known version makes the decoder go deeper
            value = struct.pack(">h", rng.randint(0, 4)) + value
        decode_or_malformed(key, value)
