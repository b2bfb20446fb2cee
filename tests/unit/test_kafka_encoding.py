"""collectors.kafka_encoding: the one reader of Kafka's encoding, for the KRaft metadata log, the
controllers' responses and the coordinators' records. Bytes built here (tests/unit/offsets_builders.py's
Writer, written from Kafka's message schemas apart from the reader); every failure names the struct,
the field and the byte."""
from __future__ import annotations

import re
from typing import Callable, Mapping

import pytest

from collectors.kafka_encoding import NO_EPOCH, STATIC_MEMBER_AWAY, MalformedRecord, Reader, tagged
from tests.unit.offsets_builders import Writer

DIR = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"


def fails(message: str) -> pytest.RaisesContext[MalformedRecord]:
    """The whole message, exactly."""
    return pytest.raises(MalformedRecord, match=f"^{re.escape(message)}$")


# ---------------------------------------------------------------- fixed width

def test_fixed_width_integers_are_big_endian_and_signed() -> None:
    r = Reader(b"\xff" + b"\xff\xfe" + b"\x80\x00\x00\x00" + b"\x00\x00\x00\x00\x00\x00\x01\x00" + b"\xff\xff"
               + b"\x7f")
    assert r.int8() == -1
    assert r.int16() == -2
    assert r.int32() == -2**31
    assert r.int64() == 256
    assert r.uint16() == 65535
    assert r.int8() == 127
    r.end()


def test_boolean_uuid_and_raw() -> None:
    r = Reader(b"\x00\x01\x05" + Writer().uuid(DIR).done() + b"xyz")
    assert (r.boolean(), r.boolean(), r.boolean()) == (False, True, True)   # any non-zero byte is true
    assert r.uuid() == DIR
    assert r.raw(3) == b"xyz" and isinstance(r.raw(0), bytes)
    r.end()


def test_reads_from_a_memoryview_as_from_bytes() -> None:
    """A batch's records are read from a view of the fetched bytes, not a copy of them."""
    data = Writer(flexible=True).int32(7).string("é").blob(b"ab").uuid(DIR).done()
    r = Reader(memoryview(data), flexible=True)
    assert (r.int32(), r.string(), r.blob(), r.uuid()) == (7, "é", b"ab", DIR)
    assert type(r.raw(0)) is bytes


