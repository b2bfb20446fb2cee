"""The metadata log's contents: record batches, and the metadata records in them. Pure.

A batch (magic 2) holds records whose values are metadata records framed as an unsigned varint
frame version, the record's api key and its version, then the record in Kafka's flexible encoding
(metadata/src/main/resources/common/metadata/*.json). Control batches hold the raft layer's own
records (LeaderChange, snapshot header and footer, voters): a LeaderChange says who leads from its
offset on. Only the records that carry cluster state are decoded into types; the rest are known
and skipped; an unknown type or a newer version than this decoder knows is an :class:`Unknown`,
which the collector counts and logs, and never stops on.
"""
from __future__ import annotations

import functools
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

from collectors.kraft.wire import Reader, WireError, uuid_text, zigzag_at

CONTROL_LEADER_CHANGE = 2
NO_TIMESTAMP = -1


class MalformedRecord(ValueError):
    """A record or batch that cannot be read; the message says where."""


NO_LEADER = -1


def at_least(lo: int, value: int, what: str) -> int:
    """``value``, or MalformedRecord when it is below the least Kafka writes there: no event could
    carry it (kmon.events' ranges), and it is no log Kafka wrote."""
    if value < lo:
        raise MalformedRecord(f"{what} {value} is below {lo}")
    return value


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    epoch: int                  # partitionLeaderEpoch: the raft epoch of the leader that wrote it
    max_timestamp_ms: int | None   # None: the batch has no timestamps
    control: bool
    values: tuple[tuple[int, bytes | None, bytes | None], ...]   # (offset, key, value) of each record
    malformed: str | None = None   # why its records could not be read (none are then given)


_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")   # base offset .. record count: 61 bytes
_COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def batches(data: bytes) -> Iterator[Batch]:
    """The whole batches in ``data`` (a fetch may end in a partial one, left for the next fetch)."""
    pos = 0
    while pos + 12 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + length
        if length < _BATCH_HEAD.size - 12 or end > len(data):
            return   # partial (or a size no batch has: the next fetch starts at its offset again)
        yield _batch(data, pos, end)
        pos = end


def _batch(data: bytes, pos: int, end: int) -> Batch:
    (base, _, epoch, magic, _crc, attributes, last_delta, _base_ts, max_ts, _pid, _pepoch, _seq,
     count) = _BATCH_HEAD.unpack_from(data, pos)
    control = bool(attributes & 0x20)
    appended = None if max_ts == NO_TIMESTAMP else max_ts
    try:
        # what the events say of a record's place (LogMeta) is Kafka's ranges; nothing else is a log
        at_least(0, base, "base offset")
        at_least(0, epoch, "epoch")
        at_least(NO_TIMESTAMP, max_ts, "max timestamp")
        values = _records(_body(data, pos + _BATCH_HEAD.size, end, magic, attributes & 7), base, count)
    except (MalformedRecord, WireError, zlib.error) as e:
        return Batch(base, base + last_delta, epoch, appended, control, (), f"batch at offset {base}: {e}")
    return Batch(base, base + last_delta, epoch, appended, control, values)


def _body(data: bytes, start: int, end: int, magic: int, codec: int) -> tuple[bytes, int, int]:
    """The batch's records, uncompressed: in ``data`` from ``start`` to ``end``."""
    if magic != 2:
        raise MalformedRecord(f"magic {magic}, not 2")
    if codec == 1:
        body = zlib.decompress(data[start:end], 31)   # gzip
        return body, 0, len(body)
    if codec:
        raise MalformedRecord(f"{_COMPRESSION.get(codec, codec)} compression, which kmon does not read (Kafka "
                              "writes the metadata log uncompressed unless told otherwise)")
    return data, start, end


def _records(body: tuple[bytes, int, int], base: int,
             count: int) -> tuple[tuple[int, bytes | None, bytes | None], ...]:
    """Each record's offset, key and value."""
    data, pos, end = body
    values = []
    unkeyed_head = _UNKEYED_HEAD.match
    for _ in range(count):
        head = unkeyed_head(data, pos, end)
        delta, key, value, pos = _unkeyed_record(head, end) if head else _record_at(data, pos, end)
        if delta < 0:
            at_least(0, delta, "offset delta")
        values.append((base + delta, key, value))
    return tuple(values)


