"""The metadata log's contents: record batches, and the metadata records in them. Pure.

A batch (magic 2) holds records whose values are metadata records framed as an unsigned varint
frame version, the record's api key and its version, then the record in Kafka's flexible encoding
(metadata/src/main/resources/common/metadata/*.json). Control batches hold the raft layer's own
records (LeaderChange, snapshot header and footer, KRaftVersion, voters): a LeaderChange says who
leads from its offset on, a KRaftVersion the quorum's kraft.version. Only the records that carry
cluster state are decoded into types; the rest are known and skipped; an unknown type or a newer
version than this decoder knows is an :class:`Unknown`, which the collector counts and logs, and
never stops on.
"""
from __future__ import annotations

import functools
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple, TypeVar

from collectors.kafka_encoding import INT32, INT32S, MalformedRecord, Reader, tagged, uuid_text

CONTROL_LEADER_CHANGE = 2
CONTROL_KRAFT_VERSION = 5
# A feature the raft layer keeps in its own control records, not in a FeatureLevelRecord: a static quorum
# (controller.quorum.voters) writes none and runs at level 0, as Kafka's `kafka-features describe` says
KRAFT_VERSION = "kraft.version"
NO_TIMESTAMP = -1
NO_LEADER = -1
T = TypeVar("T")


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
    view = memoryview(data)
    pos = 0
    while pos + 12 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + length
        if length < _BATCH_HEAD.size - 12 or end > len(data):
            return   # partial (or a size no batch has: the next fetch starts at its offset again)
        yield _batch(view, pos, end)
        pos = end


def _batch(view: memoryview, pos: int, end: int) -> Batch:
    (base, _, epoch, magic, _crc, attributes, last_delta, _base_ts, max_ts, _pid, _pepoch, _seq,
     count) = _BATCH_HEAD.unpack_from(view, pos)
    control = bool(attributes & 0x20)
    appended = None if max_ts == NO_TIMESTAMP else max_ts
    try:
        # what the events say of a record's place (LogMeta) is Kafka's ranges; nothing else is a log
        at_least(0, base, "base offset")
        at_least(0, epoch, "epoch")
        at_least(NO_TIMESTAMP, max_ts, "max timestamp")
        values = _records(view[pos + _BATCH_HEAD.size:end], base, magic, attributes & 7, count)
    except (MalformedRecord, zlib.error) as e:
        return Batch(base, base + last_delta, epoch, appended, control, (), f"batch at offset {base}: {e}")
    return Batch(base, base + last_delta, epoch, appended, control, values)


def _records(body: bytes | memoryview, base: int, magic: int, codec: int,
             count: int) -> tuple[tuple[int, bytes | None, bytes | None], ...]:
    if magic != 2:
        raise MalformedRecord(f"magic {magic}, not 2")
    if codec == 1:
        data = zlib.decompress(bytes(body), 31)   # gzip
    elif codec:
        raise MalformedRecord(f"{_COMPRESSION.get(codec, codec)} compression, which kmon does not read (Kafka "
                              "writes the metadata log uncompressed unless told otherwise)")
    else:
        data = bytes(body)
    values, pos, end = [], 0, len(data)
    unkeyed = _UNKEYED_HEAD.match
    for _ in range(count):
        head = unkeyed(data, pos, end)
        if head is not None:
            raw_length, raw_delta, raw_size = head.groups()
            delta, size = _zigzag(raw_delta), _zigzag(raw_size)
            stop, value_at = head.end(1) + _zigzag(raw_length), head.end()
            value_end = value_at + max(size, 0)
            if delta >= 0 and value_end <= stop <= end:
                values.append((base + delta, None, data[value_at:value_end] if size >= 0 else None))
                pos = stop
                continue
        offset, key, value, pos = _record_at(data, pos, base)   # any other record, or what is wrong with it
        values.append((offset, key, value))
    return tuple(values)


def _record_at(data: bytes, pos: int, base: int) -> tuple[int, bytes | None, bytes | None, int]:
    """(offset, key, value, where the next record starts) of the record at ``pos``, field by field."""
    r = Reader(data, pos=pos)
    length = r.varint("record length")
    stop = r.pos + length
    r.int8("attributes")
    r.varlong("timestamp delta")
    offset = base + at_least(0, r.varint("offset delta"), "offset delta")
    klen = r.varint("key length")
    key = r.raw(klen, "key") if klen >= 0 else None
    vlen = r.varint("value length")
    value = r.raw(vlen, "value") if vlen >= 0 else None
    if stop > r.stop or stop < r.pos:
        raise MalformedRecord(f"a record of {length} bytes at offset {offset} runs past its batch")
    return offset, key, value, stop   # headers: none in the metadata log


