"""Encoders for the KRaft collector's tests: metadata records and record batches, byte by byte, and
the controller's Fetch, FetchSnapshot and DescribeQuorum responses.

Written from the metadata record schemas (metadata/src/main/resources/common/metadata/*.json) and
the record batch v2 layout, independently of the decoders under test, so that a decoder reading a
field in the wrong place or the wrong width fails here. Every metadata record is framed as
``uvarint frame version (1), uvarint api key, uvarint version`` and then the flexible encoding:
compact strings and arrays (unsigned varint length + 1, 0 = null), 16-byte uuids, and each struct
ending with its tagged fields (uvarint count, then per field uvarint tag, uvarint size, bytes).
"""
from __future__ import annotations

import gzip
import struct
import uuid as _uuid
from typing import Iterable, Sequence

from collectors.kraft.wire import Writer

# ---------------------------------------------------------------- primitives


def uvarint(n: int) -> bytes:
    return Writer().uvarint(n).bytes()


def varint(n: int) -> bytes:
    """A zig-zag signed varint (the record fields of a batch)."""
    return uvarint((n << 1) ^ (n >> 63))


def uuid_bytes(u: str) -> bytes:
    return _uuid.UUID(u).bytes


def compact_string(s: str | None) -> bytes:
    return Writer().compact_string(s).bytes()


def compact_int32s(items: Sequence[int] | None) -> bytes:
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(struct.pack(">i", i) for i in items)


