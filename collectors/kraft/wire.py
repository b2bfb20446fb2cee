"""The few requests an observer of the metadata quorum sends, and the answers it reads: pure.

Written from Kafka's message schemas (clients/src/main/resources/common/message/*.json): Fetch v17,
FetchSnapshot v1 and DescribeQuorum v2 to the controller listener, Metadata v12 to a broker, ApiVersions,
and SaslHandshake /SaslAuthenticate for secured listeners. The requests are written with
:class:`collectors.kafka_encoding.Writer` and the responses read with its Reader, flexible but for SaslHandshake v1,
which skips the tagged fields it is not asked for, so a newer Kafka's additions are ignored, not misread.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from collectors.kafka_encoding import Reader, Writer, tagged

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-000000000001").bytes   # fixed by KRaft

API_FETCH, API_METADATA, API_SASL_HANDSHAKE, API_API_VERSIONS = 1, 3, 17, 18
API_SASL_AUTHENTICATE, API_DESCRIBE_QUORUM, API_FETCH_SNAPSHOT = 36, 55, 59
API_NAMES = {API_FETCH: "Fetch", API_METADATA: "Metadata", API_SASL_HANDSHAKE: "SaslHandshake",
             API_API_VERSIONS: "ApiVersions", API_SASL_AUTHENTICATE: "SaslAuthenticate",
             API_DESCRIBE_QUORUM: "DescribeQuorum", API_FETCH_SNAPSHOT: "FetchSnapshot"}
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


# ---------------------------------------------------------------- framing

def request(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes,
            flexible: bool) -> bytes:
    """A size-prefixed request: header v2 (flexible) or v1, then the body."""
    header = Writer().int16(api_key).int16(version).int32(correlation_id).string(client_id)
    if flexible:
        header.no_tags()
    payload = header.bytes() + body
    return Writer().int32(len(payload)).bytes() + payload


def response_body(payload: bytes, correlation_id: int, flexible_header: bool, flexible: bool = True,
                  what: str = "response") -> Reader:
    """The body of one response (the bytes after its size), to read as ``flexible`` or not, and named
    ``what`` in errors; checks the correlation id."""
    header = Reader(payload, what, flexible_header)
    got = header.int32("correlation_id")
    if got != correlation_id:
        raise header.fail(f"correlation id {got}, expected {correlation_id}")
    header.skip_tagged_fields("header")   # header v0 (not flexible) has none
    return Reader(payload, what, flexible, header.pos)


# ---------------------------------------------------------------- ApiVersions (v3)

API_VERSIONS_VERSION = 3


def api_versions_request(client_version: str) -> bytes:
    return Writer().compact_string("kmon").compact_string(client_version).no_tags().bytes()


def parse_api_versions(r: Reader) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error code, api key -> (min, max) version)."""
    error = r.int16("error_code")
    keys = r.nullable_array("api_keys", lambda x: (x.int16("api_key"), x.int16("min_version"), x.int16("max_version"),
                                                   x.skip_tagged_fields("api key"))) or ()
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
    epoch, end = r.int32("diverging epoch"), r.int64("diverging end_offset")
    r.skip_tagged_fields("diverging epoch")
    return SnapshotId(end, epoch)


def _snapshot_id(r: Reader) -> SnapshotId:
    end, epoch = r.int64("snapshot end_offset"), r.int32("snapshot epoch")
    r.skip_tagged_fields("snapshot id")
    return SnapshotId(end, epoch)


def _leader(r: Reader) -> LeaderAndEpoch:
    leader, epoch = r.int32("leader_id"), r.int32("leader_epoch")
    r.skip_tagged_fields("current leader")
    return LeaderAndEpoch(leader, epoch)


# Null arrays (which Kafka never sends) read as empty below, and a tagged field's bytes past what is
# read of it are ignored, as Kafka's own generated readers ignore them.

def parse_fetch(r: Reader) -> FetchResult:
    r.int32("throttle_time_ms")
    top_error = r.int16("error_code")
    r.int32("session_id")
    partitions: list[FetchResult] = []

    def partition(x: Reader) -> None:
        x.int32("partition_index")
        error, hw = x.int16("error_code"), x.int64("high_watermark")
        x.int64("last_stable_offset")
        log_start = x.int64("log_start_offset")
        x.nullable_array("aborted_transactions", lambda a: (a.int64("producer_id"), a.int64("first_offset"),
                                                           a.skip_tagged_fields("aborted transaction")))
        x.int32("preferred_read_replica")
        records = x.nullable_blob("records") or b""
        tags = x.tagged_fields("partition")
        diverging = tagged(tags, 0, _epoch_end, None, whole=False)
        snapshot = tagged(tags, 2, _snapshot_id, None, whole=False)
        partitions.append(FetchResult(error, hw, log_start, records, tagged(tags, 1, _leader, None, whole=False),
                                      diverging if diverging and diverging.epoch >= 0 else None,
                                      snapshot if snapshot and snapshot.end_offset >= 0 else None))

    def topic(x: Reader) -> None:
        x.raw(16, "topic_id")
        x.nullable_array("partitions", partition)
        x.skip_tagged_fields("topic")

    r.nullable_array("responses", topic)
    endpoints = tagged(r.tagged_fields("response"), 0,
                       lambda x: dict(x.nullable_array("node_endpoints", _endpoint_with_rack) or ()), {}, whole=False)
    if not partitions:
        return FetchResult(top_error or -1, -1, -1, b"", None, None, None, endpoints)
    p = partitions[0]
    return FetchResult(p.error or top_error, p.high_watermark, p.log_start_offset, p.records, p.leader,
                       p.diverging, p.snapshot, endpoints)


