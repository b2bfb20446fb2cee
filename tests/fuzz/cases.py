"""What a fuzz case is, and its bytes for a coverage-guided fuzzer.

A case is a sequence of messages, each a fixed number of fields (its target's arity), each
field bytes or None: one znode read is (path, data), one ``__consumer_offsets`` record is
(key, value), a metadata log is many records. libFuzzer mutates flat bytes, so a case is
also written as fields in a row, each a marker byte and, for bytes, a length; any bytes read
back as some case (a broken length takes what is left), so every mutation of libFuzzer's is
a case too.
"""
from __future__ import annotations

Field = bytes | None
Message = tuple[Field, ...]
Case = tuple[Message, ...]

_NONE, _BYTES = 0, 1


def to_bytes(case: Case) -> bytes:
    out = bytearray()
    for message in case:
        for field in message:
            if field is None:
                out.append(_NONE)
            else:
                out.append(_BYTES)
                _uvarint(out, len(field))
                out += field
    return bytes(out)


def from_bytes(data: bytes, arity: int) -> Case:
    """The case ``data`` writes; fields past the last whole message are dropped."""
    fields: list[Field] = []
    pos = 0
    while pos < len(data):
        marker = data[pos]
        pos += 1
        if marker % 2 == _NONE:
            fields.append(None)
            continue
        length, pos = _read_uvarint(data, pos)
        fields.append(data[pos:pos + length])
        pos += length
    whole = len(fields) - len(fields) % arity
    return tuple(tuple(fields[i:i + arity]) for i in range(0, whole, arity))


def _uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data) and shift < 28:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    return value, pos
