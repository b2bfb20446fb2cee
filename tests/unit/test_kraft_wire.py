"""collectors.kraft.wire: the requests and responses the KRaft collector exchanges with a controller
listener, checked against bytes built here from the schemas (the reader itself: test_kafka_encoding.py)."""
from typing import Callable

import pytest

from collectors.kafka_encoding import MalformedRecord, Reader, tagged
from collectors.kraft import wire
from collectors.kraft.wire import LeaderAndEpoch, SnapshotId, Writer
from tests.unit.kraft_builders import (META_ID, compact_string, describe_quorum_response, endpoints, fetch_partition,
                                      fetch_response, fetch_snapshot_response, i16, i32, i64, leader_and_epoch, replica,
                                      snapshot, tags, uvarint)

DIR_A = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
DIR_B = "11111111-2222-3333-4444-555555555555"


def flexible(data: bytes) -> Reader:
    """A flexible response body, as the connection hands it to the parsers."""
    return Reader(data, flexible=True)


def read_tags(r: Reader, wanted: dict[int, Callable[[Reader], object]] | None = None) -> dict[int, object]:
    """The tagged fields that end a flexible struct: the ``wanted`` ones read, others skipped."""
    found = r.tagged_fields("tags")
    return {t: tagged(found, t, wanted[t], None) for t in found if wanted and t in wanted}


# ---------------------------------------------------------------- Writer

def test_writer_round_trips_through_reader():
    data = (Writer().int8(-3).int16(-300).int32(70000).int64(-(2**40)).uvarint(2**35 - 1).string("ab").string(None)
            .compact_string("zk").compact_string(None).compact_bytes(b"\x00\x01").count(2).no_tags().bytes())
    r = Reader(data)
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uvarint()) == (-3, -300, 70000, -(2**40), 2**35 - 1)
    assert (r.nullable_string(), r.nullable_string()) == ("ab", None)
    r = Reader(data, flexible=True, pos=r.pos)      # the rest is written compact
    assert (r.string(), r.nullable_string()) == ("zk", None)
    assert r.blob() == b"\x00\x01"
    assert r.uvarint() == 3 and read_tags(r) == {}
    r.end()


# ---------------------------------------------------------------- framing

def test_request_framing_flexible_and_not():
    flex = wire.request(1, 17, 9, "kmon-kraft", b"BODY", flexible=True)
    r = Reader(flex)
    assert r.int32() == len(flex) - 4
    assert (r.int16(), r.int16(), r.int32(), r.string()) == (1, 17, 9, "kmon-kraft")   # the client id: int16 length
    assert r.uvarint() == 0                                                          # no tags
    assert r.raw(4) == b"BODY"
    r.end()

    plain = wire.request(17, 1, 2, "c", b"B", flexible=False)
    r = Reader(plain)
    assert r.int32() == len(plain) - 4
    assert (r.int16(), r.int16(), r.int32(), r.string()) == (17, 1, 2, "c")
    assert r.raw(1) == b"B"
    r.end()


def test_response_body_checks_the_correlation_id_and_skips_the_header_tags():
    r = wire.response_body(i32(5) + tags({0: b"zz"}) + b"\x07", 5, flexible_header=True)
    assert r.int8() == 7 and r.flexible
    r = wire.response_body(i32(5) + b"\x07", 5, flexible_header=False)
    assert r.int8() == 7
    r = wire.response_body(i32(5) + i16(1) + b"a", 5, flexible_header=False, flexible=False)   # SaslHandshake v1's
    assert r.string() == "a"
    with pytest.raises(MalformedRecord, match="^Fetch v17 response: correlation id 5, expected 6$"):
        wire.response_body(i32(5) + b"\x00", 6, flexible_header=True, what="Fetch v17 response")


# ---------------------------------------------------------------- Fetch v17

