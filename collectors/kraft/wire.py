"""Kafka's wire encoding, and the few requests an observer of the metadata quorum sends: pure.

Written from Kafka's message schemas (clients/src/main/resources/common/message/*.json): Fetch v17,
FetchSnapshot v1 and DescribeQuorum v2 to the controller listener, ApiVersions, and SaslHandshake
/SaslAuthenticate for secured listeners. Flexible versions (KIP-482) use compact strings and arrays
(unsigned varint length + 1) and end every struct with tagged fields; :class:`Reader` skips the tags
it is not asked for, so a newer Kafka's additions are ignored, not misread.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Callable, TypeVar

T = TypeVar("T")

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-000000000001").bytes   # fixed by KRaft

API_FETCH, API_METADATA, API_SASL_HANDSHAKE, API_API_VERSIONS = 1, 3, 17, 18
API_SASL_AUTHENTICATE, API_DESCRIBE_QUORUM, API_FETCH_SNAPSHOT = 36, 55, 59
FETCH_VERSION, FETCH_SNAPSHOT_VERSION, DESCRIBE_QUORUM_VERSION, METADATA_VERSION = 17, 1, 2, 12

# error codes an observer acts on (Kafka's Errors enum)
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
POSITION_OUT_OF_RANGE = 99
SNAPSHOT_NOT_FOUND = 98
ERROR_NAMES = {OFFSET_OUT_OF_RANGE: "OFFSET_OUT_OF_RANGE", NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER",
               CLUSTER_AUTHORIZATION_FAILED: "CLUSTER_AUTHORIZATION_FAILED",
               UNSUPPORTED_SASL_MECHANISM: "UNSUPPORTED_SASL_MECHANISM",
               SASL_AUTHENTICATION_FAILED: "SASL_AUTHENTICATION_FAILED", FENCED_LEADER_EPOCH: "FENCED_LEADER_EPOCH",
               UNKNOWN_LEADER_EPOCH: "UNKNOWN_LEADER_EPOCH", SNAPSHOT_NOT_FOUND: "SNAPSHOT_NOT_FOUND",
               POSITION_OUT_OF_RANGE: "POSITION_OUT_OF_RANGE", 35: "UNSUPPORTED_VERSION", 42: "INVALID_REQUEST",
               15: "COORDINATOR_NOT_AVAILABLE", 5: "LEADER_NOT_AVAILABLE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
               -1: "UNKNOWN_SERVER_ERROR"}


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"error {code}")


class WireError(ValueError):
    """Bytes that do not follow the encoding they were read with."""


_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_U16 = struct.Struct(">H")


class Reader:
    """Reads Kafka's primitive types from ``data`` from ``pos`` on."""
    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise WireError(f"{n} bytes wanted at {start}, {self.end - start} left")
        self.pos = start + n
        return start

    def int8(self) -> int:
        return _I8.unpack_from(self.data, self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.data, self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.data, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.data, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.data, self._take(8))[0]

    def boolean(self) -> bool:
        return self.int8() != 0

    def uuid(self) -> str:
        start = self._take(16)
        h = bytes(self.data[start:start + 16]).hex()   # uuid.UUID's own str(), a third of the time
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def uvarint(self) -> int:
        data, pos = self.data, self.pos
        if pos < self.end and data[pos] < 0x80:   # most are one byte: lengths, counts, tags
            self.pos = pos + 1
            return data[pos]
        value = shift = 0
        end = self.end
        while True:
            if pos >= end:
                raise WireError(f"varint runs past the end at {pos}")
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift > 63:
                raise WireError(f"varint too long at {pos}")

    def varint(self) -> int:
        """A zig-zag signed varint (records' fields)."""
        n = self.uvarint()
        return (n >> 1) ^ -(n & 1)

    def raw(self, n: int) -> bytes:
        start = self._take(n)
        return bytes(self.data[start:start + n])

    def string(self) -> str:          # a non-flexible string: int16 length
        n = self.int16()
        if n < 0:
            raise WireError("null where a string is required")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise WireError("null where a string is required")
        return self._text(n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._text(n)

    def _text(self, n: int) -> str:
        start = self._take(n)
        try:
            return bytes(self.data[start:start + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise WireError(f"a string that is not UTF-8 at {start}: {e.reason}") from None

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n)

    def compact_array(self, item: Callable[["Reader"], T]) -> list[T] | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        if n > self.end - self.pos:   # every item takes at least a byte: a corrupt length
            raise WireError(f"an array of {n} items in {self.end - self.pos} bytes")
        return [item(self) for _ in range(n)]

    def array(self, item: Callable[["Reader"], T]) -> list[T]:   # a non-flexible array: int32 length
        n = self.int32()
        if n < 0 or n > self.end - self.pos:
            raise WireError(f"an array of {n} items in {self.end - self.pos} bytes")
        return [item(self) for _ in range(n)]

    def int32_array(self) -> list[int]:
        items = self.compact_array(Reader.int32)
        return [] if items is None else items

    def tagged(self, wanted: dict[int, Callable[["Reader"], object]] | None = None) -> dict[int, object]:
        """The tagged fields that end a flexible struct; the ``wanted`` ones decoded, others skipped."""
        found: dict[int, object] = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            end = self.pos + size
            if end > self.end:
                raise WireError(f"tagged field {tag} of {size} bytes runs past the end")
            if wanted and tag in wanted:
                found[tag] = wanted[tag](Reader(self.data, self.pos, end))
            self.pos = end
        return found


@dataclass
class Writer:
    parts: list[bytes] = field(default_factory=list)

    def int8(self, v: int) -> "Writer":
        self.parts.append(_I8.pack(v))
        return self

    def int16(self, v: int) -> "Writer":
        self.parts.append(_I16.pack(v))
        return self

    def int32(self, v: int) -> "Writer":
        self.parts.append(_I32.pack(v))
        return self

    def int64(self, v: int) -> "Writer":
        self.parts.append(_I64.pack(v))
        return self

    def raw(self, b: bytes) -> "Writer":
        self.parts.append(b)
        return self

    def uvarint(self, v: int) -> "Writer":
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))
        return self

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


