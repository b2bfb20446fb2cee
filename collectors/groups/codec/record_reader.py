"""A bounds-checked reader of Kafka's generated message encoding, for the records of the
coordinators' internal topics (``__consumer_offsets``, ``__share_group_state``).

Big-endian integers; non-flexible versions have int16-length strings and int32-length bytes
and arrays (-1 = null); flexible versions (KIP-482) have unsigned-varint "compact" lengths
(length + 1, 0 = null) and end every struct with tagged fields. Every failure is a
:class:`MalformedRecord` naming the struct, the field and the byte it was read at.
"""

from __future__ import annotations

import struct
from typing import Callable, Mapping, TypeVar

T = TypeVar("T")

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


NO_EPOCH = -1
STATIC_MEMBER_AWAY = -2   # a member's epoch while its static member is away (LEAVE_GROUP_STATIC_MEMBER_EPOCH)


class MalformedRecord(ValueError):
    """The bytes are not a valid coordinator record of a known version."""


class Reader:
    """Cursor over one struct's bytes; every read checks bounds before unpacking."""

    def __init__(self, data: bytes, what: str, flexible: bool = False) -> None:
        self._data = data
        self._pos = 0
        self.what = what
        self.flexible = flexible

    def fail(self, reason: str) -> MalformedRecord:
        return MalformedRecord(f"{self.what}: {reason}")

    def _take(self, n: int, field: str) -> bytes:
        if n > len(self._data) - self._pos:
            raise self.fail(f"truncated at byte {self._pos} reading {field}")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def int8(self, field: str) -> int:
        return _INT8.unpack(self._take(1, field))[0]

    def int16(self, field: str) -> int:
        return _INT16.unpack(self._take(2, field))[0]

    def uint16(self, field: str) -> int:
        return _UINT16.unpack(self._take(2, field))[0]

    def int32(self, field: str) -> int:
        return _INT32.unpack(self._take(4, field))[0]

    def int64(self, field: str) -> int:
        return _INT64.unpack(self._take(8, field))[0]

    def epoch(self, field: str, lowest: int = NO_EPOCH) -> int:
        """An int32 epoch or generation: below ``lowest`` (Kafka's "none") is no record Kafka writes."""
        start = self._pos
        value = self.int32(field)
        if value < lowest:
            raise self.fail(f"{field} {value} at byte {start} is below {lowest}")
        return value

    def member_epoch(self, field: str) -> int:
        return self.epoch(field, STATIC_MEMBER_AWAY)

    def uuid(self, field: str) -> str:
        """A 16-byte uuid, in the canonical text form the KRaft collector uses for topic ids."""
        h = self._take(16, field).hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def uvarint(self, field: str) -> int:
        # Kafka's unsigned varints hold 32-bit values: at most 5 bytes.
        value = 0
        for shift in range(0, 35, 7):
            byte = self._take(1, field)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise self.fail(f"varint longer than 5 bytes at byte {self._pos} reading {field}")

    def _length(self, field: str, wide: bool) -> int | None:
        """A length prefix; None encodes null (-1, or 0 in compact form)."""
        start = self._pos
        if self.flexible:
            length = self.uvarint(field) - 1
        else:
            length = self.int32(field) if wide else self.int16(field)
        if length == -1:
            return None
        if length < 0:
            raise self.fail(f"negative length {length} at byte {start} reading {field}")
        return length

    def _non_null(self, length: int | None, field: str) -> int:
        if length is None:
            raise self.fail(f"null {field} at byte {self._pos}")
        return length

    def nullable_string(self, field: str) -> str | None:
        length = self._length(field, wide=False)
        if length is None:
            return None
        start = self._pos
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"invalid UTF-8 at byte {start} reading {field}") from None

    def string(self, field: str) -> str:
        value = self.nullable_string(field)
        if value is None:
            raise self.fail(f"null {field} at byte {self._pos}")
        return value

    def blob(self, field: str) -> bytes:
        return self._take(self._non_null(self._length(field, wide=True), field), field)

    def nullable_blob(self, field: str) -> bytes | None:
        length = self._length(field, wide=True)
        return None if length is None else self._take(length, field)

    def array_length(self, field: str) -> int:
        return self._non_null(self._nullable_array_length(field), field)

    def _nullable_array_length(self, field: str) -> int | None:
        start = self._pos
        count = self._length(field, wide=True)
        # Every element takes at least one byte: rejects absurd counts before looping.
        if count is not None and count > len(self._data) - self._pos:
            raise self.fail(f"{field} count {count} at byte {start} exceeds the record")
        return count

    def array(self, field: str, item: Callable[[Reader], T]) -> tuple[T, ...]:
        return tuple(item(self) for _ in range(self.array_length(field)))

    def strings(self, field: str) -> tuple[str, ...]:
        return self.array(field, lambda r: r.string(field))

    def int32s(self, field: str) -> tuple[int, ...]:
        return self.array(field, lambda r: r.int32(field))

    def tagged_fields(self, field: str) -> Mapping[int, Reader]:
        """A flexible struct's tagged fields, each as a reader over its own bytes (which the
        caller reads whole, or not at all: an unread tag is skipped, as a newer Kafka's
        additions must be). Nothing in a non-flexible version."""
        if not self.flexible:
            return {}
        tags: dict[int, Reader] = {}
        for _ in range(self.uvarint(f"{field} tag count")):
            tag = self.uvarint(f"{field} tag")
            raw = self._take(self.uvarint(f"{field} tag {tag} size"), f"{field} tag {tag}")
            tags[tag] = Reader(raw, f"{self.what} {field} tag {tag}", flexible=True)
        return tags

    def skip_tagged_fields(self, field: str) -> None:
        self.tagged_fields(field)

    def end(self) -> None:
        if self._pos != len(self._data):
            extra = len(self._data) - self._pos
            raise self.fail(f"{extra} trailing bytes at byte {self._pos}")


def tagged(tags: Mapping[int, Reader], tag: int, read: Callable[[Reader], T], default: T) -> T:
    """One tagged field read whole from its bytes, or its schema default when absent."""
    reader = tags.get(tag)
    if reader is None:
        return default
    value = read(reader)
    reader.end()
    return value
