"""Tests of collectors.groups.codec.share_state_codec, the records of __share_group_state: both
types in every layout (4.0's, 4.1's, 4.2's) round-tripped through encoders written from the
schemas, tombstones, unknown types and versions, hand-built byte vectors, and malformed input
(truncations, trailing bytes, fuzzing)."""

from __future__ import annotations

from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.groups.codec.share_state_codec import (
    ShareSnapshot,
    ShareStateRecord,
    ShareStateRecordType,
    ShareStateTombstone,
    ShareUpdate,
    StateBatch,
    UnknownRecord,
    decode_share_state,
)
from collectors.kafka_encoding import MalformedRecord
from tests.unit.offsets_builders import (CURRENT, EARLY_ACCESS, Writer, decode_or_malformed, encode_share_state,
                                        share_state_key)
from tests.unit.share_state_samples import G, ORDERS, SAMPLES

decoded_or_malformed = partial(decode_or_malformed, decoder=decode_share_state, records=ShareStateRecord)

SAMPLE_IDS = [sample_id for sample_id, _, _ in SAMPLES]
RECORDS = [(record, layout) for _, record, layout in SAMPLES]


def test_samples_cover_both_types_in_every_layout() -> None:
    assert {(type(record), layout) for record, layout in RECORDS} == {
        (ShareSnapshot, CURRENT), (ShareSnapshot, EARLY_ACCESS), (ShareUpdate, CURRENT), (ShareUpdate, EARLY_ACCESS),
    }


@pytest.mark.parametrize(("record", "layout"), RECORDS, ids=SAMPLE_IDS)
def test_round_trip(record: ShareSnapshot | ShareUpdate, layout: str) -> None:
    assert decode_share_state(*encode_share_state(record, layout)) == record


@pytest.mark.parametrize(("record", "layout"), RECORDS, ids=SAMPLE_IDS)
def test_tagged_fields_of_later_versions_are_skipped(record: ShareSnapshot | ShareUpdate, layout: str) -> None:
    later = {5: b"\x00\x01", 30: b"a later Kafka's field"}
    assert decode_share_state(*encode_share_state(record, layout, tags=later)) == record


# --- Tombstones, unknown types and versions -------------------------------------------


@pytest.mark.parametrize("record_type", list(ShareStateRecordType))
def test_tombstone_names_the_share_partition(record_type: ShareStateRecordType) -> None:
    record_key = share_state_key(record_type, G, ORDERS, 7)
    assert decode_share_state(record_key, None) == ShareStateTombstone(G, ORDERS, 7, record_type)


def test_record_types_follow_kafkas_numbering() -> None:
    assert [(t.name, t.value) for t in ShareStateRecordType] == [("SHARE_SNAPSHOT", 0), ("SHARE_UPDATE", 1)]


@pytest.mark.parametrize("value", [None, Writer(flexible=True).int16(0).done() + b"a future record"])
def test_an_unknown_record_type_is_unknown_not_malformed(value: bytes | None) -> None:
    record_key = share_state_key(2, G, ORDERS, 7)
    assert decode_share_state(record_key, value) == UnknownRecord(2, None if value is None else 0)


@pytest.mark.parametrize("record_type", list(ShareStateRecordType))
def test_a_newer_value_version_is_unknown_not_malformed(record_type: ShareStateRecordType) -> None:
    value = Writer(flexible=True).int16(1).done() + b"a future layout"
    assert decode_share_state(share_state_key(record_type, G, ORDERS, 7), value) == UnknownRecord(record_type, 1)


# --- Byte-exact vectors built by hand from the schemas -------------------------------


TOPIC_ID = "00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_snapshot_vector() -> None:
    record_key = bytes.fromhex("0000" "0001" "67" "000102030405060708090a0b0c0d0e0f" "00000002")  # "g", partition 2
    value = bytes.fromhex(
        "0000"  # version 0
        "00000003" "00000001" "00000005"  # snapshot epoch 3, state epoch 1, leader epoch 5
        "0000000000000064"  # start offset 100
        "0000018bcfe56800" "0000018bcfe56801"  # create and write timestamps
        "02" "0000000000000064" "0000000000000067" "04" "0005" "00"  # one batch: 100-103 archived, 5 deliveries
        "01" "00" "04" "00000002"  # tag 0, 4 bytes: delivery complete count 2 (4.2)
    )  # fmt: skip
    assert decode_share_state(record_key, value) == ShareSnapshot(
        "g", TOPIC_ID, 2, 3, 1, 5, 100, 1_700_000_000_000, 1_700_000_000_001, 2, (StateBatch(100, 103, 4, 5),)
    )