# ---------------------------------------------------------------- framing

def request(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes,
            flexible: bool) -> bytes:
    """A size-prefixed request: header v2 (flexible) or v1, then the body."""
    header = Writer().int16(api_key).int16(version).int32(correlation_id).string(client_id)
    if flexible:
        header.no_tags()
    payload = header.bytes() + body
    return _I32.pack(len(payload)) + payload


def response_body(payload: bytes, correlation_id: int, flexible_header: bool) -> Reader:
    """The body of one response (the bytes after its size); checks the correlation id."""
    r = Reader(payload)
    got = r.int32()
    if got != correlation_id:
        raise WireError(f"response to request {got}, expected {correlation_id}")
    if flexible_header:
        r.tagged()
    return r


# ---------------------------------------------------------------- ApiVersions (v3)

API_VERSIONS_VERSION = 3


def api_versions_request(client_version: str) -> bytes:
    return Writer().compact_string("kmon").compact_string(client_version).no_tags().bytes()


def parse_api_versions(r: Reader) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error code, api key -> (min, max) version)."""
    error = r.int16()
    keys = r.compact_array(lambda x: (x.int16(), x.int16(), x.int16(), x.tagged())) or []
    return error, {k: (lo, hi) for k, lo, hi, _ in keys}


# ---------------------------------------------------------------- Fetch (v17)

@dataclass(frozen=True)
class LeaderAndEpoch:
    leader_id: int     # -1: unknown to the answering node
    epoch: int


@dataclass(frozen=True)
class SnapshotId:
    end_offset: int
    epoch: int


@dataclass(frozen=True)
class FetchResult:
    error: int                          # the partition's error (or the response's, if it has one)
    high_watermark: int
    log_start_offset: int
    records: bytes                      # record batches, possibly ending in a partial one
    leader: LeaderAndEpoch | None       # who leads the quorum, as the node answering knows it
    diverging: SnapshotId | None        # (epoch, end offset) where this observer's log diverged
    snapshot: SnapshotId | None         # fetch this snapshot: the offset asked for is below the log start
    endpoints: dict[int, tuple[str, int]] = field(default_factory=dict)   # node id -> this listener's address


def fetch_request(offset: int, last_fetched_epoch: int, leader_epoch: int, max_wait_ms: int,
                  max_bytes: int, cluster_id: str | None = None) -> bytes:
    """An observer's fetch (ReplicaState left at its default: replica id -1) of the metadata log."""
    w = Writer().int32(max_wait_ms).int32(1).int32(max_bytes).int8(0).int32(0).int32(-1)
    w.count(1).raw(METADATA_TOPIC_ID).count(1)
    w.int32(0).int32(leader_epoch).int64(offset).int32(last_fetched_epoch).int64(-1).int32(max_bytes).no_tags()
    w.no_tags()          # end of the topic
    w.count(0)           # forgotten topics
    w.compact_string("")  # rack id
    # ClusterId (tag 0) and ReplicaState (tag 1) are tagged fields, written last; ReplicaState
    # absent means replica id -1: an observer
    return _with_cluster_id(w, cluster_id).bytes()


def _with_cluster_id(w: Writer, cluster_id: str | None) -> Writer:
    if cluster_id is None:
        return w.no_tags()
    cid = Writer().compact_string(cluster_id).bytes()
    return w.uvarint(1).uvarint(0).uvarint(len(cid)).raw(cid)