def compact_uuids(items: Sequence[str]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(uuid_bytes(u) for u in items)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    """A tagged-field section, in ascending tag order as Kafka writes it."""
    fields = fields or {}
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def u16(v: int) -> bytes:
    return struct.pack(">H", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


# ---------------------------------------------------------------- metadata records


def framed(api_key: int, version: int, body: bytes, frame_version: int = 1) -> bytes:
    return uvarint(frame_version) + uvarint(api_key) + uvarint(version) + body


def register_broker(version: int, broker_id: int, incarnation: str, epoch: int,
                    endpoints: Iterable[tuple[str, str, int, int]] = (),
                    features: dict[str, tuple[int, int]] | None = None, rack: str | None = None,
                    fenced: bool = True, in_controlled_shutdown: bool = False, migrating: bool = False,
                    log_dirs: Sequence[str] | None = None, extra_tags: dict[int, bytes] | None = None) -> bytes:
    """RegisterBrokerRecord (api key 0), versions 0-4."""
    body = i32(broker_id)
    if version >= 2:
        body += boolean(migrating)
    body += uuid_bytes(incarnation) + i64(epoch)
    eps = list(endpoints)
    body += uvarint(len(eps) + 1)
    for name, host, port, protocol in eps:
        body += compact_string(name) + compact_string(host) + u16(port) + i16(protocol) + tags()
    feats = features or {}
    body += uvarint(len(feats) + 1)
    for name, (lo, hi) in feats.items():
        body += compact_string(name) + i16(lo) + i16(hi) + tags()
    body += compact_string(rack) + boolean(fenced)
    if version >= 1:
        body += boolean(in_controlled_shutdown)
    tagged = dict(extra_tags or {})
    if version >= 3 and log_dirs is not None:
        tagged[0] = compact_uuids(log_dirs)
    return framed(0, version, body + tags(tagged))


def unregister_broker(broker_id: int, epoch: int) -> bytes:
    return framed(1, 0, i32(broker_id) + i64(epoch) + tags())


def broker_change(broker_id: int, epoch: int, fenced: int | None = None, shutdown: int | None = None,
                  version: int = 1, log_dirs: Sequence[str] | None = None) -> bytes:
    """BrokerRegistrationChangeRecord (17): Fenced tag 0 (1 fence, -1 unfence, 0 none), InControlledShutdown
    tag 1, LogDirs tag 2; a field left None is not written (its default: no change)."""
    tagged = {}
    if fenced is not None:
        tagged[0] = i8(fenced)
    if shutdown is not None:
        tagged[1] = i8(shutdown)
    if log_dirs is not None:
        tagged[2] = compact_uuids(log_dirs)
    return framed(17, version, i32(broker_id) + i64(epoch) + tags(tagged))


def fence_broker(broker_id: int, epoch: int) -> bytes:
    return framed(7, 0, i32(broker_id) + i64(epoch) + tags())


def unfence_broker(broker_id: int, epoch: int) -> bytes:
    return framed(8, 0, i32(broker_id) + i64(epoch) + tags())


def topic(name: str, topic_id: str) -> bytes:
    return framed(2, 0, compact_string(name) + uuid_bytes(topic_id) + tags())


def remove_topic(topic_id: str) -> bytes:
    return framed(9, 0, uuid_bytes(topic_id) + tags())


_ABSENT = object()


def partition(topic_id: str, partition_id: int, replicas: Sequence[int], isr: Sequence[int],
              leader: int, leader_epoch: int = 0, partition_epoch: int = 0, removing: Sequence[int] = (),
              adding: Sequence[int] = (), version: int = 0, directories: Sequence[str] | None = None,
              recovery: int | None = None, elr: object = _ABSENT, last_known_elr: object = _ABSENT) -> bytes:
    """PartitionRecord (3): LeaderRecoveryState is tag 0 (all versions), Directories a field of v1+,
    ELR tag 1 and LastKnownElr tag 2 of v2+."""
    body = i32(partition_id) + uuid_bytes(topic_id)
    body += compact_int32s(replicas) + compact_int32s(isr) + compact_int32s(removing) + compact_int32s(adding)
    body += i32(leader) + i32(leader_epoch) + i32(partition_epoch)
    if version >= 1:
        dirs = directories if directories is not None else ["00000000-0000-0000-0000-000000000000"] * len(replicas)
        body += compact_uuids(dirs)
    tagged: dict[int, bytes] = {}
    if recovery is not None:
        tagged[0] = i8(recovery)
    if elr is not _ABSENT:
        tagged[1] = compact_int32s(elr)   # type: ignore[arg-type]
    if last_known_elr is not _ABSENT:
        tagged[2] = compact_int32s(last_known_elr)   # type: ignore[arg-type]
    return framed(3, version, body + tags(tagged))


def partition_change(topic_id: str, partition_id: int, isr: Sequence[int] | None = None, leader: int | None = None,
                     replicas: Sequence[int] | None = None, removing: Sequence[int] | None = None,
                     adding: Sequence[int] | None = None, recovery: int | None = None,
                     elr: Sequence[int] | None = None, last_known_elr: Sequence[int] | None = None,
                     directories: Sequence[str] | None = None, version: int = 0) -> bytes:
    """PartitionChangeRecord (5): everything but the partition and topic id is tagged (Isr 0, Leader 1,
    Replicas 2, Removing 3, Adding 4, LeaderRecoveryState 5, ELR 6, LastKnownElr 7, Directories 8);
    a field left None is not written."""
    tagged: dict[int, bytes] = {}
    if isr is not None:
        tagged[0] = compact_int32s(isr)
    if leader is not None:
        tagged[1] = i32(leader)
    if replicas is not None:
        tagged[2] = compact_int32s(replicas)
    if removing is not None:
        tagged[3] = compact_int32s(removing)
    if adding is not None:
        tagged[4] = compact_int32s(adding)
    if recovery is not None:
        tagged[5] = i8(recovery)
    if elr is not None:
        tagged[6] = compact_int32s(elr)
    if last_known_elr is not None:
        tagged[7] = compact_int32s(last_known_elr)
    if directories is not None:
        tagged[8] = compact_uuids(directories)
    return framed(5, version, i32(partition_id) + uuid_bytes(topic_id) + tags(tagged))


def config(resource_type: int, resource_name: str, name: str, value: str | None) -> bytes:
    return framed(4, 0, i8(resource_type) + compact_string(resource_name) + compact_string(name)
                  + compact_string(value) + tags())


def feature_level(name: str, level: int) -> bytes:
    return framed(12, 0, compact_string(name) + i16(level) + tags())


def clear_elr(topic_name: str) -> bytes:
    return framed(28, 0, compact_string(topic_name) + tags())


def begin_transaction(name: str | None = None) -> bytes:
    return framed(23, 0, tags({0: compact_string(name)} if name is not None else {}))


def end_transaction() -> bytes:
    return framed(24, 0, tags())


def abort_transaction(reason: str | None = None) -> bytes:
    return framed(25, 0, tags({0: compact_string(reason)} if reason is not None else {}))


def no_op() -> bytes:
    return framed(20, 0, tags())


# ---------------------------------------------------------------- control records

def control_key(record_type: int, version: int = 0) -> bytes:
    return i16(version) + i16(record_type)


def leader_change_value(leader_id: int, voters: Sequence[int] = (), granting: Sequence[int] = (),
                        version: int = 0) -> bytes:
    """LeaderChangeMessage (flexible): Version int16, LeaderId int32, Voters and GrantingVoters
    (compact arrays of {VoterId int32, tags}), tags."""
    def voters_of(ids: Sequence[int]) -> bytes:
        return uvarint(len(ids) + 1) + b"".join(i32(v) + tags() for v in ids)
    return i16(version) + i32(leader_id) + voters_of(voters) + voters_of(granting) + tags()


def kraft_version_value(kraft_version: int, version: int = 0) -> bytes:
    """KRaftVersionRecord (flexible): Version int16, KRaftVersion int16, tags."""
    return i16(version) + i16(kraft_version) + tags()


# ---------------------------------------------------------------- record batches (magic 2)

def record(offset_delta: int, value: bytes | None, key: bytes | None = None, timestamp_delta: int = 0,
           headers: Sequence[tuple[str, bytes]] = ()) -> bytes:
    body = i8(0) + varint(timestamp_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hkey, hvalue in headers:
        k = hkey.encode()
        body += varint(len(k)) + k + varint(len(hvalue)) + hvalue
    return varint(len(body)) + body


BATCH_HEADER_SIZE = 61


def batch(base_offset: int, values: Sequence[bytes | None | tuple[bytes | None, bytes | None]], epoch: int = 1,
          control: bool = False, compression: int = 0, base_timestamp: int = 1_000, max_timestamp: int = 2_000,
          record_count: int | None = None, magic: int = 2, crc: int = 0,
          raw_records: bytes | None = None) -> bytes:
    """One batch; each value is a record's value, or a (key, value) pair; record i has offset delta i."""
    records = b""
    for i, v in enumerate(values):
        key, value = v if isinstance(v, tuple) else (None, v)
        records += record(i, value, key)
    if raw_records is not None:
        records = raw_records
    if compression == 1:
        records = gzip.compress(records)
    attributes = (compression & 7) | (0x20 if control else 0)
    count = len(values) if record_count is None else record_count
    last_delta = max(count - 1, 0)
    after_length = (i32(epoch) + i8(magic) + struct.pack(">I", crc) + i16(attributes) + i32(last_delta)
                    + i64(base_timestamp) + i64(max_timestamp) + i64(-1) + i16(-1) + i32(-1) + i32(count))
    head = i64(base_offset) + i32(len(after_length) + len(records))
    out = head + after_length + records
    assert len(head + after_length) == BATCH_HEADER_SIZE
    return out


# ---------------------------------------------------------------- controller responses
# Fetch v17, FetchSnapshot v1 and DescribeQuorum v2, as a controller listener answers them.

META_ID = "00000000-0000-0000-0000-000000000001"


def fetch_partition(error=0, hw=10, lso=10, log_start=0, records=b"", partition_tags=None, aborted=None,
                    index=0) -> bytes:
    body = i32(index) + i16(error) + i64(hw) + i64(lso) + i64(log_start)
    if aborted is None:
        body += uvarint(0)
    else:
        body += uvarint(len(aborted) + 1) + b"".join(i64(pid) + i64(first) + tags() for pid, first in aborted)
    body += i32(-1)                                           # preferred read replica
    body += uvarint(0) if records is None else uvarint(len(records) + 1) + records
    return body + tags(partition_tags)


def fetch_response(partitions: list[bytes], top_error=0, top_tags=None, topic_id=META_ID) -> bytes:
    body = i32(0) + i16(top_error) + i32(0)
    if partitions is None:
        body += uvarint(1)
    else:
        body += uvarint(2) + uuid_bytes(topic_id) + uvarint(len(partitions) + 1) + b"".join(partitions) + tags()
    return body + tags(top_tags)


def leader_and_epoch(leader: int, epoch: int) -> bytes:
    return i32(leader) + i32(epoch) + tags()


def snapshot(end: int, epoch: int) -> bytes:
    return i64(end) + i32(epoch) + tags()


def endpoints(*nodes: tuple[int, str, int, str | None]) -> bytes:
    return uvarint(len(nodes) + 1) + b"".join(
        i32(n) + compact_string(h) + i32(p) + compact_string(rack) + tags() for n, h, p, rack in nodes)


def fetch_snapshot_response(error=0, end=500, epoch=6, size=1000, position=0, data=b"", leader=None,
                            top_error=0, empty=False) -> bytes:
    body = i32(0) + i16(top_error)
    if empty:
        return body + uvarint(1) + tags()
    part = i32(0) + i16(error) + snapshot(end, epoch) + i64(size) + i64(position)
    part += uvarint(len(data) + 1) + data
    part += tags({0: leader_and_epoch(*leader)} if leader else {})
    body += uvarint(2) + compact_string("__cluster_metadata") + uvarint(2) + part + tags()
    return body + tags({0: uvarint(2) + i32(1) + compact_string("h") + u16(9093) + tags()})


def replica(rid: int, directory: str, leo: int, fetch_ms: int, caught_up_ms: int) -> bytes:
    return i32(rid) + uuid_bytes(directory) + i64(leo) + i64(fetch_ms) + i64(caught_up_ms) + tags()


def describe_quorum_response(error=0, message=None, partition_error=0, voters=(), observers=(), nodes=(),
                             topics=True) -> bytes:
    body = i16(error) + compact_string(message)
    if topics:
        part = (i32(0) + i16(partition_error) + compact_string(None) + i32(2) + i32(11) + i64(300)
                + uvarint(len(voters) + 1) + b"".join(voters) + uvarint(len(observers) + 1) + b"".join(observers)
                + tags({0: i64(99)}))
        body += uvarint(2) + compact_string("__cluster_metadata") + uvarint(2) + part + tags()
    else:
        body += uvarint(1)
    body += uvarint(len(nodes) + 1)
    for nid, listeners in nodes:
        body += i32(nid) + uvarint(len(listeners) + 1)
        body += b"".join(compact_string(n) + compact_string(h) + u16(p) + tags() for n, h, p in listeners)
        body += tags()
    return body + tags()