# The head of a record without a key, as the metadata log writes all but its control records: its length,
# attributes (a byte), timestamp delta, offset delta, key length -1 (null) and value length. One match where
# the field-by-field read took a call per varint, most of a batch's framing (bench/NOTES.md); a record it
# does not match, or whose lengths do not add up, is read field by field, which says what is wrong.
_UNKEYED_HEAD = re.compile(rb"""
    ([\x80-\xff]{0,4}[\x00-\x7f])    # length (a varint: at most 5 bytes)
    .                                # attributes
    [\x80-\xff]{0,9}[\x00-\x7f]      # timestamp delta (a varlong: at most 10)
    ([\x80-\xff]{0,4}[\x00-\x7f])    # offset delta
    \x01                             # key length -1: null
    ([\x80-\xff]{0,4}[\x00-\x7f])    # value length
""", re.DOTALL | re.VERBOSE)


@functools.lru_cache(maxsize=16384)
def _zigzag(raw: bytes) -> int:
    """A zig-zag varint's value from its bytes, remembered: lengths and offset deltas repeat."""
    return Reader(raw).varint()


def _control_type(key: bytes | None) -> int | None:
    """A control record's type (its key: version, type); None for a key too short to say."""
    return struct.unpack_from(">h", key, 2)[0] if key is not None and len(key) >= 4 else None


def leader_change(key: bytes | None, value: bytes | None) -> int | None:
    """The new leader's id, if this control record is a LeaderChange; else None."""
    if value is None or _control_type(key) != CONTROL_LEADER_CHANGE:
        return None
    r = Reader(value, "LeaderChange control record")
    r.int16("version")     # the message's own
    return at_least(NO_LEADER, r.int32("leader_id"), "leader id")


def kraft_version(key: bytes | None, value: bytes | None) -> FeatureLevelRecord | None:
    """The quorum's kraft.version as a feature level, if this control record is a KRaftVersion; else None."""
    if value is None or _control_type(key) != CONTROL_KRAFT_VERSION:
        return None
    r = Reader(value, "KRaftVersion control record")
    r.int16("version")     # the message's own
    return FeatureLevelRecord(KRAFT_VERSION, at_least(0, r.int16("kraft_version"), "kraft.version"))


# ---------------------------------------------------------------- metadata records

class BrokerEndpoint(NamedTuple):
    listener: str
    host: str
    port: int
    security_protocol: int


class RegisterBrokerRecord(NamedTuple):
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    features: dict[str, tuple[int, int]]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool


class UnregisterBrokerRecord(NamedTuple):
    broker_id: int
    broker_epoch: int


class BrokerRegistrationChangeRecord(NamedTuple):
    """BrokerRegistrationChange, FenceBroker and UnfenceBroker: None = unchanged."""
    broker_id: int
    broker_epoch: int
    fenced: bool | None
    in_controlled_shutdown: bool | None


class TopicRecord(NamedTuple):
    name: str
    topic_id: str


class RemoveTopicRecord(NamedTuple):
    topic_id: str


class PartitionRecord(NamedTuple):
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


class PartitionChangeRecord(NamedTuple):
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


class ConfigRecord(NamedTuple):
    resource_type: int
    resource_name: str
    name: str
    value: str | None      # None: the setting was removed


class FeatureLevelRecord(NamedTuple):
    name: str
    level: int


class BeginTransactionRecord(NamedTuple):
    name: str | None


class EndTransactionRecord(NamedTuple):
    pass


class AbortTransactionRecord(NamedTuple):
    reason: str | None


class ClearElrRecord(NamedTuple):
    """The ELR and last known ELR of a topic's partitions (every topic's when empty) are cleared:
    ELR was turned off."""
    topic: str


class Unknown(NamedTuple):
    """A record type, or a version of one, this decoder does not know."""
    api_key: int
    version: int


MetadataRecord = (RegisterBrokerRecord | UnregisterBrokerRecord | BrokerRegistrationChangeRecord | TopicRecord
                  | RemoveTopicRecord | PartitionRecord | PartitionChangeRecord | ConfigRecord | FeatureLevelRecord
                  | ClearElrRecord | BeginTransactionRecord | EndTransactionRecord | AbortTransactionRecord | Unknown
                  | None)