def test_update_vector_of_4_0() -> None:
    record_key = bytes.fromhex("0001" "0001" "67" "000102030405060708090a0b0c0d0e0f" "00000002")
    value = bytes.fromhex(
        "0000"  # version 0
        "fffe" "00000005"  # snapshot epoch 65534 (uint16), leader epoch 5
        "ffffffffffffffff"  # start offset -1: unchanged
        "02" "0000000000000068" "0000000000000068" "02" "0001" "00"  # one batch: 104 acknowledged
        "00"  # no tags
    )  # fmt: skip
    assert decode_share_state(record_key, value) == ShareUpdate(
        "g", TOPIC_ID, 2, 65_534, 5, -1, -1, (StateBatch(104, 104, 2, 1),)
    )


# --- Malformed input -------------------------------------------------------------------


def test_truncation_message_names_record_field_and_byte() -> None:
    record_key, value = encode_share_state(RECORDS[0][0])
    # version (2) + three epochs (12) + start offset (8) + create timestamp (8): the write timestamp at 30
    with pytest.raises(MalformedRecord, match=r"^ShareSnapshotValue v0: truncated at byte 30 reading write_timestamp$"):
        decode_share_state(record_key, value[:33])
    # type (2) + the group id's length (2) and its 12 bytes: the topic id at 16
    with pytest.raises(MalformedRecord, match=r"^ShareSnapshotKey: truncated at byte 16 reading topic_id$"):
        decode_share_state(record_key[:20], value)


def test_a_null_group_id_is_malformed() -> None:
    with pytest.raises(MalformedRecord, match="^ShareUpdateKey: null group_id at byte 4$"):
        decode_share_state(Writer().int16(1).string(None).uuid(ORDERS).int32(7).done(), None)


def test_no_key_is_malformed() -> None:
    with pytest.raises(MalformedRecord, match="no key"):
        decode_share_state(None, None)


@pytest.mark.parametrize(("record", "layout"), RECORDS, ids=SAMPLE_IDS)
def test_every_truncation_is_malformed(record: ShareSnapshot | ShareUpdate, layout: str) -> None:
    record_key, value = encode_share_state(record, layout)
    # Both types have 4.0's layout besides 4.1's: a cut of one may be byte for byte a whole
    # record of the other, which no decoder can tell apart (Kafka never hands out a cut value).
    for cut in range(len(value)):
        assert decoded_or_malformed(record_key, value[:cut]) != record
    for cut in range(len(record_key)):
        with pytest.raises(MalformedRecord):
            decode_share_state(record_key[:cut], value)


@pytest.mark.parametrize(("record", "layout"), RECORDS, ids=SAMPLE_IDS)
def test_trailing_bytes_are_malformed(record: ShareSnapshot | ShareUpdate, layout: str) -> None:
    record_key, value = encode_share_state(record, layout)
    with pytest.raises(MalformedRecord):
        decode_share_state(record_key, value + b"\x00")
    with pytest.raises(MalformedRecord, match="trailing bytes"):
        decode_share_state(record_key + b"\x00", None)


# Keys of a known type with any group id bytes and anything after them (a valid key, often,
# whose value the decoder then reads), or of any type with any bytes.
ORDERS_KEY_TAIL = Writer().uuid(ORDERS).int32(7).done()  # a key's topic id and partition
KNOWN_TYPE_KEYS = st.builds(
    lambda record_type, group, rest: Writer().int16(record_type).int16(len(group)).done() + group + rest,
    st.sampled_from([0, 1]), st.binary(max_size=6), st.sampled_from([b"", ORDERS_KEY_TAIL]) | st.binary(max_size=24),
)
ANY_KEYS = st.builds(
    lambda record_type, rest: Writer().int16(record_type).done() + rest, st.integers(-2, 3), st.binary(max_size=30)
)


@settings(max_examples=400, deadline=None)
@given(record_key=KNOWN_TYPE_KEYS | ANY_KEYS, value=st.none() | st.binary(max_size=80),
       version=st.sampled_from([b"", b"\x00\x00", b"\x00\x01"]))
def test_any_bytes_give_a_record_or_malformed(record_key: bytes, value: bytes | None, version: bytes) -> None:
    decoded_or_malformed(record_key, None if value is None else version + value)


@settings(max_examples=400, deadline=None)
@given(sample=st.sampled_from(RECORDS), start=st.integers(0, 120), length=st.integers(0, 8),
       replacement=st.binary(max_size=8))
def test_any_edit_of_a_valid_record_gives_a_record_or_malformed(
    sample: tuple[ShareSnapshot | ShareUpdate, str], start: int, length: int, replacement: bytes
) -> None:
    """Bytes replaced, inserted or deleted anywhere in a valid value: the decoder goes deep."""
    record_key, value = encode_share_state(*sample)
    start = min(start, len(value))
    decoded_or_malformed(record_key, value[:start] + replacement + value[start + length:])