def _read_fetch_request(data: bytes) -> dict:
    """Fetch v17's request fields, in the schema's order; the tagged fields come last."""
    r = Reader(data, flexible=True)
    out = dict(max_wait=r.int32(), min_bytes=r.int32(), max_bytes=r.int32(), isolation=r.int8(),
               session_id=r.int32(), session_epoch=r.int32())
    topics = []

    def partition(x: Reader) -> dict:
        p = dict(partition=x.int32(), current_leader_epoch=x.int32(), fetch_offset=x.int64(),
                 last_fetched_epoch=x.int32(), log_start_offset=x.int64(), partition_max_bytes=x.int32())
        p["tags"] = read_tags(x, {0: lambda y: y.raw(16)})
        return p

    def topic(x: Reader) -> None:
        topics.append((x.uuid(), x.array("partitions", partition)))
        x.skip_tagged_fields()

    r.array("topics", topic)
    out["topics"] = topics
    out["forgotten"] = r.array("forgotten", lambda x: x)
    out["rack"] = r.string()
    tag_start = r.pos
    out["tags"] = read_tags(r, {0: Reader.nullable_string, 1: lambda y: (y.int32(), y.int64())})
    out["tag_bytes"] = data[tag_start:]
    out["rest"] = data[r.pos:]
    return out


def test_fetch_request_fields_and_no_tags_without_a_cluster_id():
    req = _read_fetch_request(wire.fetch_request(offset=1234, last_fetched_epoch=7, leader_epoch=9, max_wait_ms=500,
                                                 max_bytes=1 << 20))
    assert req["max_wait"] == 500
    assert req["max_bytes"] == 1 << 20
    assert req["isolation"] == 0
    assert req["session_id"] == 0 and req["session_epoch"] == -1      # no fetch session
    assert len(req["topics"]) == 1
    topic_id, partitions = req["topics"][0]
    assert topic_id == META_ID
    assert partitions == (dict(partition=0, current_leader_epoch=9, fetch_offset=1234, last_fetched_epoch=7,
                               log_start_offset=-1, partition_max_bytes=1 << 20, tags={}),)
    assert req["forgotten"] == ()
    assert req["rack"] == ""
    assert req["tags"] == {}                    # no ReplicaState: replica -1, an observer
    assert req["tag_bytes"] == b"\x00"
    assert req["rest"] == b""


def test_fetch_request_puts_the_cluster_id_in_the_trailing_tag_section():
    req = _read_fetch_request(wire.fetch_request(5, 1, 1, 100, 4096, cluster_id="MkU3OEVBNTcwNTJENDM2Qg"))
    assert req["tags"] == {0: "MkU3OEVBNTcwNTJENDM2Qg"}
    assert 1 not in req["tags"]
    assert req["tag_bytes"] == tags({0: compact_string("MkU3OEVBNTcwNTJENDM2Qg")})
    assert req["rest"] == b""
    assert req["topics"][0][1][0]["fetch_offset"] == 5     # the tag is not in the middle of the body


def _diverging(epoch: int, end: int) -> bytes:
    return i32(epoch) + i64(end) + tags()


def test_parse_fetch_with_records_and_every_tag():
    records = b"\x01\x02\x03 batches"
    data = fetch_response(
        [fetch_partition(error=0, hw=120, lso=118, log_start=40, records=records, aborted=[(5, 6)],
                         partition_tags={0: _diverging(3, 99), 1: leader_and_epoch(2, 8), 2: snapshot(100, 4),
                                         9: b"future"})],
        top_tags={0: endpoints((1, "c1.example", 9093, None), (2, "c2.example", 19093, "r2")), 5: b"?"})
    result = wire.parse_fetch(flexible(data))
    assert result.error == 0
    assert result.high_watermark == 120
    assert result.log_start_offset == 40
    assert result.records == records
    assert result.leader == LeaderAndEpoch(2, 8)
    assert result.diverging == SnapshotId(end_offset=99, epoch=3)
    assert result.snapshot == SnapshotId(end_offset=100, epoch=4)
    assert result.endpoints == {1: ("c1.example", 9093), 2: ("c2.example", 19093)}


def test_parse_fetch_without_tags_and_null_records():
    data = fetch_response([fetch_partition(hw=7, log_start=0, records=None)])    # null records
    result = wire.parse_fetch(flexible(data))
    assert (result.error, result.high_watermark, result.records) == (0, 7, b"")
    assert result.leader is None and result.diverging is None and result.snapshot is None
    assert result.endpoints == {}


def test_parse_fetch_drops_default_diverging_epoch_and_snapshot_id():
    data = fetch_response([fetch_partition(partition_tags={0: _diverging(-1, -1), 2: snapshot(-1, -1)})])
    result = wire.parse_fetch(flexible(data))
    assert result.diverging is None and result.snapshot is None