# A null array reads as empty, and a tagged field's bytes past what is read of it are ignored, as
# Kafka's own generated readers ignore them.

def _ids(r: Reader, field: str) -> tuple[int, ...]:
    return _nullable_ids(r, field) or ()


def _nullable_ids(r: Reader, field: str) -> tuple[int, ...] | None:
    """An array of broker ids, in one unpack: read item by item, the arrays weighed on a PartitionRecord's
    decode_metadata_record (bench/NOTES.md, the KRaft collector)."""
    ids = r.nullable_int32s(field)
    if ids and min(ids) < 0:
        raise r.fail(f"broker id {min(ids)} in {field} is below 0")
    return ids


def _field(read: Callable[[Reader, str], T], field: str) -> Callable[[Reader], T]:
    """``read`` of the field named ``field``: a tagged field's reader."""
    return lambda r: read(r, field)


# the tagged fields' readers
_ISR, _REPLICAS, _REMOVING, _ADDING, _ELR, _LAST_KNOWN_ELR = (_field(_nullable_ids, f) for f in (
    "isr", "replicas", "removing_replicas", "adding_replicas", "eligible_leader_replicas", "last_known_elr"))
_FENCED, _IN_SHUTDOWN = _field(Reader.int8, "fenced"), _field(Reader.int8, "in_controlled_shutdown")
_NAME, _REASON = _field(Reader.nullable_string, "name"), _field(Reader.nullable_string, "reason")


def _skip_uuids(r: Reader, field: str) -> None:
    """An array of uuids kmon does not read (a PartitionRecord's directories), skipped whole."""
    n = r.nullable_array_length(field)
    if n:
        r.raw(16 * n, field)


def _broker_id(r: Reader) -> int:
    return at_least(0, r.int32("broker_id"), "broker id")


def _broker_epoch(r: Reader) -> int:
    return at_least(0, r.int64("broker_epoch"), "broker epoch")


def _feature_version(r: Reader, field: str) -> int:
    return at_least(0, r.int16(field), "feature version")


def _recovery_state(r: Reader, unchanged: tuple[int, ...] = ()) -> int:
    """KIP-704's leader recovery state: 0 recovered, 1 recovering; a PartitionChange may say -1, unchanged."""
    state = r.int8("leader_recovery_state")
    if state not in (0, 1, *unchanged):
        raise MalformedRecord(f"leader recovery state {state} is not 0 or 1")
    return state


def _register_broker(r: Reader, v: int) -> RegisterBrokerRecord:
    broker_id = _broker_id(r)
    if v >= 2:
        r.boolean("is_migrating_zk_broker")
    incarnation, epoch = r.uuid("incarnation_id"), _broker_epoch(r)

    def endpoint(x: Reader) -> BrokerEndpoint:
        e = BrokerEndpoint(x.string("endpoint name"), x.string("endpoint host"), x.uint16("endpoint port"),
                     x.int16("endpoint security_protocol"))
        x.skip_tagged_fields("endpoint")
        return e

    def feature(x: Reader) -> tuple[str, tuple[int, int]]:
        f = (x.string("feature name"), (_feature_version(x, "min_supported_version"),
                                        _feature_version(x, "max_supported_version")))
        x.skip_tagged_fields("feature")
        return f

    endpoints = r.nullable_array("endpoints", endpoint) or ()
    features = dict(r.nullable_array("features", feature) or ())
    rack, fenced = r.nullable_string("rack"), r.boolean("fenced")
    shutdown = r.boolean("in_controlled_shutdown") if v >= 1 else False
    r.skip_tagged_fields("record")
    return RegisterBrokerRecord(broker_id, incarnation, epoch, endpoints, features, rack, fenced, shutdown)


def _broker_change(r: Reader, v: int) -> BrokerRegistrationChangeRecord:
    broker_id, epoch = _broker_id(r), _broker_epoch(r)
    tags = r.tagged_fields("record")
    fencing = tagged(tags, 0, _FENCED, 0, whole=False)         # 1 fence, -1 unfence, 0 no change
    shutdown = tagged(tags, 1, _IN_SHUTDOWN, 0, whole=False)   # 1 in controlled shutdown, 0 no change
    return BrokerRegistrationChangeRecord(broker_id, epoch, None if fencing == 0 else fencing == 1,
                                          True if shutdown == 1 else None)


