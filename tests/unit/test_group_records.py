"""Tests of the modern group records of __consumer_offsets (types 3-24): every type and
layout round-tripped through encoders written from the schemas, tombstones, newer versions,
hand-built byte vectors, and malformed input (truncations, trailing bytes, fuzzing)."""

from __future__ import annotations

import random
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.groups.codec.offsets_codec import (
    ClassicMemberProtocol,
    ConsumerGroupMember,
    ConsumerGroupMetadata,
    CurrentAssignment,
    UserEndpoint,
    GroupTombstone,
    GroupType,
    RecordType,
    ShareGroupMember,
    ShareGroupMetadata,
    StreamsCurrentAssignment,
    StreamsGroupMember,
    StreamsGroupMetadata,
    StreamsTasks,
    SubRecord,
    SubRecordTombstone,
    TargetAssignmentMetadata,
    TopicPartitions,
    UnknownRecord,
    decode_record,
)
from collectors.kafka_encoding import MalformedRecord
from kmon.codec import decode
from kmon.codec import encode as encode_event
from kmon.events import Event, GroupMember, GroupState
from tests.unit.group_record_samples import CONSUMER, G, M, SAMPLES, SHARE, STREAMS, consumer_member, encoded_samples
from tests.unit.offsets_builders import CURRENT, Writer, decode_or_malformed, encode, key

SAMPLE_IDS = [sample_id for sample_id, _, _ in SAMPLES]


def test_samples_cover_every_modern_record_type() -> None:
    covered = {int(sample_id.split("-")[0]) for sample_id in SAMPLE_IDS}
    assert covered == set(range(3, 25))


@pytest.mark.parametrize(("record", "layout"), [(r, lay) for _, r, lay in SAMPLES], ids=SAMPLE_IDS)
def test_round_trip(record: object, layout: str) -> None:
    assert decode_record(*encode(record, layout)) == record


@pytest.mark.parametrize(("record", "layout"), [(r, lay) for _, r, lay in SAMPLES], ids=SAMPLE_IDS)
def test_tagged_fields_of_later_versions_are_skipped(record: object, layout: str) -> None:
    later = {7: b"\x00\x01", 30: b"a later Kafka's field"}
    assert decode_record(*encode(record, layout, tags=later)) == record


# --- Tombstones ------------------------------------------------------------------------


def sub(group_type: GroupType, part: SubRecord, member: str | None = None) -> SubRecordTombstone:
    return SubRecordTombstone(G, group_type, part, member_id=member)


TOMBSTONES: dict[int, tuple[bytes, object]] = {
    3: (key(3, G), GroupTombstone(G, CONSUMER)),
    4: (key(4, G), sub(CONSUMER, SubRecord.TOPIC_METADATA)),
    5: (key(5, G, M), sub(CONSUMER, SubRecord.MEMBER, M)),
    6: (key(6, G), sub(CONSUMER, SubRecord.TARGET_ASSIGNMENT_METADATA)),
    7: (key(7, G, M), sub(CONSUMER, SubRecord.TARGET_ASSIGNMENT, M)),
    8: (key(8, G, M), sub(CONSUMER, SubRecord.CURRENT_ASSIGNMENT, M)),
    9: (key(9, G), sub(SHARE, SubRecord.TOPIC_METADATA)),
    10: (key(10, G, M), sub(SHARE, SubRecord.MEMBER, M)),
    11: (key(11, G), GroupTombstone(G, SHARE)),
    12: (key(12, G), sub(SHARE, SubRecord.TARGET_ASSIGNMENT_METADATA)),
    13: (key(13, G, M), sub(SHARE, SubRecord.TARGET_ASSIGNMENT, M)),
    14: (key(14, G, M), sub(SHARE, SubRecord.CURRENT_ASSIGNMENT, M)),
    15: (key(15, G), sub(SHARE, SubRecord.SHARE_STATE_PARTITIONS)),
    16: (key(16, G, "ord.*"), SubRecordTombstone(G, CONSUMER, SubRecord.REGULAR_EXPRESSION, regex="ord.*")),
    17: (key(17, G), GroupTombstone(G, STREAMS)),
    18: (key(18, G), sub(STREAMS, SubRecord.TOPIC_METADATA)),
    19: (key(19, G, M), sub(STREAMS, SubRecord.MEMBER, M)),
    20: (key(20, G), sub(STREAMS, SubRecord.TARGET_ASSIGNMENT_METADATA)),
    21: (key(21, G, M), sub(STREAMS, SubRecord.TARGET_ASSIGNMENT, M)),
    22: (key(22, G, M), sub(STREAMS, SubRecord.CURRENT_ASSIGNMENT, M)),
    23: (key(23, G), sub(STREAMS, SubRecord.TOPOLOGY)),
    24: (key(24, G), sub(STREAMS, SubRecord.RESOLVED_TOPIC_IDS)),
}


@pytest.mark.parametrize("record_type", sorted(TOMBSTONES))
def test_tombstone_says_what_was_deleted(record_type: int) -> None:
    record_key, expected = TOMBSTONES[record_type]
    assert decode_record(record_key, None) == expected


