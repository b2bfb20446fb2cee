"""Consumer groups: each group's rebalances, from its records in ``__consumer_offsets``, read with a
decoder of just the records that say them (Kafka's group-coordinator/src/main/resources/common/message):

* the key: int16 record type, then for the types below the group id (int16-length string);
* GroupMetadataValue (type 2, a classic group): int16 version, protocolType (a string, compact from
  v4), generation int32, protocol and leader (nullable strings), currentStateTimestamp int64 (v2+), ...;
* ConsumerGroupMetadataValue (3, KIP-848), ShareGroupMetadataValue (11), StreamsGroupMetadataValue
  (17): int16 version, Epoch int32 (the group epoch), ...;
* no value (a tombstone): the group was deleted.

A rebalance is a new generation, or group epoch, of a group seen before; each one stepped over counts,
as kmon counts them. A group's first record is a first sight (as a group deleted and made again).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

from bench.oracle import MalformedLog, OracleTransition

GROUP_METADATA = 2
EPOCH_METADATA = {3: "consumer", 11: "share", 17: "streams"}   # record type -> the protocol of its groups
FIRST_FLEXIBLE = 4   # GroupMetadataValue's first flexible version: compact strings


@dataclass(frozen=True)
class GroupRecord:
    group: str
    generation: int | None   # None: deleted
    time_ms: int | None      # when it entered its state (a classic group's currentStateTimestamp, v2+)


def transitions(records: Iterable[tuple[bytes | None, bytes | None]]) -> list[OracleTransition]:
    """Every rebalance in ``records``: the (key, value) of ``__consumer_offsets``' records, each
    partition's in offset order (a group's records are all in one partition). A row's position is its
    record's index in ``records``."""
    last: dict[str, int] = {}   # group -> its generation so far
    rows = []
    for index, (key, value) in enumerate(records):
        record = read(key, value, index)
        if record is None:
            continue
        before = last.pop(record.group, None)
        if record.generation is None:
            continue
        last[record.group] = record.generation
        if before is None:   # a first sight
            continue
        rows += [OracleTransition(kind="rebalance", entity=f"group:{record.group}", position=index,
                                  time_ms=record.time_ms, group=record.group, old=str(g - 1), new=str(g), generation=g)
                 for g in range(before + 1, record.generation + 1)]
    return rows


def read(key: bytes | None, value: bytes | None, index: int) -> GroupRecord | None:
    """A record that says a group's generation (or its deletion); None for every other."""
    if key is None or len(key) < 2:
        raise MalformedLog(f"record {index}: a key of {0 if key is None else len(key)} bytes")
    kind = struct.unpack_from(">h", key)[0]
    if kind != GROUP_METADATA and kind not in EPOCH_METADATA:
        return None
    group = _Reader(key, index, 2).string()
    if group is None:
        raise MalformedLog(f"record {index}: a group metadata key without a group id")
    if value is None:
        return GroupRecord(group, None, None)
    r = _Reader(value, index)
    version = r.int16()
    if kind != GROUP_METADATA:
        return GroupRecord(group, r.int32(), None)
    compact = version >= FIRST_FLEXIBLE
    r.string(compact)   # protocolType
    generation = r.int32()
    r.string(compact)   # protocol
    r.string(compact)   # leader
    since = r.int64() if version >= 2 else -1
    return GroupRecord(group, generation, since if since >= 0 else None)


class _Reader:
    def __init__(self, data: bytes, index: int, pos: int = 0) -> None:
        self.data, self.index, self.pos = data, index, pos

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedLog(f"record {self.index}: {n} bytes at byte {self.pos} run past its {len(self.data)}")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def _uvarint(self) -> int:
        n = shift = 0
        while True:
            byte = self._take(1)[0]
            n |= (byte & 0x7F) << shift
            if byte < 0x80:
                return n
            shift += 7

    def string(self, compact: bool = False) -> str | None:
        """A string (null: length -1) or, flexible, a compact one (unsigned varint length + 1, 0: null)."""
        n = self._uvarint() - 1 if compact else self.int16()
        return None if n < 0 else self._take(n).decode("utf-8", "replace")