def _epoch_end(r: Reader) -> SnapshotId:
    epoch, end = r.int32(), r.int64()
    r.tagged()
    return SnapshotId(end, epoch)


def _snapshot_id(r: Reader) -> SnapshotId:
    end, epoch = r.int64(), r.int32()
    r.tagged()
    return SnapshotId(end, epoch)


def _leader(r: Reader) -> LeaderAndEpoch:
    leader, epoch = r.int32(), r.int32()
    r.tagged()
    return LeaderAndEpoch(leader, epoch)


def _node_endpoint(r: Reader, port: Callable[[Reader], int]) -> tuple[int, tuple[str, int]]:
    node, host, p = r.int32(), r.compact_string(), port(r)
    return node, (host, p)


def parse_fetch(r: Reader) -> FetchResult:
    r.int32()                      # throttle
    top_error = r.int16()
    r.int32()                      # session id
    partitions: list[FetchResult] = []

    def partition(x: Reader) -> None:
        x.int32()
        error, hw = x.int16(), x.int64()
        x.int64()                  # last stable offset
        log_start = x.int64()
        x.compact_array(lambda a: (a.int64(), a.int64(), a.tagged()))   # aborted transactions
        x.int32()                  # preferred read replica
        records = x.compact_bytes() or b""
        tags = x.tagged({0: _epoch_end, 1: _leader, 2: _snapshot_id})
        diverging = tags.get(0)
        snapshot = tags.get(2)
        partitions.append(FetchResult(error, hw, log_start, records, tags.get(1),  # type: ignore[arg-type]
                                      diverging if diverging and diverging.epoch >= 0 else None,  # type: ignore[union-attr]
                                      snapshot if snapshot and snapshot.end_offset >= 0 else None))  # type: ignore[union-attr]

    def topic(x: Reader) -> None:
        x.raw(16)
        x.compact_array(partition)
        x.tagged()

    r.compact_array(topic)
    tags = r.tagged({0: lambda x: dict(x.compact_array(lambda y: _endpoint_with_rack(y)) or [])})
    endpoints: dict[int, tuple[str, int]] = tags.get(0, {})  # type: ignore[assignment]
    if not partitions:
        return FetchResult(top_error or -1, -1, -1, b"", None, None, None, endpoints)
    p = partitions[0]
    return FetchResult(p.error or top_error, p.high_watermark, p.log_start_offset, p.records, p.leader,
                       p.diverging, p.snapshot, endpoints)


def _endpoint_with_rack(r: Reader) -> tuple[int, tuple[str, int]]:
    node = _node_endpoint(r, Reader.int32)
    r.compact_nullable_string()
    r.tagged()
    return node


# ---------------------------------------------------------------- FetchSnapshot (v1)

@dataclass(frozen=True)
class SnapshotChunk:
    error: int
    snapshot: SnapshotId | None
    leader: LeaderAndEpoch | None
    size: int
    position: int
    data: bytes


def fetch_snapshot_request(snapshot: SnapshotId, position: int, leader_epoch: int, max_bytes: int,
                           cluster_id: str | None = None) -> bytes:
    w = Writer().int32(-1).int32(max_bytes)
    w.count(1).compact_string(METADATA_TOPIC).count(1)
    w.int32(0).int32(leader_epoch).int64(snapshot.end_offset).int32(snapshot.epoch).no_tags().int64(position)
    w.no_tags()   # end of the partition
    w.no_tags()   # end of the topic
    return _with_cluster_id(w, cluster_id).bytes()


def parse_fetch_snapshot(r: Reader) -> SnapshotChunk:
    r.int32()
    top_error = r.int16()
    chunks: list[SnapshotChunk] = []

    def partition(x: Reader) -> None:
        x.int32()
        error = x.int16()
        snap = _snapshot_id(x)
        size, position = x.int64(), x.int64()
        n = x.uvarint() - 1            # records: compact, never null here
        data = x.raw(max(n, 0))
        tags = x.tagged({0: _leader})
        chunks.append(SnapshotChunk(error, snap, tags.get(0), size, position, data))  # type: ignore[arg-type]

    def topic(x: Reader) -> None:
        x.compact_string()
        x.compact_array(partition)
        x.tagged()

    r.compact_array(topic)
    r.tagged()
    if not chunks:
        return SnapshotChunk(top_error or -1, None, None, 0, 0, b"")
    c = chunks[0]
    return SnapshotChunk(c.error or top_error, c.snapshot, c.leader, c.size, c.position, c.data)


# ---------------------------------------------------------------- DescribeQuorum (v2)

@dataclass(frozen=True)
class ReplicaInfo:
    replica_id: int
    log_end_offset: int
    last_fetch_ms: int        # -1: unknown
    last_caught_up_ms: int    # -1: unknown