def _endpoint_with_rack(r: Reader) -> tuple[int, tuple[str, int]]:
    node, host, port = r.int32("node_id"), r.string("host"), r.int32("port")
    r.nullable_string("rack")
    r.skip_tagged_fields("node endpoint")
    return node, (host, port)


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
    r.int32("throttle_time_ms")
    top_error = r.int16("error_code")
    chunks: list[SnapshotChunk] = []

    def partition(x: Reader) -> None:
        x.int32("index")
        error = x.int16("error_code")
        snap = _snapshot_id(x)
        size, position = x.int64("size"), x.int64("position")
        data = x.nullable_blob("unaligned_records") or b""
        leader = tagged(x.tagged_fields("partition"), 0, _leader, None, whole=False)
        chunks.append(SnapshotChunk(error, snap, leader, size, position, data))

    def topic(x: Reader) -> None:
        x.string("name")
        x.nullable_array("partitions", partition)
        x.skip_tagged_fields("topic")

    r.nullable_array("topics", topic)
    r.skip_tagged_fields("response")
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
    rid = r.int32("replica_id")
    r.raw(16, "replica_directory_id")
    info = ReplicaInfo(rid, r.int64("log_end_offset"), r.int64("last_fetch_timestamp"),
                       r.int64("last_caught_up_timestamp"))
    r.skip_tagged_fields("replica")
    return info


def parse_describe_quorum(r: Reader) -> QuorumInfo:
    error, message = r.int16("error_code"), r.nullable_string("error_message")
    parts: list[QuorumInfo] = []

    def partition(x: Reader) -> None:
        x.int32("partition_index")
        perr, pmsg = x.int16("error_code"), x.nullable_string("error_message")
        leader, epoch, hw = x.int32("leader_id"), x.int32("leader_epoch"), x.int64("high_watermark")
        voters = x.nullable_array("current_voters", _replica) or ()
        observers = x.nullable_array("observers", _replica) or ()
        x.skip_tagged_fields("partition")
        parts.append(QuorumInfo(perr, pmsg, leader, epoch, hw, voters, observers, {}))

    def topic(x: Reader) -> None:
        x.string("topic_name")
        x.nullable_array("partitions", partition)
        x.skip_tagged_fields("topic")

    def listener(x: Reader) -> tuple[str, tuple[str, int]]:
        name, host, port = x.string("listener name"), x.string("listener host"), x.uint16("listener port")
        x.skip_tagged_fields("listener")
        return name, (host, port)

    def node(x: Reader) -> tuple[int, dict[str, tuple[str, int]]]:
        nid = x.int32("node_id")
        listeners = dict(x.nullable_array("listeners", listener) or ())
        x.skip_tagged_fields("node")
        return nid, listeners

    r.nullable_array("topics", topic)
    nodes = dict(r.nullable_array("nodes", node) or ())
    r.skip_tagged_fields("response")
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
    r.int32("throttle_time_ms")

    def broker(x: Reader) -> tuple[int, tuple[str, int, str | None]]:
        node, host, port = x.int32("node_id"), x.string("host"), x.int32("port")
        rack = x.nullable_string("rack")
        x.skip_tagged_fields("broker")
        return node, (host, port, rack)

    def partition(x: Reader) -> PartitionMetadata:
        p = PartitionMetadata(x.int16("error_code"), x.int32("partition_index"), x.int32("leader_id"),
                              x.int32("leader_epoch"), x.nullable_int32s("replica_nodes") or (),
                              x.nullable_int32s("isr_nodes") or ())
        x.nullable_int32s("offline_replicas")
        x.skip_tagged_fields("partition")
        return p

    def topic(x: Reader) -> TopicMetadata:
        error, name = x.int16("error_code"), x.nullable_string("name")
        topic_id, internal = x.uuid("topic_id"), x.boolean("is_internal")
        partitions = x.nullable_array("partitions", partition) or ()
        x.int32("topic_authorized_operations")
        x.skip_tagged_fields("topic")
        return TopicMetadata(error, name, topic_id, internal, partitions)

    brokers = dict(r.nullable_array("brokers", broker) or ())
    cluster_id = r.nullable_string("cluster_id")
    r.int32("controller_id")   # under KRaft a random broker, never the active controller
    topics = r.nullable_array("topics", topic) or ()
    r.skip_tagged_fields("response")
    return ClusterMetadata(brokers, cluster_id, topics)


# ---------------------------------------------------------------- SASL

def sasl_handshake_request(mechanism: str) -> bytes:          # v1, not flexible
    return Writer().string(mechanism).bytes()


def parse_sasl_handshake(r: Reader) -> tuple[int, tuple[str, ...]]:
    return r.int16("error_code"), r.strings("mechanisms")


def sasl_authenticate_request(auth: bytes) -> bytes:          # v2, flexible
    return Writer().compact_bytes(auth).no_tags().bytes()


def parse_sasl_authenticate(r: Reader) -> tuple[int, str | None, bytes]:
    error, message = r.int16("error_code"), r.nullable_string("error_message")
    return error, message, r.nullable_blob("auth_bytes") or b""
