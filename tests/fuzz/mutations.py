"""Structured mutation of valid cases: what turns a seed into the next fuzz case. Pure; every
choice comes from the ``random.Random`` it is given, so a case is replayed from its seed.

Three levels, as the inputs have them: the messages of a case (drop, repeat, reorder, take
one from another seed), the bytes of a field (flip, overwrite with the integers that end
ranges, cut, grow, splice) and, for a field holding JSON (znodes, events), its document
(a value replaced by one of another type or out of range, a key dropped or added, nesting).
"""
from __future__ import annotations

import json
import random
import struct
from typing import Any, Callable, Sequence

from tests.fuzz.cases import Case, Field, Message

# integers at the edges of Kafka's fields, in every width they are written in
_EDGES = (0, 1, -1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0xFFFFFFFF,
          2**63 - 1, -2**63, 1000)
_WIDTHS = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}
# JSON values no field of any kind takes everywhere: other types, range ends, odd text
_JSON_EDGES: tuple[Any, ...] = (None, True, False, 0, -1, -2, -3, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64,
                                -2**63 - 1, 10**30, 1.5, -0.0, 1e308, "", "0", "-1", "1e3", "x" * 70, "\ud800",
                                "\x00", "é", "9" * 25, [], {}, [1], [None], {"0": [1]}, [[[]]], {"": None})


def mutate(case: Case, rng: random.Random, pool: Sequence[Case], max_messages: int = 64) -> Case:
    """One to four mutations of ``case``; ``pool`` is where splices come from."""
    messages = list(case)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        if not messages or rng.random() < 0.15:
            _mutate_messages(messages, rng, pool, max_messages)
        else:
            i = rng.randrange(len(messages))
            messages[i] = _mutate_message(messages[i], rng, pool)
    return tuple(messages)


def _mutate_messages(messages: list[Message], rng: random.Random, pool: Sequence[Case], max_messages: int) -> None:
    donor = [m for m in rng.choice(pool) if len(m) == len(messages[0])] if messages and pool else []
    op = rng.randrange(4)
    if op == 0 and messages:
        del messages[rng.randrange(len(messages))]
    elif op == 1 and messages and len(messages) < max_messages:
        messages.insert(rng.randrange(len(messages) + 1), rng.choice(messages))
    elif op == 2 and len(messages) > 1:
        i, j = rng.randrange(len(messages)), rng.randrange(len(messages))
        messages[i], messages[j] = messages[j], messages[i]
    elif donor and len(messages) < max_messages:
        messages.insert(rng.randrange(len(messages) + 1), rng.choice(donor))


def _mutate_message(message: Message, rng: random.Random, pool: Sequence[Case]) -> Message:
    i = rng.randrange(len(message))
    fields = list(message)
    fields[i] = mutate_field(fields[i], rng, _donor_field(rng, pool, i))
    return tuple(fields)


def _donor_field(rng: random.Random, pool: Sequence[Case], i: int) -> bytes:
    case = rng.choice(pool) if pool else ()
    if not case:
        return b""
    message = rng.choice(case)
    field = message[i] if i < len(message) else None
    return field or b""


def mutate_field(field: Field, rng: random.Random, donor: bytes = b"") -> Field:
    if field is None:
        return donor if rng.random() < 0.5 else b""
    if rng.random() < 0.03:
        return None
    if field[:1] in (b"{", b"[") and rng.random() < 0.6:
        try:
            return mutate_json(json.loads(field), rng)
        except ValueError:
            pass
    return mutate_bytes(field, rng, donor)


def mutate_bytes(data: bytes, rng: random.Random, donor: bytes = b"") -> bytes:
    buf = bytearray(data)
    op = rng.choice(_BYTE_OPS)
    op(buf, rng, donor)
    return bytes(buf)


def _flip(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    if buf:
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)


def _set_byte(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    if buf:
        buf[rng.randrange(len(buf))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))


def _set_int(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    width = rng.choice(tuple(_WIDTHS))
    if len(buf) < width:
        return
    at = rng.randrange(len(buf) - width + 1)
    value = rng.choice(_EDGES) % (1 << (8 * width))
    buf[at:at + width] = struct.pack(_WIDTHS[width], value)


def _step_int(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    """An integer field one more or one less: lengths and counts just off."""
    if buf:
        at = rng.randrange(len(buf))
        buf[at] = (buf[at] + rng.choice((1, -1, 16, -16))) % 256


def _cut(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    if buf:
        at = rng.randrange(len(buf))
        del buf[at:at + rng.choice((1, 1, 2, 4, 8, len(buf)))]


def _truncate(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    del buf[rng.randrange(len(buf) + 1):]


def _insert(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    at = rng.randrange(len(buf) + 1)
    n = rng.choice((1, 1, 2, 4, 8, 32))
    chunk = rng.choice((bytes(n), b"\xff" * n, b"\x80" * n, rng.randbytes(n)))
    buf[at:at] = chunk


def _repeat(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    if buf:
        at = rng.randrange(len(buf))
        chunk = buf[at:at + rng.choice((1, 4, 16, 64))]
        buf[at:at] = chunk * rng.choice((1, 2, 16))


def _splice(buf: bytearray, rng: random.Random, donor: bytes) -> None:
    if donor:
        start = rng.randrange(len(donor))
        chunk = donor[start:start + rng.randrange(1, 64)]
        at = rng.randrange(len(buf) + 1)
        buf[at:at + (len(chunk) if rng.random() < 0.5 else 0)] = chunk


_BYTE_OPS: tuple[Callable[[bytearray, random.Random, bytes], None], ...] = (
    _flip, _set_byte, _set_int, _set_int, _step_int, _cut, _truncate, _insert, _repeat, _splice)


# ------------------------------------------------------------------ JSON documents

def mutate_json(doc: Any, rng: random.Random) -> bytes:
    """The document with one of its values, or keys, changed; written back as JSON."""
    spots = _spots(doc)
    parent, key = rng.choice(spots) if spots else (None, None)
    op = rng.randrange(6)
    if parent is None:
        doc = rng.choice(_JSON_EDGES)
    elif op <= 2:
        parent[key] = rng.choice(_JSON_EDGES)
    elif op == 3:
        del parent[key]
    elif op == 4 and isinstance(parent, dict):
        parent[rng.choice(("version", "x", "", "0", "\ud800", str(key) + "_"))] = rng.choice(_JSON_EDGES)
    else:
        parent[key] = rng.choice(([parent[key]], {"0": parent[key]}, [parent[key]] * 3))
    return json.dumps(doc).encode()


def _spots(doc: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every value below the root."""
    out = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            out.append((node, key))
            stack.append(value)
    return out