def _fence(fenced: bool) -> Callable[[Reader, int], BrokerRegistrationChangeRecord]:
    def read(r: Reader, v: int) -> BrokerRegistrationChangeRecord:
        change = BrokerRegistrationChangeRecord(_broker_id(r), _broker_epoch(r), fenced, None)
        r.skip_tagged_fields("record")
        return change
    return read


def _partition(r: Reader, v: int) -> PartitionRecord:
    fields = _partition_fields_at_once(r) or _partition_fields(r)
    if v >= 1:
        _skip_uuids(r, "directories")
    tags = r.tagged_fields("record")
    recovery = tagged(tags, 0, _recovery_state, 0, whole=False)
    elr, last_known = tagged(tags, 1, _ELR, None, whole=False), tagged(tags, 2, _LAST_KNOWN_ELR, None, whole=False)
    return PartitionRecord(*fields, recovery, elr if v >= 2 else None, last_known if v >= 2 else None)


_PartitionFields = tuple[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int, int]


def _partition_fields(r: Reader) -> _PartitionFields:
    """A PartitionRecord's fields from its partition id to its partition epoch, field by field, each checked."""
    partition, topic_id = at_least(0, r.int32("partition_id"), "partition"), _topic_id(r)
    replicas, isr = _ids(r, "replicas"), _ids(r, "isr")
    removing, adding = _ids(r, "removing_replicas"), _ids(r, "adding_replicas")
    leader = at_least(NO_LEADER, r.int32("leader"), "leader")
    leader_epoch = at_least(0, r.int32("leader_epoch"), "leader epoch")
    partition_epoch = at_least(0, r.int32("partition_epoch"), "partition epoch")
    return topic_id, partition, replicas, isr, removing, adding, leader, leader_epoch, partition_epoch


def _partition_fields_at_once(r: Reader) -> _PartitionFields | None:
    """The same fields in one unpack (:func:`_partition_fields_at`), the reader moved past them; None, nothing read."""
    found = _partition_fields_at(r.data, r.pos, r.stop)
    if found is None:
        return None
    fields, r.pos = found
    return fields


def _partition_fields_at(data: bytes | memoryview, start: int, stop: int) -> tuple[_PartitionFields, int] | None:
    """A PartitionRecord's fields from its partition id to its partition epoch at ``start``, and where they end,
    in one unpack of a struct made for the four arrays' lengths; None unless each length is one byte (fewer
    than 127 ids), the whole is there and every int is at least 0 (a leader of -1 or a bad value: the
    field-by-field read takes it, or names what is wrong). Read field by field, they were most of a
    PartitionRecord's decode (bench/NOTES.md)."""
    at, sizes = start + 20, []    # after the partition id and the topic id
    for _ in range(4):            # replicas, isr, removing, adding
        if at >= stop or data[at] >= 0x80:
            return None
        size = data[at] - 1 if data[at] else 0      # 0: null, read as none
        sizes.append(size)
        at += 1 + 4 * size
    layout = _partition_layout(*sizes)
    if start + layout.size > stop:
        return None
    ints = layout.unpack_from(data, start)
    if min(ints) < 0:
        return None
    isr_at = 1 + sizes[0]
    removing_at = isr_at + sizes[1]
    adding_at = removing_at + sizes[2]
    leader_at = adding_at + sizes[3]
    return (_uuid_text(bytes(data[start + 4:start + 20])), ints[0], ints[1:isr_at], ints[isr_at:removing_at],
            ints[removing_at:adding_at], ints[adding_at:leader_at], *ints[leader_at:]), start + layout.size  # type: ignore[return-value]


def _partition_at_once(value: bytes, v: int) -> PartitionRecord | None:
    """A whole PartitionRecord (after its three-byte head) without a Reader, as nearly every one is: its fields
    at once, its directories' count one byte, no tagged fields. None for any other, which the reader decodes."""
    found = _partition_fields_at(value, 3, len(value))
    if found is None:
        return None
    fields, pos = found
    if v >= 1:                    # the directories, skipped: a one-byte count of 16-byte uuids
        if pos >= len(value) or value[pos] >= 0x80:
            return None
        pos += 1 + 16 * max(value[pos] - 1, 0)
    if pos >= len(value) or value[pos] != 0:
        return None
    return PartitionRecord(*fields, 0, None, None)