# The struct is "S v1"; two bytes are read first, so each read starts at byte 2.
TRUNCATED: list[tuple[str, Callable[[Reader], object], bytes, int]] = [
    ("int8", lambda r: r.int8("f"), b"", 2),
    ("boolean", lambda r: r.boolean("f"), b"", 2),
    ("int16", lambda r: r.int16("f"), b"\x01", 2),
    ("uint16", lambda r: r.uint16("f"), b"", 2),
    ("int32", lambda r: r.int32("f"), b"\x00\x00\x01", 2),
    ("int64", lambda r: r.int64("f"), b"\x00" * 7, 2),
    ("epoch", lambda r: r.epoch("f"), b"\x00", 2),
    ("uuid", lambda r: r.uuid("f"), b"\x00" * 15, 2),
    ("raw", lambda r: r.raw(3, "f"), b"ab", 2),
    ("uvarint", lambda r: r.uvarint("f"), b"\x80\x80", 4),          # continuation bit on the last byte
    ("varint", lambda r: r.varint("f"), b"", 2),
    ("varlong", lambda r: r.varlong("f"), b"\xff" * 8, 10),
    ("string", lambda r: r.string("f"), b"\x00\x05ab", 4),           # says 5 bytes, has 2
    ("nullable_string", lambda r: r.nullable_string("f"), b"\x00", 2),
    ("blob", lambda r: r.blob("f"), b"\x00\x00\x00\x03a", 6),
    ("nullable_blob", lambda r: r.nullable_blob("f"), b"\x00\x00", 2),
    ("int32s", lambda r: r.int32s("f"), b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01\x00", 10),   # the second one
    ("array_length", lambda r: r.array_length("f"), b"\x00\x00\x00", 2),
]


@pytest.mark.parametrize(("read", "data", "at"), [t[1:] for t in TRUNCATED], ids=[t[0] for t in TRUNCATED])
def test_each_truncated_read_names_the_struct_the_field_and_the_byte(read: Callable[[Reader], object], data: bytes,
                                                                      at: int) -> None:
    r = Reader(b"\x00\x00" + data, "S v1")
    r.int16("before")
    with fails(f"S v1: truncated at byte {at} reading f"):
        read(r)


def test_without_a_struct_name_the_message_is_the_reason_alone() -> None:
    with fails("truncated at byte 0 reading leader_id"):
        Reader(b"").int32("leader_id")
    with fails("truncated at byte 0"):
        Reader(b"\x00").int32()


def test_a_reader_stops_at_its_stop_not_at_the_end_of_the_data() -> None:
    r = Reader(b"\xaa\x00\x00\x00\x01\x00\x00\x00\x02", "S", pos=1, stop=5)
    assert r.int32("a") == 1
    r.end()
    with fails("S: truncated at byte 5 reading b"):
        r.int32("b")


# ---------------------------------------------------------------- varints

@pytest.mark.parametrize(("data", "value"), [
    (b"\x00", 0), (b"\x01", 1), (b"\x7f", 127), (b"\x80\x01", 128), (b"\xac\x02", 300),
    (b"\xff\xff\xff\xff\x0f", 2**32 - 1), (b"\xff\xff\xff\xff\x7f", 2**35 - 1),
])
def test_unsigned_varint(data: bytes, value: int) -> None:
    r = Reader(data)
    assert r.uvarint() == value
    r.end()
    assert Writer().uvarint(value).done() == data


@pytest.mark.parametrize(("data", "value"), [
    (b"\x00", 0), (b"\x01", -1), (b"\x02", 1), (b"\x03", -2), (b"\x04", 2), (b"\x7f", -64), (b"\x80\x01", 64),
    (b"\xfe\xff\xff\xff\x0f", 2**31 - 1), (b"\xff\xff\xff\xff\x0f", -2**31),
])
def test_zigzag_varint_and_varlong(data: bytes, value: int) -> None:
    assert Reader(data).varint() == value
    assert Reader(data).varlong() == value


def test_a_varlong_holds_64_bits() -> None:
    assert Reader(b"\xfe" + b"\xff" * 8 + b"\x01").varlong() == 2**63 - 1
    assert Reader(b"\xff" * 9 + b"\x01").varlong() == -2**63


def test_a_varint_longer_than_kafkas_is_malformed() -> None:
    with fails("S: varint longer than 5 bytes at byte 5 reading count"):
        Reader(b"\x80" * 5 + b"\x01", "S").uvarint("count")
    with fails("varint longer than 5 bytes at byte 5 reading length"):
        Reader(b"\xff" * 6).varint("length")
    with fails("varint longer than 10 bytes at byte 10 reading timestamp delta"):
        Reader(b"\xff" * 11).varlong("timestamp delta")


# ---------------------------------------------------------------- strings, bytes and arrays: flexible or not

def test_non_flexible_lengths_are_int16_for_strings_and_int32_for_bytes_and_arrays() -> None:
    data = Writer().string("abc").string(None).blob(b"\x01\x02").blob(None).int32s([1, -1, 7]).array(None).done()
    assert data[:2] == b"\x00\x03" and data[5:7] == b"\xff\xff" and data[7:11] == b"\x00\x00\x00\x02"
    r = Reader(data, "S")
    assert (r.string("a"), r.nullable_string("b"), r.blob("c"), r.nullable_blob("d")) == ("abc", None, b"\x01\x02",
                                                                                        None)
    assert r.int32s("e") == (1, -1, 7)
    assert r.nullable_array("f", Reader.int8) is None
    r.end()


def test_flexible_lengths_are_compact_uvarints_of_length_plus_one() -> None:
    data = Writer(flexible=True).string("abc").string(None).string("").blob(b"\x01").blob(None).done()
    data += Writer(flexible=True).strings(["x", "yz"]).int32s([]).array(None).done()
    assert data[:1] == b"\x04" and data[4:5] == b"\x00"
    r = Reader(data, "S", flexible=True)
    assert (r.string("a"), r.nullable_string("b"), r.string("c")) == ("abc", None, "")
    assert (r.blob("d"), r.nullable_blob("e")) == (b"\x01", None)
    assert r.strings("f") == ("x", "yz")
    assert r.int32s("g") == ()
    assert r.nullable_int32s("h") is None
    r.end()


def test_the_same_bytes_read_flexible_or_not_differ() -> None:
    data = b"\x00\x02hi"
    assert Reader(data).string() == "hi"
    with fails("null s at byte 1"):
        Reader(data, flexible=True).string("s")   # a compact length of 0: null


def test_an_array_reads_each_item() -> None:
    data = Writer(flexible=True).array(2).int16(1).string("a").int16(2).string("bc").done()
    r = Reader(data, "S", flexible=True)
    assert r.array("pairs", lambda x: (x.int16("n"), x.string("s"))) == ((1, "a"), (2, "bc"))
    r.end()


@pytest.mark.parametrize("flexible", [False, True])
def test_null_where_a_value_is_required_is_malformed(flexible: bool) -> None:
    null = Writer(flexible).string(None).done()
    null_wide = Writer(flexible).blob(None).done()
    at = len(null_wide)
    with fails(f"S: null name at byte {len(null)}"):
        Reader(null, "S", flexible).string("name")
    with fails(f"S: null data at byte {at}"):
        Reader(null_wide, "S", flexible).blob("data")
    with fails(f"S: null items at byte {at}"):
        Reader(null_wide, "S", flexible).array("items", Reader.int8)
    with fails(f"S: null ids at byte {at}"):
        Reader(null_wide, "S", flexible).int32s("ids")
    with fails(f"S: null names at byte {at}"):
        Reader(null_wide, "S", flexible).strings("names")
    assert Reader(null, "S", flexible).nullable_string("name") is None
    assert Reader(null_wide, "S", flexible).nullable_blob("data") is None
    assert Reader(null_wide, "S", flexible).nullable_array("items", Reader.int8) is None
    assert Reader(null_wide, "S", flexible).nullable_array_length("items") is None


def after_one_byte(data: bytes, flexible: bool = False) -> Reader:
    r = Reader(data, "S", flexible)
    r.int8("before")
    return r


def test_a_length_below_minus_one_is_malformed() -> None:
    with fails("S: negative length -2 at byte 1 reading name"):
        after_one_byte(b"\x00\xff\xfe").string("name")
    with fails("S: negative length -2 at byte 1 reading data"):
        after_one_byte(b"\x00\xff\xff\xff\xfe").blob("data")
    with fails("S: negative length -1 at byte 1 reading key"):
        after_one_byte(b"\x00").raw(-1, "key")


@pytest.mark.parametrize("flexible", [False, True])
def test_a_string_not_in_utf8_is_malformed(flexible: bool) -> None:
    data = b"\x00" + (b"\x03" if flexible else b"\x00\x02") + b"\xff\xfe"
    with fails(f"S: invalid UTF-8 at byte {2 if flexible else 3} reading name"):
        after_one_byte(data, flexible).string("name")


@pytest.mark.parametrize("flexible", [False, True])
def test_an_absurd_array_count_is_rejected_before_reading_an_item(flexible: bool) -> None:
    calls = []

    def item(x: Reader) -> int:
        calls.append(1)
        return x.int8("item")

    huge = Writer(flexible).array(2**31 - 2).done() + b"\x00\x00"
    with fails(f"S: items count {2**31 - 2} at byte 0 exceeds the record"):
        Reader(huge, "S", flexible).array("items", item)
    with fails(f"S: items count {2**31 - 2} at byte 0 exceeds the record"):
        Reader(huge, "S", flexible).nullable_array("items", item)
    with fails(f"S: ids count {2**31 - 2} at byte 0 exceeds the record"):
        Reader(huge, "S", flexible).int32s("ids")
    assert calls == []


def test_an_array_count_of_the_bytes_left_is_read_item_by_item() -> None:
    """A count no larger than the bytes left passes the check; its items then fail where they run out."""
    r = Reader(Writer().array(2).done() + b"\x01\x02", "S")
    with fails("S: truncated at byte 6 reading item"):
        r.array("items", lambda x: x.int16("item"))


# ---------------------------------------------------------------- epochs

def test_an_epoch_below_kafkas_none_is_malformed() -> None:
    assert Reader(Writer().int32(NO_EPOCH).done()).epoch("generation") == -1
    with fails("S: generation -2 at byte 0 is below -1"):
        Reader(Writer().int32(-2).done(), "S").epoch("generation")
    assert Reader(Writer().int32(STATIC_MEMBER_AWAY).done()).member_epoch("member_epoch") == -2
    with fails("S: member_epoch -3 at byte 0 is below -2"):
        Reader(Writer().int32(-3).done(), "S").member_epoch("member_epoch")


# ---------------------------------------------------------------- tagged fields and the end

def test_tagged_fields_are_read_whole_or_skipped() -> None:
    section = Writer(flexible=True).tags({0: b"\x00\x00\x00\x2a", 3: b"\xde\xad", 7: b"\x02x"}).done()
    r = Reader(section + b"\x09", "S", flexible=True)
    tags = r.tagged_fields("value")
    assert sorted(tags) == [0, 3, 7]
    assert tagged(tags, 0, lambda x: x.int32("count"), -1) == 42
    assert tagged(tags, 7, lambda x: x.string("name"), "") == "x"
    assert tagged(tags, 5, lambda x: x.int32("absent"), -1) == -1     # absent: the schema's default
    assert r.int8("after") == 9                                        # right after the section
    r = Reader(section + b"\x09", "S", flexible=True)
    r.skip_tagged_fields("value")
    assert r.int8("after") == 9


def test_a_tagged_field_with_bytes_left_over_is_malformed_unless_read_leniently() -> None:
    def tags() -> Mapping[int, Reader]:
        data = Writer(flexible=True).tags({1: b"\x00\x00\x00\x05\xff\xff"}).done()
        return Reader(data, "S", flexible=True).tagged_fields("value")

    with fails("S value tag 1: 2 trailing bytes at byte 7"):
        tagged(tags(), 1, lambda x: x.int32("count"), 0)
    assert tagged(tags(), 1, lambda x: x.int32("count"), 0, whole=False) == 5


def test_a_tagged_field_is_read_within_its_own_bytes() -> None:
    """A field shorter than its reader needs does not read on into the next bytes."""
    r = Reader(Writer(flexible=True).tags({0: b"\x00\x01"}).done() + b"\x00\x00", "S", flexible=True)
    with fails("S value tag 0: truncated at byte 3 reading count"):
        tagged(r.tagged_fields("value"), 0, lambda x: x.int32("count"), 0, whole=False)


def test_a_tagged_field_running_past_the_end_is_malformed() -> None:
    with fails("S: truncated at byte 3 reading value tag 0"):
        Reader(b"\x01\x00\x0aabc", "S", flexible=True).skip_tagged_fields("value")
    with fails("S: truncated at byte 4 reading value tag"):
        Reader(b"\x02\x00\x01a", "S", flexible=True).tagged_fields("value")   # a second field missing
    with fails("S: truncated at byte 3 reading value tag 5 size"):
        Reader(b"\x01\x05\x80", "S", flexible=True).skip_tagged_fields("value")


def test_a_non_flexible_struct_has_no_tagged_fields() -> None:
    r = Reader(b"\x01\x00\x00", "S")
    assert r.tagged_fields("value") == {}
    r.skip_tagged_fields("value")
    assert r.pos == 0


def test_trailing_bytes_are_malformed() -> None:
    r = Reader(b"\x00\x01\x02\x03\x04", "S v0")
    r.int16("a")
    r.int8("b")
    with fails("S v0: 2 trailing bytes at byte 3"):
        r.end()


def test_the_one_error_is_a_value_error() -> None:
    assert issubclass(MalformedRecord, ValueError)