def test_parse_fetch_partition_error_with_leader_hint():
    data = fetch_response([fetch_partition(error=wire.NOT_LEADER_OR_FOLLOWER, hw=-1, log_start=-1,
                                           partition_tags={1: leader_and_epoch(3, 12)})],
                          top_tags={0: endpoints((3, "c3", 9093, None))})
    result = wire.parse_fetch(flexible(data))
    assert result.error == wire.NOT_LEADER_OR_FOLLOWER
    assert result.leader == LeaderAndEpoch(3, 12)
    assert result.endpoints == {3: ("c3", 9093)}


def test_parse_fetch_top_level_error_without_partitions():
    result = wire.parse_fetch(flexible(fetch_response([], top_error=wire.CLUSTER_AUTHORIZATION_FAILED)))
    assert result.error == wire.CLUSTER_AUTHORIZATION_FAILED
    assert result.records == b"" and result.high_watermark == -1
    assert wire.parse_fetch(flexible(fetch_response([]))).error == -1


def test_a_truncated_fetch_response_is_malformed_naming_the_field_and_byte():
    data = fetch_response([fetch_partition(records=b"abcdef", partition_tags={1: leader_and_epoch(1, 1)})])
    for cut, field in ((3, "byte 0 reading throttle_time_ms"), (20, "byte 11 reading topic_id"),
                       (len(data) - 12, "byte 72 reading partition tag 1 size"),
                       (len(data) - 1, "byte 83 reading response tag count")):
        with pytest.raises(MalformedRecord, match=f"^Fetch v17 response: truncated at {field}$"):
            wire.parse_fetch(Reader(data[:cut], "Fetch v17 response", flexible=True))


def test_kafkas_leniencies_are_kept_null_arrays_read_as_empty_and_a_tags_extra_bytes_ignored():
    """Kafka sends neither; its own readers accept both, and so did this collector before it had one reader."""
    data = fetch_response([fetch_partition(partition_tags={1: leader_and_epoch(3, 12) + b"later"})])
    assert wire.parse_fetch(flexible(data)).leader == LeaderAndEpoch(3, 12)
    null_voters = (i16(0) + compact_string(None) + uvarint(2) + compact_string("__cluster_metadata") + uvarint(2)
                   + i32(0) + i16(0) + compact_string(None) + i32(1) + i32(5) + i64(9) + uvarint(0) + uvarint(0)
                   + tags() + tags() + uvarint(0) + tags())
    q = wire.parse_describe_quorum(flexible(null_voters))
    assert (q.leader_id, q.voters, q.observers, q.endpoints) == (1, (), (), {})


# ---------------------------------------------------------------- FetchSnapshot v1

def test_parse_fetch_snapshot():
    chunk = wire.parse_fetch_snapshot(flexible(fetch_snapshot_response(size=2048, position=1024, data=b"chunk",
                                                                      leader=(1, 6))))
    assert chunk.error == 0
    assert chunk.snapshot == SnapshotId(500, 6)
    assert chunk.leader == LeaderAndEpoch(1, 6)
    assert (chunk.size, chunk.position, chunk.data) == (2048, 1024, b"chunk")


def test_parse_fetch_snapshot_errors():
    chunk = wire.parse_fetch_snapshot(flexible(fetch_snapshot_response(error=wire.SNAPSHOT_NOT_FOUND)))
    assert chunk.error == wire.SNAPSHOT_NOT_FOUND and chunk.leader is None
    chunk = wire.parse_fetch_snapshot(flexible(fetch_snapshot_response(empty=True, top_error=wire.UNKNOWN_LEADER_EPOCH)))
    assert chunk.error == wire.UNKNOWN_LEADER_EPOCH and chunk.snapshot is None and chunk.data == b""


def test_fetch_snapshot_request_fields():
    data = wire.fetch_snapshot_request(SnapshotId(500, 6), position=1024, leader_epoch=7, max_bytes=4096)
    r = Reader(data, flexible=True)
    assert (r.int32(), r.int32()) == (-1, 4096)               # replica id, max bytes
    assert r.uvarint() == 2 and r.string() == "__cluster_metadata"
    assert r.uvarint() == 2
    assert (r.int32(), r.int32()) == (0, 7)                   # partition, current leader epoch
    assert (r.int64(), r.int32()) == (500, 6) and read_tags(r) == {}    # snapshot id
    assert r.int64() == 1024
    assert read_tags(r) == {} and read_tags(r) == {}          # partition, topic
    assert read_tags(r) == {}
    r.end()
    with_cluster = wire.fetch_snapshot_request(SnapshotId(1, 1), 0, 1, 1, cluster_id="abc")
    assert with_cluster.endswith(tags({0: compact_string("abc")}))


