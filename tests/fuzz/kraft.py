"""KRaft metadata records, record batches, the image they are replayed into, and the controller's responses.

* ``record``: records.decode_metadata_record on one metadata record of every type and version: a record, None
  (skipped), Unknown, or MalformedRecord, nothing else.
* ``log``: a fetch's record batches (control batches with LeaderChange, gzip, transactions among
  them) handed to the KRaft collector's loader (``MetadataLoader.load``): it never raises, and
  every event it gives survives the events topic's codec.
* ``wire``: each wire.parse_* on a response body: a result or MalformedRecord, nothing else.
"""
from __future__ import annotations

from collectors.kafka_encoding import MalformedRecord, Reader
from collectors.kraft import wire
from collectors.kraft.loader import MetadataLoader
from collectors.kraft.records import decode_metadata_record
from kmon.codec import decode as decode_event
from kmon.codec import encode
from tests.fuzz.cases import Case
from tests.fuzz.engine import Target
from tests.unit import kraft_builders as b

INC = "11111111-0000-4000-8000-000000000001"
T1, T2 = "a0000000-0000-4000-8000-00000000000a", "b0000000-0000-4000-8000-00000000000b"
ENDPOINTS = (("PLAINTEXT", "b1.example", 9092, 0), ("SSL", "b1.example", 9093, 1))


def _records() -> list[bytes]:
    """One of every record the decoder reads, in every version, and some it skips."""
    return [
        *(b.register_broker(v, 1, INC, 10, ENDPOINTS, {"metadata.version": (1, 27)}, rack="r1", fenced=v % 2 == 0,
                            log_dirs=[INC]) for v in range(5)),
        b.unregister_broker(2, 11), b.fence_broker(1, 10), b.unfence_broker(1, 10),
        *(b.broker_change(1, 10, fenced=f, shutdown=s, version=v) for f, s, v in ((1, None, 0), (-1, 1, 3))),
        b.topic("orders", T1), b.topic("payments", T2), b.remove_topic(T2),
        *(b.partition(T1, p, [1, 2, 3], [1, 2], leader=1, leader_epoch=p, version=v, recovery=0,
                      **({"elr": [3], "last_known_elr": [2]} if v >= 2 else {})) for v in range(3) for p in (0, 1)),
        b.partition_change(T1, 0, isr=[1], leader=2, replicas=[1, 2, 4], adding=[4], removing=[3], recovery=1,
                           elr=[2], last_known_elr=[3], directories=[INC], version=2),
        b.partition_change(T1, 1, leader=-1), b.config(2, "orders", "min.insync.replicas", "2"),
        b.config(2, "orders", "retention.ms", None), b.config(4, "1", "x", "y"), b.feature_level("metadata.version", 27),
        b.clear_elr("orders"), b.clear_elr(""), b.begin_transaction("t"), b.end_transaction(),
        b.abort_transaction("r"), b.no_op(),
    ]


def check_record(case: Case) -> None:
    for (value,) in case:
        try:
            decode_metadata_record(value or b"")
        except MalformedRecord:
            pass


# ------------------------------------------------------------------ a fetch's batches, replayed

def _log_seeds() -> list[Case]:
    records = _records()
    leader = b.batch(0, [(b.control_key(2), b.leader_change_value(1, [1, 2, 3], [1, 2]))], epoch=3, control=True)
    plain = b.batch(1, records[:12], epoch=3)
    gzipped = b.batch(13, records[12:24], epoch=3, compression=1)
    tx = b.batch(25, [b.begin_transaction("t"), *records[9:14], b.end_transaction()], epoch=4)
    aborted = b.batch(32, [b.begin_transaction(), records[5], b.abort_transaction("r")], epoch=4)
    return [((leader,), (plain,), (gzipped,), (tx,), (aborted,)), ((plain,), (leader,)), ((tx,),)]


def check_log(case: Case) -> None:
    fetched = b"".join(data or b"" for (data,) in case)
    loaded = MetadataLoader("c1").load(fetched, 2**62, 0, None)
    for event in loaded.events:
        assert decode_event(encode(event)) == event, event


# ------------------------------------------------------------------ responses

_PARSERS = (wire.parse_fetch, wire.parse_fetch_snapshot, wire.parse_describe_quorum, wire.parse_metadata,
            wire.parse_api_versions, wire.parse_sasl_handshake, wire.parse_sasl_authenticate)


def _metadata_response() -> bytes:
    broker = b.i32(1) + b.compact_string("b1") + b.i32(9092) + b.compact_string("r1") + b.tags()
    partition = (b.i16(0) + b.i32(0) + b.i32(1) + b.i32(5) + b.compact_int32s([1, 2]) + b.compact_int32s([1])
                 + b.compact_int32s([]) + b.tags())
    topic = (b.i16(0) + b.compact_string("orders") + b.uuid_bytes(T1) + b.boolean(False) + b.uvarint(2) + partition
             + b.i32(0) + b.tags())
    return b.i32(0) + b.uvarint(2) + broker + b.compact_string("cluster") + b.i32(1) + b.uvarint(2) + topic + b.tags()


def _wire_seeds() -> list[Case]:
    fetch = b.fetch_response([b.fetch_partition(records=_log_seeds()[0][1][0],
                                                partition_tags={1: b.leader_and_epoch(1, 3)})],
                             top_tags={0: b.endpoints((1, "c1", 9093, None))})
    quorum = b.describe_quorum_response(voters=[b.replica(1, INC, 300, 1_000, 900)],
                                        observers=[b.replica(-1, INC, 1, 2, 3)],
                                        nodes=[(1, [("CONTROLLER", "c1", 9093)])])
    bodies = [fetch, b.fetch_snapshot_response(data=b"chunk", leader=(1, 6)), quorum, _metadata_response(),
              b.i16(0) + b.uvarint(2) + b.i16(1) + b.i16(4) + b.i16(17) + b.tags() + b.i32(0) + b.tags(),
              b.i16(0) + b.i32(1) + b.i16(5) + b"PLAIN",
              b.i16(58) + b.compact_string("bad password") + b.uvarint(1) + b.i64(0) + b.tags()]
    return [((bytes([i]), body),) for i, body in enumerate(bodies)]


def check_wire(case: Case) -> None:
    for selector, body in case:
        parse = _PARSERS[sum(selector or b"") % len(_PARSERS)]
        try:   # SaslHandshake v1 alone is not flexible
            parse(Reader(body or b"", "response", flexible=parse is not wire.parse_sasl_handshake))
        except MalformedRecord:
            pass


TARGETS = (
    Target("record", 1, lambda: [((value,),) for value in _records()], check_record),
    Target("log", 1, _log_seeds, check_log, max_messages=12),
    Target("wire", 2, _wire_seeds, check_wire),
)