@functools.lru_cache(maxsize=256)
def _partition_layout(replicas: int, isr: int, removing: int, adding: int) -> struct.Struct:
    """Partition id, topic id (skipped), the four arrays (each behind its length byte), leader and epochs."""
    return struct.Struct(">i16x" + "".join(f"x{n}i" for n in (replicas, isr, removing, adding)) + "iii")


# a topic id's text, remembered: a topic's partitions all name it, and each then holds one string
_uuid_text = functools.lru_cache(maxsize=4096)(uuid_text)


def _topic_id(r: Reader) -> str:
    return _uuid_text(r.raw(16, "topic_id"))


def _partition_change(r: Reader, v: int) -> PartitionChangeRecord:
    partition, topic_id = at_least(0, r.int32("partition_id"), "partition"), _topic_id(r)
    t = r.tagged_fields("record")
    recovery = tagged(t, 5, _recovery_or_unchanged, _UNCHANGED, whole=False)
    return PartitionChangeRecord(topic_id, partition, tagged(t, 0, _ISR, None, whole=False),
                                 tagged(t, 1, _new_leader, NO_LEADER_CHANGE, whole=False),
                                 tagged(t, 2, _REPLICAS, None, whole=False), tagged(t, 3, _REMOVING, None, whole=False),
                                 tagged(t, 4, _ADDING, None, whole=False), None if recovery == _UNCHANGED else recovery,
                                 tagged(t, 6, _ELR, None, whole=False), tagged(t, 7, _LAST_KNOWN_ELR, None, whole=False))


_CHANGE_ID_TAGS = frozenset({0, 2, 3, 4, 6, 7})   # isr, replicas, removing, adding, elr, last known elr


def _partition_change_at_once(value: bytes, v: int) -> PartitionChangeRecord | None:
    """A whole PartitionChangeRecord (after its three-byte head) without a Reader or a reader per tag, as
    nearly every one is: each tag, size and array length one byte, every value in Kafka's ranges. None for any
    other, which the reader decodes (and names what is wrong with). The changes of ISRs and leaders are most
    of a metadata log after its start."""
    end = len(value)
    if end < 24 or value[23] >= 0x80:
        return None
    partition = INT32.unpack_from(value, 3)[0]
    if partition < 0:
        return None
    ids: list[tuple[int, ...] | None] = [None] * 8
    leader, recovery, pos = NO_LEADER_CHANGE, _UNCHANGED, 24
    for _ in range(value[23]):
        if pos + 2 > end or value[pos] >= 0x80 or value[pos + 1] >= 0x80:
            return None
        tag, stop = value[pos], pos + 2 + value[pos + 1]
        pos += 2
        if stop > end:
            return None
        if tag in _CHANGE_ID_TAGS:
            if pos >= stop or value[pos] >= 0x80 or pos + 1 + 4 * max(value[pos] - 1, 0) > stop:
                return None
            found = INT32S[value[pos] - 1].unpack_from(value, pos + 1) if value[pos] else None
            if found and min(found) < 0:
                return None
            ids[tag] = found
        elif tag == 1:
            if pos + 4 > stop or (leader := INT32.unpack_from(value, pos)[0]) < NO_LEADER_CHANGE:
                return None
        elif tag == 5:
            if pos >= stop or (recovery := value[pos]) not in (0, 1, 0xff):
                return None
            recovery = -1 if recovery == 0xff else recovery
        pos = stop               # a tag kmon does not read (directories), or the bytes after what it reads
    return PartitionChangeRecord(_uuid_text(value[7:23]), partition, ids[0], leader, ids[2], ids[3], ids[4],
                                 None if recovery == _UNCHANGED else recovery, ids[6], ids[7])


def _new_leader(r: Reader) -> int:
    return at_least(NO_LEADER_CHANGE, r.int32("leader"), "leader")


def _recovery_or_unchanged(r: Reader) -> int:
    return _recovery_state(r, (_UNCHANGED,))


def _topic(r: Reader, v: int) -> TopicRecord:
    t = TopicRecord(r.string("name"), r.uuid("topic_id"))
    r.skip_tagged_fields("record")
    return t


def _remove_topic(r: Reader, v: int) -> RemoveTopicRecord:
    t = RemoveTopicRecord(r.uuid("topic_id"))
    r.skip_tagged_fields("record")
    return t