# The head of a record without a key, as the metadata log writes all but its control records: length,
# attributes (a byte), timestamp delta, offset delta, key length -1 (null), value length; each varint
# is up to ten bytes, the last without the high bit. One match instead of a call per varint, which
# made the framing a large share of a record's decode (bench/README.md, the KRaft collector).
_UNKEYED_HEAD = re.compile(rb"""
    ([\x80-\xff]{0,9}[\x00-\x7f])    # length
    .                                # attributes
    [\x80-\xff]{0,9}[\x00-\x7f]      # timestamp delta
    ([\x80-\xff]{0,9}[\x00-\x7f])    # offset delta
    \x01                             # key length: -1
    ([\x80-\xff]{0,9}[\x00-\x7f])    # value length
""", re.DOTALL | re.VERBOSE)


class _Varints(dict[bytes, int]):
    """A zig-zag varint's bytes -> its value; the one- and two-byte ones (lengths and offset deltas,
    mostly) remembered."""

    def __missing__(self, raw: bytes) -> int:
        value = zigzag_at(raw, 0, len(raw))[0]
        if len(raw) <= 2:
            self[raw] = value
        return value


_VARINTS = _Varints()


def _unkeyed_record(head: re.Match[bytes], end: int) -> tuple[int, None, bytes | None, int]:
    """(offset delta, no key, value, where the next record starts) of a record _UNKEYED_HEAD matched."""
    raw_length, raw_delta, raw_size = head.groups()
    length, delta, size = _VARINTS[raw_length], _VARINTS[raw_delta], _VARINTS[raw_size]
    stop, value_at = head.end(1) + length, head.end()
    value_end = value_at + max(size, 0)
    if value_end > stop or stop > end:
        raise _past_its_batch(length, delta)
    return delta, None, head.string[value_at:value_end] if size >= 0 else None, stop


def _record_at(data: bytes, pos: int, end: int) -> tuple[int, bytes | None, bytes | None, int]:
    """(offset delta, key, value, where the next record starts) of any record, field by field."""
    length, pos = zigzag_at(data, pos, end)
    stop = pos + length
    _, pos = zigzag_at(data, pos + 1, end)        # attributes (a byte), timestamp delta
    delta, pos = zigzag_at(data, pos, end)
    key, pos = _nullable_bytes_at(data, pos, end)
    value, pos = _nullable_bytes_at(data, pos, end)
    if stop > end or stop < pos:
        raise _past_its_batch(length, delta)
    return delta, key, value, stop                # headers: none in the metadata log


def _past_its_batch(length: int, delta: int) -> MalformedRecord:
    return MalformedRecord(f"a record of {length} bytes (offset delta {delta}) runs past its batch")