# ---------------------------------------------------------------- DescribeQuorum v2

def test_parse_describe_quorum():
    data = describe_quorum_response(
        voters=[replica(1, DIR_A, 300, 1_000, 900), replica(2, DIR_B, 250, -1, -1)],
        observers=[replica(-1, DIR_A, -1, 5, 6)],
        nodes=[(1, [("CONTROLLER", "c1", 9093), ("SSL", "c1", 9094)]), (2, [("CONTROLLER", "c2", 65535)])])
    q = wire.parse_describe_quorum(flexible(data))
    assert q.error == 0 and q.message is None
    assert (q.leader_id, q.epoch, q.high_watermark) == (2, 11, 300)
    assert q.voters == (wire.ReplicaInfo(1, 300, 1_000, 900), wire.ReplicaInfo(2, 250, -1, -1))
    assert q.observers == (wire.ReplicaInfo(-1, -1, 5, 6),)
    assert q.endpoints == {1: {"CONTROLLER": ("c1", 9093), "SSL": ("c1", 9094)}, 2: {"CONTROLLER": ("c2", 65535)}}


def test_parse_describe_quorum_errors():
    q = wire.parse_describe_quorum(flexible(describe_quorum_response(error=wire.NOT_LEADER_OR_FOLLOWER,
                                                                   message="not the leader", topics=False)))
    assert (q.error, q.message, q.leader_id, q.voters) == (wire.NOT_LEADER_OR_FOLLOWER, "not the leader", -1, ())
    q = wire.parse_describe_quorum(flexible(describe_quorum_response(partition_error=wire.NOT_LEADER_OR_FOLLOWER)))
    assert q.error == wire.NOT_LEADER_OR_FOLLOWER
    # a top-level error wins over the partition it still lists
    q = wire.parse_describe_quorum(flexible(describe_quorum_response(error=wire.CLUSTER_AUTHORIZATION_FAILED,
                                                                   voters=[replica(1, DIR_A, 1, 1, 1)])))
    assert (q.error, q.leader_id, q.voters) == (wire.CLUSTER_AUTHORIZATION_FAILED, -1, ())


def test_describe_quorum_request():
    r = Reader(wire.describe_quorum_request(), flexible=True)
    assert r.uvarint() == 2 and r.string() == "__cluster_metadata"
    assert r.array("partitions", lambda x: (x.int32(), read_tags(x))) == ((0, {}),)
    assert read_tags(r) == {} and read_tags(r) == {}
    r.end()


# ---------------------------------------------------------------- ApiVersions and SASL

def test_api_versions():
    r = Reader(wire.api_versions_request("1.2.3"), flexible=True)
    assert (r.string(), r.string(), read_tags(r)) == ("kmon", "1.2.3", {})
    response = (i16(0) + uvarint(3) + i16(1) + i16(4) + i16(17) + tags() + i16(59) + i16(0) + i16(1) + tags()
                + i32(0) + tags())
    error, versions = wire.parse_api_versions(flexible(response))
    assert error == 0 and versions == {1: (4, 17), 59: (0, 1)}


def test_sasl_messages():
    assert wire.sasl_handshake_request("PLAIN") == i16(5) + b"PLAIN"
    error, mechanisms = wire.parse_sasl_handshake(Reader(i16(0) + i32(2) + i16(5) + b"PLAIN" + i16(13)
                                                         + b"SCRAM-SHA-512"))
    assert (error, mechanisms) == (0, ("PLAIN", "SCRAM-SHA-512"))
    r = Reader(wire.sasl_authenticate_request(b"\0u\0p"), flexible=True)
    assert r.blob() == b"\0u\0p" and read_tags(r) == {}
    answer = i16(58) + compact_string("bad password") + uvarint(1) + i64(0) + tags()
    assert wire.parse_sasl_authenticate(flexible(answer)) == (58, "bad password", b"")


def test_error_names():
    assert wire.error_name(wire.FENCED_LEADER_EPOCH) == "FENCED_LEADER_EPOCH"
    assert wire.error_name(12345) == "error 12345"