def _unregister(r: Reader, v: int) -> UnregisterBrokerRecord:
    u = UnregisterBrokerRecord(_broker_id(r), _broker_epoch(r))
    r.skip_tagged_fields("record")
    return u


def _config(r: Reader, v: int) -> ConfigRecord:
    c = ConfigRecord(r.int8("resource_type"), r.string("resource_name"), r.string("name"), r.nullable_string("value"))
    r.skip_tagged_fields("record")
    return c


def _feature_level(r: Reader, v: int) -> FeatureLevelRecord:
    f = FeatureLevelRecord(r.string("name"), r.int16("feature_level"))
    r.skip_tagged_fields("record")
    return f


def _clear_elr(r: Reader, v: int) -> ClearElrRecord:
    c = ClearElrRecord(r.string("topic_name"))
    r.skip_tagged_fields("record")
    return c


def _begin(r: Reader, v: int) -> BeginTransactionRecord:
    return BeginTransactionRecord(tagged(r.tagged_fields("record"), 0, _NAME, None, whole=False))


def _end(r: Reader, v: int) -> EndTransactionRecord:
    r.skip_tagged_fields("record")
    return EndTransactionRecord()


def _abort(r: Reader, v: int) -> AbortTransactionRecord:
    return AbortTransactionRecord(tagged(r.tagged_fields("record"), 0, _REASON, None, whole=False))


# api key -> (highest version known, reader, Kafka's name) of the records that carry cluster state; the
# versions Kafka 3.7-4.3 write (newer ones of RegisterBroker and BrokerRegistrationChange added tagged fields only)
DECODED: dict[int, tuple[int, Callable[[Reader, int], MetadataRecord], str]] = {
    0: (4, _register_broker, "RegisterBrokerRecord"),
    1: (0, _unregister, "UnregisterBrokerRecord"),
    2: (0, _topic, "TopicRecord"),
    3: (2, _partition, "PartitionRecord"),
    4: (0, _config, "ConfigRecord"),
    5: (2, _partition_change, "PartitionChangeRecord"),
    7: (0, _fence(True), "FenceBrokerRecord"),
    8: (0, _fence(False), "UnfenceBrokerRecord"),
    9: (0, _remove_topic, "RemoveTopicRecord"),
    12: (0, _feature_level, "FeatureLevelRecord"),
    17: (3, _broker_change, "BrokerRegistrationChangeRecord"),
    28: (0, _clear_elr, "ClearElrRecord"),
    23: (0, _begin, "BeginTransactionRecord"),
    24: (0, _end, "EndTransactionRecord"),
    25: (0, _abort, "AbortTransactionRecord"),
}
# records of state kmon does not watch (credentials, ACLs, quotas, producer ids, no-ops, controllers'
# registrations, the ZooKeeper migration): any version is skipped unread
SKIPPED = frozenset({10, 11, 14, 15, 18, 19, 20, 21, 22, 26, 27})


def decode_metadata_record(value: bytes) -> MetadataRecord:
    """One metadata record; None for a record kmon skips. Raises MalformedRecord."""
    known = _DECODED_HEADS.get(value[:3])
    if known is not None:   # the usual head: frame version 1, an api key and a version decoded, one byte each
        read, version, name, at_once = known
        if at_once is not None and (record := at_once(value, version)) is not None:
            return record
        return read(Reader(value, name, True, 3), version)
    r = Reader(value, "metadata record", flexible=True)
    frame = r.uvarint("frame version")
    if frame != 1:
        raise r.fail(f"frame version {frame}, not 1")
    api_key, version = r.uvarint("api key"), r.uvarint("version")
    known = DECODED.get(api_key)
    if known is None:
        return None if api_key in SKIPPED else Unknown(api_key, version)
    if version > known[0]:
        return Unknown(api_key, version)
    r.what = known[2]
    return known[1](r, version)


# a record's first three bytes -> its reader, version, name and reader without a Reader (None when it has
# none), for every record type and version decoded whose api key and version are one-byte varints: one
# lookup, where reading the head took three varints
_AT_ONCE: dict[int, Callable[[bytes, int], MetadataRecord]] = {3: _partition_at_once, 5: _partition_change_at_once}
_DECODED_HEADS = {bytes((1, api_key, version)): (read, version, name, _AT_ONCE.get(api_key))
                  for api_key, (newest, read, name) in DECODED.items() if api_key < 0x80
                  for version in range(newest + 1)}