def _nullable_bytes_at(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """Bytes after their zig-zag varint length, -1 for null (a record's key and value)."""
    n, pos = zigzag_at(data, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise MalformedRecord(f"{n} bytes wanted at {pos}, {end - pos} left")
    return data[pos:pos + n], pos + n


def leader_change(key: bytes | None, value: bytes | None) -> int | None:
    """The new leader's id, if this control record is a LeaderChange; else None."""
    if key is None or value is None or len(key) < 4 or struct.unpack_from(">h", key, 2)[0] != CONTROL_LEADER_CHANGE:
        return None
    try:
        r = Reader(value)
        r.int16()     # the message's own version
        return at_least(NO_LEADER, r.int32(), "leader id")
    except WireError as e:
        raise MalformedRecord(f"a LeaderChange control record: {e}") from None


# ---------------------------------------------------------------- metadata records

class Endpoint(NamedTuple):
    listener: str
    host: str
    port: int
    security_protocol: int


class RegisterBroker(NamedTuple):
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    features: dict[str, tuple[int, int]]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool


class UnregisterBroker(NamedTuple):
    broker_id: int
    broker_epoch: int


class BrokerChange(NamedTuple):
    """BrokerRegistrationChange, FenceBroker and UnfenceBroker: None = unchanged."""
    broker_id: int
    broker_epoch: int
    fenced: bool | None
    in_controlled_shutdown: bool | None


class Topic(NamedTuple):
    name: str
    topic_id: str


class RemoveTopic(NamedTuple):
    topic_id: str


class Partition(NamedTuple):
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing: tuple[int, ...]
    adding: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int
    elr: tuple[int, ...] | None
    last_known_elr: tuple[int, ...] | None


NO_LEADER_CHANGE = -2   # PartitionChangeRecord's Leader when the leader stays
_UNCHANGED = -1         # its LeaderRecoveryState when that stays


class PartitionChange(NamedTuple):
    """What changed; None (NO_LEADER_CHANGE for the leader) = unchanged."""
    topic_id: str
    partition: int
    isr: tuple[int, ...] | None
    leader: int
    replicas: tuple[int, ...] | None
    removing: tuple[int, ...] | None
    adding: tuple[int, ...] | None
    leader_recovery_state: int | None
    elr: tuple[int, ...] | None
    last_known_elr: tuple[int, ...] | None


TOPIC_RESOURCE = 2


class Config(NamedTuple):
    resource_type: int
    resource_name: str
    name: str
    value: str | None      # None: the setting was removed


class FeatureLevel(NamedTuple):
    name: str
    level: int


class BeginTransaction(NamedTuple):
    name: str | None


class EndTransaction(NamedTuple):
    pass


class AbortTransaction(NamedTuple):
    reason: str | None


class ClearElr(NamedTuple):
    """The ELR and last known ELR of a topic's partitions (every topic's when empty) are cleared:
    ELR was turned off."""
    topic: str


class Unknown(NamedTuple):
    """A record type, or a version of one, this decoder does not know."""
    api_key: int
    version: int


MetadataRecord = (RegisterBroker | UnregisterBroker | BrokerChange | Topic | RemoveTopic | Partition
                  | PartitionChange | Config | FeatureLevel | ClearElr | BeginTransaction | EndTransaction | AbortTransaction
                  | Unknown | None)


_PARTITION_HEAD = struct.Struct(">i16s")        # partition id, topic id
_LEADER_AND_EPOCHS = struct.Struct(">iii")      # leader, leader epoch, partition epoch


def _partition_head(r: Reader) -> tuple[int, str]:
    partition, topic_id = r.unpack(_PARTITION_HEAD)
    if partition < 0:
        at_least(0, partition, "partition")
    return partition, uuid_text(topic_id)


def _broker_ids(r: Reader) -> tuple[int, ...] | None:
    """A compact array of broker ids (None: null), each at least 0."""
    ids = r.int32s()
    if ids and min(ids) < 0:
        at_least(0, min(ids), "broker id")
    return ids


def _broker_id(r: Reader) -> int:
    return at_least(0, r.int32(), "broker id")


def _broker_epoch(r: Reader) -> int:
    return at_least(0, r.int64(), "broker epoch")


def _feature_version(r: Reader) -> int:
    return at_least(0, r.int16(), "feature version")


def _recovery_state(r: Reader, unchanged: tuple[int, ...] = ()) -> int:
    """KIP-704's leader recovery state: 0 recovered, 1 recovering; a PartitionChange may say -1, unchanged."""
    state = r.int8()
    if state not in (0, 1, *unchanged):
        raise MalformedRecord(f"leader recovery state {state} is not 0 or 1")
    return state


def _register_broker(r: Reader, v: int) -> RegisterBroker:
    broker_id = _broker_id(r)
    if v >= 2:
        r.boolean()    # migrating ZooKeeper broker
    incarnation, epoch = r.uuid(), _broker_epoch(r)

    def endpoint(x: Reader) -> Endpoint:
        e = Endpoint(x.compact_string(), x.compact_string(), x.uint16(), x.int16())
        x.tagged()
        return e

    def feature(x: Reader) -> tuple[str, tuple[int, int]]:
        f = (x.compact_string(), (_feature_version(x), _feature_version(x)))
        x.tagged()
        return f

    endpoints = tuple(r.compact_array(endpoint) or ())
    features = dict(r.compact_array(feature) or ())
    rack, fenced = r.compact_nullable_string(), r.boolean()
    shutdown = r.boolean() if v >= 1 else False
    r.tagged()
    return RegisterBroker(broker_id, incarnation, epoch, endpoints, features, rack, fenced, shutdown)


def _broker_change(r: Reader, v: int) -> BrokerChange:
    broker_id, epoch = _broker_id(r), _broker_epoch(r)
    tags = r.tagged({0: Reader.int8, 1: Reader.int8})
    fencing = tags.get(0, 0)        # 1 fence, -1 unfence, 0 no change
    shutdown = tags.get(1, 0)       # 1 in controlled shutdown, 0 no change
    return BrokerChange(broker_id, epoch, None if fencing == 0 else fencing == 1, True if shutdown == 1 else None)


def _fence(fenced: bool) -> Callable[[Reader, int], BrokerChange]:
    def read(r: Reader, v: int) -> BrokerChange:
        change = BrokerChange(_broker_id(r), _broker_epoch(r), fenced, None)
        r.tagged()
        return change
    return read


_PARTITION_TAGS: dict[int, Callable[[Reader], object]] = {0: _recovery_state, 1: _broker_ids, 2: _broker_ids}


def _partition(r: Reader, v: int) -> Partition:
    (partition, topic_id, replicas, isr, removing, adding, leader, leader_epoch,
     partition_epoch) = _partition_fields_at_once(r) or _partition_fields(r)
    if v >= 1:
        r.skip(16 * max(r.uvarint() - 1, 0))    # directories, which kmon does not read
    tags = r.tagged(_PARTITION_TAGS)
    elr, last_known = tags.get(1), tags.get(2)
    return Partition(topic_id, partition, replicas, isr, removing, adding, leader, leader_epoch, partition_epoch,
                     int(tags.get(0, 0)), elr if v >= 2 else None, last_known if v >= 2 else None)  # type: ignore


_PartitionFields = tuple[int, str, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int, int]


def _partition_fields(r: Reader) -> _PartitionFields:
    """A PartitionRecord's fields from its partition id to its partition epoch (a null array: none)."""
    partition, topic_id = _partition_head(r)
    replicas, isr, removing, adding = r.int32s() or (), r.int32s() or (), r.int32s() or (), r.int32s() or ()
    leader, leader_epoch, partition_epoch = r.unpack(_LEADER_AND_EPOCHS)
    return _in_kafkas_ranges((partition, topic_id, replicas, isr, removing, adding, leader, leader_epoch,
                              partition_epoch))


def _in_kafkas_ranges(fields: _PartitionFields) -> _PartitionFields:
    """``fields``, or MalformedRecord where one is below the least Kafka writes there: a negative
    partition, broker id or epoch, a leader below -1 (no event could carry it)."""
    partition, _, replicas, isr, removing, adding, leader, leader_epoch, partition_epoch = fields
    at_least(0, partition, "partition")
    for ids in (replicas, isr, removing, adding):
        if ids:
            at_least(0, min(ids), "broker id")
    at_least(NO_LEADER, leader, "leader")
    at_least(0, leader_epoch, "leader epoch")
    at_least(0, partition_epoch, "partition epoch")
    return fields


def _partition_fields_at_once(r: Reader) -> _PartitionFields | None:
    """The same fields as :func:`_partition_fields`, in one read: the four arrays' lengths first, then
    one struct made for them; None (nothing read) unless each length is one byte, as in nearly
    every record (fewer than 127 ids). A record read field by field took most of its decode."""
    data, end, at = r.data, r.end, r.pos + 20     # after the partition id and the topic id
    sizes = []
    for _ in range(4):                            # replicas, isr, removing, adding
        length = data[at] if at < end else 0x80
        if length >= 0x80:
            return None
        size = length - 1 if length else 0        # 0: null
        sizes.append(size)
        at += 1 + 4 * size
    layout, start = _partition_layout(*sizes), r.pos
    if start + layout.size > end:
        return None                               # truncated: the field-by-field read says where
    r.pos = start + layout.size
    fields = layout.unpack_from(data, start)      # ints all: the topic id is skipped, taken apart
    isr_at = 1 + sizes[0]
    removing_at = isr_at + sizes[1]
    adding_at = removing_at + sizes[2]
    leader_at = adding_at + sizes[3]
    found = (fields[0], uuid_text(data[start + 4:start + 20]), fields[1:isr_at], fields[isr_at:removing_at],
             fields[removing_at:adding_at], fields[adding_at:leader_at], *fields[leader_at:])
    # one min() for every range: below 0 only where a leader is -1 (none) or the record is malformed
    return found if min(fields) >= 0 else _in_kafkas_ranges(found)  # type: ignore


@functools.lru_cache(maxsize=1024)
def _partition_layout(replicas: int, isr: int, removing: int, adding: int) -> struct.Struct:
    """Partition id, topic id (skipped), the four arrays (each behind its length byte), leader and epochs."""
    return struct.Struct(">i16x" + "".join(f"x{n}i" for n in (replicas, isr, removing, adding)) + "iii")


def _changed_leader(r: Reader) -> int:
    leader = r.int32()
    if leader < NO_LEADER_CHANGE:
        at_least(NO_LEADER_CHANGE, leader, "leader")
    return leader


def _changed_recovery_state(r: Reader) -> int:
    return _recovery_state(r, (_UNCHANGED,))


_PARTITION_CHANGE_TAGS: dict[int, Callable[[Reader], object]] = {
    0: _broker_ids, 1: _changed_leader, 2: _broker_ids, 3: _broker_ids, 4: _broker_ids, 5: _changed_recovery_state,
    6: _broker_ids, 7: _broker_ids}


def _partition_change(r: Reader, v: int) -> PartitionChange:
    partition, topic_id = _partition_head(r)
    t = r.tagged(_PARTITION_CHANGE_TAGS)
    recovery = t.get(5, _UNCHANGED)
    return PartitionChange(topic_id, partition, t.get(0), t.get(1, NO_LEADER_CHANGE), t.get(2), t.get(3),  # type: ignore
                           t.get(4), None if recovery == _UNCHANGED else recovery, t.get(6), t.get(7))  # type: ignore


def _topic(r: Reader, v: int) -> Topic:
    t = Topic(r.compact_string(), r.uuid())
    r.tagged()
    return t


def _remove_topic(r: Reader, v: int) -> RemoveTopic:
    t = RemoveTopic(r.uuid())
    r.tagged()
    return t


def _unregister(r: Reader, v: int) -> UnregisterBroker:
    u = UnregisterBroker(_broker_id(r), _broker_epoch(r))
    r.tagged()
    return u


def _config(r: Reader, v: int) -> Config:
    c = Config(r.int8(), r.compact_string(), r.compact_string(), r.compact_nullable_string())
    r.tagged()
    return c


def _feature_level(r: Reader, v: int) -> FeatureLevel:
    f = FeatureLevel(r.compact_string(), r.int16())
    r.tagged()
    return f


def _clear_elr(r: Reader, v: int) -> ClearElr:
    c = ClearElr(r.compact_string())
    r.tagged()
    return c


def _begin(r: Reader, v: int) -> BeginTransaction:
    return BeginTransaction(r.tagged({0: Reader.compact_nullable_string}).get(0))  # type: ignore[arg-type]


def _end(r: Reader, v: int) -> EndTransaction:
    r.tagged()
    return EndTransaction()


def _abort(r: Reader, v: int) -> AbortTransaction:
    return AbortTransaction(r.tagged({0: Reader.compact_nullable_string}).get(0))  # type: ignore[arg-type]


# api key -> (highest version known, reader) of the records that carry cluster state; the versions
# Kafka 3.7-4.3 write (newer ones of RegisterBroker and BrokerRegistrationChange added tagged fields only)
DECODED: dict[int, tuple[int, Callable[[Reader, int], MetadataRecord]]] = {
    0: (4, _register_broker),
    1: (0, _unregister),
    2: (0, _topic),
    3: (2, _partition),
    4: (0, _config),
    5: (2, _partition_change),
    7: (0, _fence(True)),
    8: (0, _fence(False)),
    9: (0, _remove_topic),
    12: (0, _feature_level),
    17: (3, _broker_change),
    28: (0, _clear_elr),
    23: (0, _begin),
    24: (0, _end),
    25: (0, _abort),
}
# records of state kmon does not watch (credentials, ACLs, quotas, producer ids, no-ops, controllers'
# registrations, the ZooKeeper migration): any version is skipped unread
SKIPPED = frozenset({10, 11, 14, 15, 18, 19, 20, 21, 22, 26, 27})


# the first three bytes of each record decoded (frame version 1, api key, version: one-byte varints
# all) -> its reader and version: one lookup, where reading them took a varint each
_FRAMES = {bytes((1, api_key, version)): (read, version)
           for api_key, (highest, read) in DECODED.items() for version in range(highest + 1)}


def decode(value: bytes) -> MetadataRecord:
    """One metadata record; None for a record kmon skips. Raises MalformedRecord."""
    known = _FRAMES.get(value[:3])
    try:
        if known is not None:
            read, version = known
            return read(Reader(value, 3), version)
        return _decode_framed(Reader(value))
    except WireError as e:
        raise MalformedRecord(str(e)) from None


def _decode_framed(r: Reader) -> MetadataRecord:
    frame = r.uvarint()
    if frame != 1:
        raise MalformedRecord(f"frame version {frame}, not 1")
    api_key, version = r.uvarint(), r.uvarint()
    known = DECODED.get(api_key)
    if known is None:
        return None if api_key in SKIPPED else Unknown(api_key, version)
    if version > known[0]:
        return Unknown(api_key, version)
    return known[1](r, version)