def test_tombstone_keys_match_the_records_keys() -> None:
    for record_key, _ in encoded_samples():
        assert decode_record(record_key, None) == TOMBSTONES[record_key[1]][1]


def test_record_types_follow_kafkas_numbering() -> None:
    assert RecordType(16).name == "CONSUMER_GROUP_REGULAR_EXPRESSION"
    assert [t.value for t in RecordType] == list(range(25))


# --- Newer versions --------------------------------------------------------------------


@pytest.mark.parametrize("record_type", range(3, 25))
def test_a_newer_value_version_is_unknown_not_malformed(record_type: int) -> None:
    record_key = TOMBSTONES[record_type][0]
    value = Writer(flexible=True).int16(1).done() + b"a future layout"
    assert decode_record(record_key, value) == UnknownRecord(record_type, 1)


# --- Byte-exact vectors built by hand from the schemas -------------------------------


def test_consumer_group_metadata_vector() -> None:
    record_key = bytes.fromhex("0003" "0002" "6731")  # ConsumerGroupMetadataKey "g1"
    value = bytes.fromhex("0000" "0000000c" "01" "00" "08" "0000000000000063")  # epoch 12, tag 0 hash 99
    assert decode_record(record_key, value) == ConsumerGroupMetadata("g1", 12, 99)


def test_consumer_member_with_classic_protocol_vector() -> None:
    record_key = bytes.fromhex("0005" "0001" "67" "0001" "6d")  # group "g", member "m"
    value = bytes.fromhex(
        "0000"  # version 0
        "00" "00"  # instance_id, rack_id: null
        "02" "63" "04" "2f6831"  # client_id "c", client_host "/h1"
        "02" "02" "74"  # subscribed_topic_names ["t"]
        "00"  # subscribed_topic_regex: null
        "00002710"  # rebalance_timeout_ms 10000
        "08" "756e69666f726d"  # server_assignor "uniform"
        "01" "00" "10"  # one tagged field: tag 0 ClassicMemberMetadata, 16 bytes
        "01"  # present
        "0000afc8"  # session_timeout_ms 45000
        "02" "06" "72616e6765" "02" "ab" "00"  # one protocol "range", metadata ab, no tags
        "00"  # no tags in ClassicMemberMetadata
    )  # fmt: skip
    assert decode_record(record_key, value) == ConsumerGroupMember(
        "g", "m", None, None, "c", "/h1", ("t",), None, 10_000, "uniform", ClassicMemberProtocol(45_000, ("range",))
    )


def test_consumer_current_assignment_vector() -> None:
    record_key = bytes.fromhex("0008" "0001" "67" "0001" "6d")
    value = bytes.fromhex(
        "0000"  # version 0
        "00000005" "00000004"  # member_epoch 5, previous_member_epoch 4
        "01"  # state UNREVOKED_PARTITIONS
        "02" "000102030405060708090a0b0c0d0e0f" "03" "00000000" "00000002"  # assigned: 1 topic, [0, 2]
        "01" "00" "09" "03" "00000005" "00000005"  # its tagged assignment epochs [5, 5] (4.3)
        "01"  # partitions_pending_revocation: []
        "00"  # no tags
    )  # fmt: skip
    tp = TopicPartitions("00010203-0405-0607-0809-0a0b0c0d0e0f", (0, 2))
    assert decode_record(record_key, value) == CurrentAssignment("g", CONSUMER, "m", 5, 4, 1, (tp,), ())


def test_streams_member_vector() -> None:
    record_key = bytes.fromhex("0013" "0001" "67" "0001" "6d")  # type 19
    value = bytes.fromhex(
        "0000"  # version 0
        "00" "00" "02" "63" "02" "68"  # instance_id, rack_id null; client_id "c", client_host "h"
        "00007530" "00000002"  # rebalance_timeout_ms 30000, topology_epoch 2
        "02" "70"  # process_id "p"
        "01" "02" "78" "fde8" "00"  # user_endpoint present: host "x", port 65000, no tags
        "01"  # client_tags: []
        "00"  # no tags
    )  # fmt: skip
    assert decode_record(record_key, value) == StreamsGroupMember(
        "g", "m", None, None, "c", "h", 30_000, 2, "p", UserEndpoint("x", 65_000), ()
    )


# --- Malformed input -------------------------------------------------------------------


def test_truncation_message_names_record_field_and_byte() -> None:
    record_key, value = encode(consumer_member())
    # version (2) + instance_id "static-1" (9) + rack_id "rack-a" (7) + client_id (11): client_host starts at 29
    expected = r"^ConsumerGroupMemberMetadataValue v0: truncated at byte 30 reading client_host$"
    with pytest.raises(MalformedRecord, match=expected):
        decode_record(record_key, value[:31])


def test_an_unreadable_value_reports_the_newest_layouts_error() -> None:
    record_key, value = encode(ShareGroupMetadata(G, 7, 1))
    with pytest.raises(MalformedRecord, match=r"^ShareGroupMetadataValue v0: 1 trailing bytes at byte 15$"):
        decode_record(record_key, value + b"\x00")


