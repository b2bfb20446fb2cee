"""Kafka's binary encoding: the one bounds-checked reader of the KRaft metadata log and the
controllers' responses (collectors/kraft) and of the coordinators' records (collectors/groups/codec),
and the writer of the few requests the KRaft collector sends (collectors/kraft/wire.py). Pure, and the
standard library only.

Big-endian integers; non-flexible versions have int16-length strings and int32-length bytes and
arrays (-1 = null); flexible versions (KIP-482) have unsigned-varint "compact" lengths (length + 1,
0 = null) and end every struct with tagged fields, which a reader skips unless asked for them, so
a newer Kafka's additions are ignored, not misread. Every failure is one :class:`MalformedRecord`
naming the struct, the field and the byte it was read at.

The KRaft collector's hot path (a snapshot's records, 100k and more a CPU-second) reads through it: the
fixed-width reads unpack at an offset (no slice), one-byte varints and lengths take a short path, and a
field's name is a plain argument, made into a message only when the read fails.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping, TypeVar

T = TypeVar("T")

_INT16, _UINT16 = struct.Struct(">h"), struct.Struct(">H")
INT32, _INT64 = struct.Struct(">i"), struct.Struct(">q")
INT32S = tuple(struct.Struct(f">{n}i") for n in range(128))   # an array of broker ids in one unpack

NO_EPOCH = -1
STATIC_MEMBER_AWAY = -2   # a member's epoch while its static member is away (LEAVE_GROUP_STATIC_MEMBER_EPOCH)

_VARINT_BYTES, _VARLONG_BYTES = 5, 10   # Kafka's (u)varints hold 32 bits, its varlongs 64


def uuid_text(raw: bytes | memoryview) -> str:
    """16 bytes of a uuid in its canonical text form (uuid.UUID's own str() takes three times as long)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class MalformedRecord(ValueError):
    """Bytes that do not follow Kafka's encoding (a record, a batch, a response); the message says
    which struct, which field and which byte."""


class Reader:
    """A cursor over ``data[pos:stop]``, one struct's bytes (``what`` names it in errors); every read
    checks bounds before unpacking. ``flexible`` decides the lengths of strings, bytes and arrays."""

    __slots__ = ("data", "pos", "stop", "what", "flexible")

    def __init__(self, data: bytes | memoryview, what: str = "", flexible: bool = False, pos: int = 0,
                 stop: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.stop = len(data) if stop is None else stop
        self.what = what
        self.flexible = flexible

    def fail(self, reason: str) -> MalformedRecord:
        return MalformedRecord(f"{self.what}: {reason}" if self.what else reason)

    def _truncated(self, pos: int, field: str) -> MalformedRecord:
        return self.fail(f"truncated at byte {pos} reading {field}" if field else f"truncated at byte {pos}")

    # ------------------------------------------------------------------ fixed width

    def int8(self, field: str = "") -> int:
        pos = self.pos
        if pos >= self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + 1
        b = self.data[pos]
        return b - 256 if b > 127 else b

    def boolean(self, field: str = "") -> bool:
        pos = self.pos
        if pos >= self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + 1
        return self.data[pos] != 0

    def int16(self, field: str = "") -> int:
        pos = self.pos
        if pos + 2 > self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + 2
        return _INT16.unpack_from(self.data, pos)[0]

    def uint16(self, field: str = "") -> int:
        pos = self.pos
        if pos + 2 > self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + 2
        return _UINT16.unpack_from(self.data, pos)[0]

    def int32(self, field: str = "") -> int:
        pos = self.pos
        if pos + 4 > self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + 4
        return INT32.unpack_from(self.data, pos)[0]

    def int64(self, field: str = "") -> int:
        pos = self.pos
        if pos + 8 > self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + 8
        return _INT64.unpack_from(self.data, pos)[0]

    def epoch(self, field: str = "", lowest: int = NO_EPOCH) -> int:
        """An int32 epoch or generation: below ``lowest`` (Kafka's "none") is no record Kafka writes."""
        start = self.pos
        value = self.int32(field)
        if value < lowest:
            raise self.fail(f"{field} {value} at byte {start} is below {lowest}")
        return value

    def member_epoch(self, field: str = "") -> int:
        return self.epoch(field, STATIC_MEMBER_AWAY)

    def uuid(self, field: str = "") -> str:
        """A 16-byte uuid in its canonical text form (as the collectors name topic ids)."""
        pos = self.pos
        if pos + 16 > self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + 16
        return uuid_text(self.data[pos:pos + 16])

    def raw(self, n: int, field: str = "") -> bytes:
        """``n`` bytes as they are."""
        pos = self.pos
        if n < 0:
            raise self.fail(f"negative length {n} at byte {pos} reading {field}")
        if pos + n > self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + n
        return bytes(self.data[pos:pos + n])

    # ------------------------------------------------------------------ varints

    def uvarint(self, field: str = "") -> int:
        """An unsigned varint (lengths, counts, tags): at most 5 bytes, as Kafka's."""
        pos = self.pos
        if pos < self.stop:
            b = self.data[pos]
            if b < 0x80:   # most are one byte
                self.pos = pos + 1
                return b
        return self._long_varint(field, _VARINT_BYTES)

    def varint(self, field: str = "") -> int:
        """A zig-zag signed varint (a record's length, offset delta, key and value lengths)."""
        n = self.uvarint(field)
        return (n >> 1) ^ -(n & 1)

    def varlong(self, field: str = "") -> int:
        """A zig-zag signed varint of up to 64 bits (a record's timestamp delta)."""
        pos = self.pos
        if pos < self.stop:
            b = self.data[pos]
            if b < 0x80:
                self.pos = pos + 1
                return (b >> 1) ^ -(b & 1)
        n = self._long_varint(field, _VARLONG_BYTES)
        return (n >> 1) ^ -(n & 1)

    def _long_varint(self, field: str, most: int) -> int:
        data, pos, stop = self.data, self.pos, self.stop
        value = 0
        for shift in range(0, 7 * most, 7):
            if pos >= stop:
                raise self._truncated(pos, field)
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return value
        raise self.fail(f"varint longer than {most} bytes at byte {pos} reading {field}")

    # ------------------------------------------------------------------ strings and bytes

    def _length(self, field: str, wide: bool) -> int | None:
        """A length prefix; None encodes null (-1, or 0 in compact form)."""
        start = self.pos
        if self.flexible:
            if start < self.stop and self.data[start] < 0x80:
                self.pos = start + 1
                length = self.data[start] - 1
            else:
                length = self._long_varint(field, _VARINT_BYTES) - 1
        else:
            length = self.int32(field) if wide else self.int16(field)
        if length < 0:
            if length == -1:
                return None
            raise self.fail(f"negative length {length} at byte {start} reading {field}")
        return length

    def nullable_string(self, field: str = "") -> str | None:
        length = self._length(field, False)
        if length is None:
            return None
        pos = self.pos
        if pos + length > self.stop:
            raise self._truncated(pos, field)
        self.pos = pos + length
        try:
            return str(self.data[pos:pos + length], "utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"invalid UTF-8 at byte {pos} reading {field}") from None

    def string(self, field: str = "") -> str:
        value = self.nullable_string(field)
        if value is None:
            raise self.fail(f"null {field} at byte {self.pos}")
        return value

    def nullable_blob(self, field: str = "") -> bytes | None:
        length = self._length(field, True)
        return None if length is None else self.raw(length, field)

    def blob(self, field: str = "") -> bytes:
        length = self._length(field, True)
        if length is None:
            raise self.fail(f"null {field} at byte {self.pos}")
        return self.raw(length, field)

    # ------------------------------------------------------------------ arrays

    def nullable_array_length(self, field: str = "") -> int | None:
        start = self.pos
        count = self._length(field, True)
        # Every element takes at least one byte: rejects absurd counts before looping.
        if count is not None and count > self.stop - self.pos:
            raise self.fail(f"{field} count {count} at byte {start} exceeds the record")
        return count

    def array_length(self, field: str = "") -> int:
        count = self.nullable_array_length(field)
        if count is None:
            raise self.fail(f"null {field} at byte {self.pos}")
        return count

    def array(self, field: str, item: Callable[[Reader], T]) -> tuple[T, ...]:
        return tuple([item(self) for _ in range(self.array_length(field))])

    def nullable_array(self, field: str, item: Callable[[Reader], T]) -> tuple[T, ...] | None:
        count = self.nullable_array_length(field)
        return None if count is None else tuple([item(self) for _ in range(count)])

    def strings(self, field: str = "") -> tuple[str, ...]:
        return self.array(field, lambda r: r.string(field))

    def nullable_int32s(self, field: str = "") -> tuple[int, ...] | None:
        """An array of int32 (broker ids, partitions) in one unpack."""
        pos = self.pos
        if self.flexible and pos < self.stop and self.data[pos] < 0x80:   # a one-byte count, inline: hot in KRaft
            count = self.data[pos] - 1
            pos += 1
            self.pos = pos
            if count < 0:
                return None
            if count > self.stop - pos:
                raise self.fail(f"{field} count {count} at byte {pos - 1} exceeds the record")
        else:
            count = self.nullable_array_length(field)
            if count is None:
                return None
            pos = self.pos
        end = pos + 4 * count
        if end > self.stop:
            raise self._truncated(pos + 4 * ((self.stop - pos) // 4), field)   # the first int32 cut
        self.pos = end
        unpack = INT32S[count] if count < len(INT32S) else struct.Struct(f">{count}i")
        return unpack.unpack_from(self.data, pos)

    def int32s(self, field: str = "") -> tuple[int, ...]:
        ids = self.nullable_int32s(field)
        if ids is None:
            raise self.fail(f"null {field} at byte {self.pos}")
        return ids

    # ------------------------------------------------------------------ tagged fields and the end

    def tagged_fields(self, field: str = "") -> Mapping[int, Reader]:
        """A flexible struct's tagged fields, each as a reader over its own bytes (which the caller
        reads with :func:`tagged`, or not at all: an unread tag is skipped, as a newer Kafka's
        additions must be). Nothing in a non-flexible version."""
        tags = self._tags(field, True)
        return _NO_TAGS if tags is None else tags

    def skip_tagged_fields(self, field: str = "") -> None:
        pos = self.pos
        if self.flexible and pos < self.stop and self.data[pos] == 0:   # most structs have none: inline
            self.pos = pos + 1
        else:
            self._tags(field, False)

    def _tags(self, field: str, keep: bool) -> dict[int, Reader] | None:
        if not self.flexible:
            return None
        data, pos = self.data, self.pos
        if pos < self.stop and data[pos] == 0:   # most structs have none
            self.pos = pos + 1
            return None
        found: dict[int, Reader] | None = {} if keep else None
        for _ in range(self._tag_part(field, "tag count")):
            tag = self._tag_part(field, "tag")
            size = self._tag_part(field, "size", tag)
            start = self.pos
            if start + size > self.stop:
                raise self._truncated(start, f"{field} tag {tag}".lstrip())
            self.pos = start + size
            if found is not None:
                found[tag] = _TagReader(data, self.what, start, start + size, field, tag)
        return found

    def _tag_part(self, field: str, part: str, tag: int = -1) -> int:
        """A tag section's count, a tag, or a tag's size: a uvarint, named ("<field> tag 3 size") only when
        it is not one byte."""
        pos = self.pos
        if pos < self.stop and self.data[pos] < 0x80:
            self.pos = pos + 1
            return self.data[pos]
        name = f"{field} tag {tag} {part}" if tag >= 0 else f"{field} {part}"
        return self._long_varint(name.lstrip(), _VARINT_BYTES)

    def end(self) -> None:
        """No bytes may follow the struct."""
        if self.pos != self.stop:
            raise self.fail(f"{self.stop - self.pos} trailing bytes at byte {self.pos}")


class _TagReader(Reader):
    """A tagged field's bytes, named "<struct> <field> tag <n>" in errors: the name is built only on failure
    (PartitionChangeRecords, by the hundred thousand, have two or three tags each)."""

    __slots__ = ("tags_field", "tag")

    def __init__(self, data: bytes | memoryview, what: str, pos: int, stop: int, tags_field: str, tag: int) -> None:
        self.data = data
        self.pos = pos
        self.stop = stop
        self.what = what
        self.flexible = True
        self.tags_field = tags_field
        self.tag = tag

    def fail(self, reason: str) -> MalformedRecord:
        name = " ".join(part for part in (self.what, self.tags_field, f"tag {self.tag}") if part)
        return MalformedRecord(f"{name}: {reason}")


_NO_TAGS: Mapping[int, Reader] = MappingProxyType({})


def tagged(tags: Mapping[int, Reader], tag: int, read: Callable[[Reader], T], default: T, whole: bool = True) -> T:
    """One tagged field read from its bytes, or its schema default when absent. ``whole``: every byte
    of it is read (else the bytes after what ``read`` reads are ignored, as Kafka's own generated
    readers ignore them)."""
    reader = tags.get(tag)
    if reader is None:
        return default
    value = read(reader)
    if whole:
        reader.end()
    return value


_INT8 = struct.Struct(">b")


@dataclass
class Writer:
    """A request's bytes, written in the order of its schema's fields."""
    parts: list[bytes] = field(default_factory=list)

    def raw(self, b: bytes) -> "Writer":
        self.parts.append(b)
        return self

    def int8(self, v: int) -> "Writer":
        return self.raw(_INT8.pack(v))

    def int16(self, v: int) -> "Writer":
        return self.raw(_INT16.pack(v))

    def int32(self, v: int) -> "Writer":
        return self.raw(INT32.pack(v))

    def int64(self, v: int) -> "Writer":
        return self.raw(_INT64.pack(v))

    def uvarint(self, v: int) -> "Writer":
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return self.raw(bytes(out))

    def string(self, s: str | None) -> "Writer":   # non-flexible, nullable
        if s is None:
            return self.int16(-1)
        b = s.encode()
        return self.int16(len(b)).raw(b)

    def compact_string(self, s: str | None) -> "Writer":
        if s is None:
            return self.uvarint(0)
        b = s.encode()
        return self.uvarint(len(b) + 1).raw(b)

    def compact_bytes(self, b: bytes) -> "Writer":
        return self.uvarint(len(b) + 1).raw(b)

    def count(self, n: int) -> "Writer":            # a compact array's length
        return self.uvarint(n + 1)

    def no_tags(self) -> "Writer":
        return self.uvarint(0)

    def bytes(self) -> bytes:
        return b"".join(self.parts)