@dataclass(frozen=True)
class QuorumInfo:
    error: int
    message: str | None
    leader_id: int
    epoch: int
    high_watermark: int
    voters: tuple[ReplicaInfo, ...]
    observers: tuple[ReplicaInfo, ...]
    endpoints: dict[int, dict[str, tuple[str, int]]]   # node id -> listener name -> address


def describe_quorum_request() -> bytes:
    w = Writer().count(1).compact_string(METADATA_TOPIC).count(1).int32(0).no_tags()
    return w.no_tags().no_tags().bytes()


def _replica(r: Reader) -> ReplicaInfo:
    rid = r.int32()
    r.raw(16)   # directory id
    info = ReplicaInfo(rid, r.int64(), r.int64(), r.int64())
    r.tagged()
    return info


def parse_describe_quorum(r: Reader) -> QuorumInfo:
    error, message = r.int16(), r.compact_nullable_string()
    parts: list[QuorumInfo] = []

    def partition(x: Reader) -> None:
        x.int32()
        perr, pmsg = x.int16(), x.compact_nullable_string()
        leader, epoch, hw = x.int32(), x.int32(), x.int64()
        voters = tuple(x.compact_array(_replica) or ())
        observers = tuple(x.compact_array(_replica) or ())
        x.tagged()
        parts.append(QuorumInfo(perr, pmsg, leader, epoch, hw, voters, observers, {}))

    def topic(x: Reader) -> None:
        x.compact_string()
        x.compact_array(partition)
        x.tagged()

    def listener(x: Reader) -> tuple[str, tuple[str, int]]:
        name, host, port = x.compact_string(), x.compact_string(), x.uint16()
        x.tagged()
        return name, (host, port)

    def node(x: Reader) -> tuple[int, dict[str, tuple[str, int]]]:
        nid = x.int32()
        listeners = dict(x.compact_array(listener) or [])
        x.tagged()
        return nid, listeners

    r.compact_array(topic)
    nodes = dict(r.compact_array(node) or [])
    r.tagged()
    if error or not parts:
        return QuorumInfo(error or -1, message, -1, -1, -1, (), (), nodes)
    p = parts[0]
    return QuorumInfo(p.error, p.message, p.leader_id, p.epoch, p.high_watermark, p.voters, p.observers, nodes)


# ---------------------------------------------------------------- Metadata (v12), to a broker

@dataclass(frozen=True)
class PartitionMetadata:
    error: int
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicMetadata:
    error: int
    name: str | None
    topic_id: str
    internal: bool
    partitions: tuple[PartitionMetadata, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: dict[int, tuple[str, int, str | None]]    # id -> host, port, rack: the unfenced brokers
    cluster_id: str | None
    topics: tuple[TopicMetadata, ...]


def metadata_request() -> bytes:
    """Every topic (a null topic list), no auto-creation, no authorized operations."""
    return Writer().uvarint(0).int8(0).int8(0).no_tags().bytes()


def parse_metadata(r: Reader) -> ClusterMetadata:
    r.int32()

    def broker(x: Reader) -> tuple[int, tuple[str, int, str | None]]:
        node, host, port, rack = x.int32(), x.compact_string(), x.int32(), x.compact_nullable_string()
        x.tagged()
        return node, (host, port, rack)

    def partition(x: Reader) -> PartitionMetadata:
        p = PartitionMetadata(x.int16(), x.int32(), x.int32(), x.int32(), tuple(x.int32_array()),
                              tuple(x.int32_array()))
        x.int32_array()    # offline replicas
        x.tagged()
        return p

    def topic(x: Reader) -> TopicMetadata:
        error, name, topic_id, internal = x.int16(), x.compact_nullable_string(), x.uuid(), x.boolean()
        partitions = tuple(x.compact_array(partition) or ())
        x.int32()          # authorized operations
        x.tagged()
        return TopicMetadata(error, name, topic_id, internal, partitions)

    brokers = dict(r.compact_array(broker) or [])
    cluster_id = r.compact_nullable_string()
    r.int32()              # controller id: under KRaft a random broker, never the active controller
    topics = tuple(r.compact_array(topic) or ())
    r.tagged()
    return ClusterMetadata(brokers, cluster_id, topics)


# ---------------------------------------------------------------- SASL

def sasl_handshake_request(mechanism: str) -> bytes:          # v1, not flexible
    return Writer().string(mechanism).bytes()


def parse_sasl_handshake(r: Reader) -> tuple[int, list[str]]:
    return r.int16(), r.array(Reader.string)


def sasl_authenticate_request(auth: bytes) -> bytes:          # v2, flexible
    return Writer().compact_bytes(auth).no_tags().bytes()


def parse_sasl_authenticate(r: Reader) -> tuple[int, str | None, bytes]:
    error, message = r.int16(), r.compact_nullable_string()
    return error, message, r.compact_bytes() or b""