# Types whose v0 has an early-access layout besides the current one (3.7's, 4.0's): some
# cut of a current record is byte for byte a whole early-access one, which no decoder can
# tell apart (batches are CRC-checked: Kafka never hands out a cut value).
TWO_LAYOUTS = {4, 5, 7, 8, 11, 15}


@pytest.mark.parametrize(("record", "layout"), [(r, lay) for _, r, lay in SAMPLES], ids=SAMPLE_IDS)
def test_every_truncation_is_malformed(record: object, layout: str) -> None:
    record_key, value = encode(record, layout)
    for cut in range(len(value)):
        if record_key[1] in TWO_LAYOUTS:
            assert decode_or_malformed(record_key, value[:cut]) != record
        else:
            with pytest.raises(MalformedRecord):
                decode_record(record_key, value[:cut])
    for cut in range(len(record_key)):
        with pytest.raises(MalformedRecord):
            decode_record(record_key[:cut], value)


@pytest.mark.parametrize(("record", "layout"), [(r, lay) for _, r, lay in SAMPLES], ids=SAMPLE_IDS)
def test_trailing_bytes_are_malformed(record: object, layout: str) -> None:
    record_key, value = encode(record, layout)
    # the current layout's complaint, which an early-access record's trailing byte is not
    message = "trailing bytes" if layout == CURRENT else None
    with pytest.raises(MalformedRecord, match=message):
        decode_record(record_key, value + b"\x00")
    with pytest.raises(MalformedRecord, match="trailing bytes"):
        decode_record(record_key + b"\x00", None)


def test_a_null_required_field_is_malformed() -> None:
    record_key, value = encode(ShareGroupMember(G, M, None, "c", "h", ()))
    with pytest.raises(MalformedRecord, match="null client_id"):
        decode_record(record_key, value[:3] + b"\x00" + value[4:])  # client_id's length: 0 = null


# An epoch below Kafka's "none" (-1; -2 for a member's, LEAVE_GROUP_STATIC_MEMBER_EPOCH) is no
# record Kafka writes, and the events' schema refuses it: found by tests/fuzz/groups.py.
NEGATIVE_EPOCHS = [
    ConsumerGroupMetadata(G, -2, 0), ShareGroupMetadata(G, -3, 0), StreamsGroupMetadata(G, -65535, 0, -1),
    TargetAssignmentMetadata(G, CONSUMER, -2, 0), TargetAssignmentMetadata(G, STREAMS, -2, 0),
    CurrentAssignment(G, CONSUMER, M, -3, 1, 0, (), ()), CurrentAssignment(G, SHARE, M, 1, -3, 0, (), ()),
    StreamsCurrentAssignment(G, M, -3, 1, 1, StreamsTasks(), StreamsTasks()),
]


@pytest.mark.parametrize("record", NEGATIVE_EPOCHS, ids=[type(r).__name__ for r in NEGATIVE_EPOCHS])
def test_an_epoch_below_kafkas_none_is_malformed(record: object) -> None:
    with pytest.raises(MalformedRecord, match="epoch"):
        decode_record(*encode(record))


def test_a_static_member_away_keeps_its_epoch_of_minus_2_which_the_events_carry() -> None:
    away = CurrentAssignment(G, CONSUMER, M, -2, 5, 0, (), ())
    assert decode_record(*encode(away)) == away
    state = GroupState(G, "Reconciling", 5, members=(GroupMember(M, "c", "h", member_epoch=-2),))
    event = Event("c", "groups", "group", f"group:{G}", "upsert", 1, state)
    assert decode(encode_event(event)) == event


def test_random_bit_flips() -> None:
    rng = random.Random(848)
    for record_key, value in encoded_samples():
        for _ in range(200):
            flipped = bytearray(value)
            for _ in range(rng.randint(1, 4)):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            decode_or_malformed(record_key, bytes(flipped))


@settings(max_examples=400, deadline=None)
@given(
    record_type=st.integers(-2, 30),
    key_rest=st.binary(max_size=24),
    value=st.none() | st.binary(max_size=80),
    version=st.sampled_from([b"", b"\x00\x00", b"\x00\x01"]),
)
def test_any_bytes_give_a_record_or_malformed(record_type: int, key_rest: bytes, value: bytes | None,
                                              version: bytes) -> None:
    record_key = Writer().int16(record_type).done() + key_rest
    decode_or_malformed(record_key, None if value is None else version + value)


@settings(max_examples=600, deadline=None)
@given(sample=st.sampled_from(encoded_samples()), start=st.integers(0, 400), length=st.integers(0, 8),
       replacement=st.binary(max_size=8))
def test_any_edit_of_a_valid_record_gives_a_record_or_malformed(sample: tuple[bytes, bytes], start: int,
                                                                 length: int, replacement: bytes) -> None:
    """Bytes replaced, inserted or deleted anywhere in a valid value: the decoder goes deep."""
    record_key, value = sample
    start = min(start, len(value))
    decode_or_malformed(record_key, value[:start] + replacement + value[start + length:])
