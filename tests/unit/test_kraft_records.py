"""collectors.kraft.records: metadata records and record batches, decoded from bytes built here
from Kafka's schemas (tests/unit/kraft_builders.py)."""
import pytest

from collectors.kafka_encoding import MalformedRecord
from collectors.kraft import records as rec
from collectors.kraft.records import (NO_LEADER_CHANGE, AbortTransactionRecord, BeginTransactionRecord,
                                      BrokerEndpoint, BrokerRegistrationChangeRecord, ClearElrRecord, ConfigRecord,
                                      EndTransactionRecord, FeatureLevelRecord, PartitionChangeRecord, PartitionRecord,
                                      RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, Unknown,
                                      UnregisterBrokerRecord, batches, decode_metadata_record, leader_change)
from tests.unit import kraft_builders as b

INC = "6f1e0a3c-5b7d-4e2f-9a8b-0c1d2e3f4a5b"
TID = "7a3c2f10-1d4e-4b5a-8c6d-9e0f1a2b3c4d"
DIR1 = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
DIR2 = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"
ENDPOINTS = [("PLAINTEXT", "b1.example", 9092, 0), ("SASL_SSL", "b1.example", 9094, 3)]
FEATURES = {"metadata.version": (7, 27), "kraft.version": (0, 1)}


# ---------------------------------------------------------------- RegisterBroker (0), v0..v4

@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_register_broker_every_version(version):
    value = b.register_broker(version, 3, INC, 77, ENDPOINTS, FEATURES, rack="rack-a", fenced=True,
                              in_controlled_shutdown=True, migrating=True, log_dirs=[DIR1, DIR2],
                              extra_tags={1: b.compact_uuids([DIR2])} if version >= 4 else None)
    r = decode_metadata_record(value)
    assert r == RegisterBrokerRecord(
        broker_id=3, incarnation_id=INC, broker_epoch=77,
        endpoints=(BrokerEndpoint("PLAINTEXT", "b1.example", 9092, 0),
                   BrokerEndpoint("SASL_SSL", "b1.example", 9094, 3)),
        features={"metadata.version": (7, 27), "kraft.version": (0, 1)}, rack="rack-a", fenced=True,
        # v0 has no InControlledShutdown: it reads as False there
        in_controlled_shutdown=version >= 1)


def test_register_broker_v2_migrating_flag_does_not_shift_the_fields():
    # IsMigratingZkBroker sits between BrokerId and IncarnationId from v2 on
    r = decode_metadata_record(b.register_broker(2, 9, INC, 1234, [("CONTROLLER", "h", 1, 0)], {}, rack=None,
                                                 fenced=False, migrating=False))
    assert (r.broker_id, r.incarnation_id, r.broker_epoch, r.rack, r.fenced) == (9, INC, 1234, None, False)
    assert r.endpoints == (BrokerEndpoint("CONTROLLER", "h", 1, 0),)
    assert r.features == {}


def test_register_broker_ports_are_unsigned():
    r = decode_metadata_record(b.register_broker(0, 1, INC, 5, [("EXTERNAL", "h", 50000, 2)]))
    assert r.endpoints == (BrokerEndpoint("EXTERNAL", "h", 50000, 2),)


def test_register_broker_v1_unfenced_not_in_shutdown():
    r = decode_metadata_record(b.register_broker(1, 1, INC, 5, [], {}, fenced=False, in_controlled_shutdown=False))
    assert (r.fenced, r.in_controlled_shutdown, r.endpoints) == (False, False, ())


def test_register_broker_too_new_version_is_unknown():
    assert decode_metadata_record(b.register_broker(4, 1, INC, 5)[:2] + b.uvarint(5) + b"whatever") == Unknown(0, 5)


def test_unregister_broker():
    assert decode_metadata_record(b.unregister_broker(4, 99)) == UnregisterBrokerRecord(4, 99)


# ---------------------------------------------------------------- BrokerRegistrationChange (17), Fence, Unfence

@pytest.mark.parametrize("fenced,expected", [(1, True), (-1, False), (0, None), (None, None)])
def test_broker_registration_change_fenced(fenced, expected):
    r = decode_metadata_record(b.broker_change(2, 40, fenced=fenced))
    assert r == BrokerRegistrationChangeRecord(2, 40, expected, None)


@pytest.mark.parametrize("shutdown,expected", [(1, True), (0, None), (None, None)])
def test_broker_registration_change_in_controlled_shutdown(shutdown, expected):
    r = decode_metadata_record(b.broker_change(2, 40, shutdown=shutdown))
    assert r == BrokerRegistrationChangeRecord(2, 40, None, expected)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_broker_registration_change_versions_with_log_dirs(version):
    r = decode_metadata_record(b.broker_change(5, 6, fenced=-1, shutdown=1, version=version, log_dirs=[DIR1]))
    assert r == BrokerRegistrationChangeRecord(5, 6, False, True)
    assert decode_metadata_record(b.broker_change(5, 6, version=4)) == Unknown(17, 4)


def test_fence_and_unfence():
    assert decode_metadata_record(b.fence_broker(7, 70)) == BrokerRegistrationChangeRecord(7, 70, True, None)
    assert decode_metadata_record(b.unfence_broker(7, 70)) == BrokerRegistrationChangeRecord(7, 70, False, None)


# ---------------------------------------------------------------- Partition (3), v0..v2

def test_partition_v0():
    r = decode_metadata_record(b.partition(TID, 4, [1, 2, 3], [1, 2], leader=1, leader_epoch=5, partition_epoch=9,
                           removing=[3], adding=[4], version=0))
    assert r == PartitionRecord(topic_id=TID, partition=4, replicas=(1, 2, 3), isr=(1, 2), removing=(3,), adding=(4,),
                          leader=1, leader_epoch=5, partition_epoch=9, leader_recovery_state=0, elr=None,
                          last_known_elr=None)


def test_partition_leader_recovery_state_is_tag_0():
    r = decode_metadata_record(b.partition(TID, 0, [1], [1], leader=-1, recovery=1))
    assert r.leader_recovery_state == 1
    assert r.leader == -1


def test_partition_v1_directories_are_read_past():
    r = decode_metadata_record(b.partition(TID, 1, [1, 2], [2], leader=2, leader_epoch=3, partition_epoch=4, version=1,
                           directories=[DIR1, DIR2]))
    assert (r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch) == ((1, 2), (2,), 2, 3, 4)
    assert r.elr is None and r.last_known_elr is None


def test_partition_v2_elr_and_last_known_elr_tags():
    r = decode_metadata_record(b.partition(TID, 0, [1, 2, 3], [1], leader=1, version=2, directories=[DIR1, DIR2, DIR1],
                           recovery=0, elr=[2], last_known_elr=[3]))
    assert (r.elr, r.last_known_elr, r.leader_recovery_state) == ((2,), (3,), 0)
    r = decode_metadata_record(b.partition(TID, 0, [1, 2, 3], [1], leader=1, version=2, elr=[]))
    assert (r.elr, r.last_known_elr) == ((), None)
    r = decode_metadata_record(b.partition(TID, 0, [1], [1], leader=1, version=2))
    assert (r.elr, r.last_known_elr) == (None, None)
    # tagged null
    r = decode_metadata_record(b.partition(TID, 0, [1], [1], leader=1, version=2, elr=None, last_known_elr=[]))
    assert (r.elr, r.last_known_elr) == (None, ())


def test_partition_v3_is_unknown():
    assert decode_metadata_record(b.partition(TID, 0, [1], [1], leader=1, version=3)) == Unknown(3, 3)


# ---------------------------------------------------------------- PartitionChange (5)

def test_partition_change_without_tags_changes_nothing():
    r = decode_metadata_record(b.partition_change(TID, 2))
    assert r == PartitionChangeRecord(topic_id=TID, partition=2, isr=None, leader=NO_LEADER_CHANGE, replicas=None,
                                removing=None, adding=None, leader_recovery_state=None, elr=None,
                                last_known_elr=None)
    assert NO_LEADER_CHANGE == -2


@pytest.mark.parametrize("field,kwargs,expected", [
    ("isr", dict(isr=[1, 3]), (1, 3)),
    ("isr", dict(isr=[]), ()),
    ("leader", dict(leader=-1), -1),          # no leader now
    ("leader", dict(leader=4), 4),
    ("replicas", dict(replicas=[4, 5, 6]), (4, 5, 6)),
    ("removing", dict(removing=[1]), (1,)),
    ("adding", dict(adding=[6]), (6,)),
    ("leader_recovery_state", dict(recovery=1), 1),
    ("leader_recovery_state", dict(recovery=0), 0),
    ("leader_recovery_state", dict(recovery=-1), None),    # -1: unchanged
    ("elr", dict(elr=[2], version=2), (2,)),
    ("last_known_elr", dict(last_known_elr=[3], version=2), (3,)),
])
def test_partition_change_each_tag(field, kwargs, expected):
    r = decode_metadata_record(b.partition_change(TID, 1, **kwargs))
    assert getattr(r, field) == expected
    untouched = {"isr": None, "leader": NO_LEADER_CHANGE, "replicas": None, "removing": None, "adding": None,
                 "leader_recovery_state": None, "elr": None, "last_known_elr": None}
    del untouched[field]
    assert {k: getattr(r, k) for k in untouched} == untouched


def test_partition_change_every_tag_with_directories():
    r = decode_metadata_record(b.partition_change(TID, 7, isr=[1], leader=1, replicas=[1, 2], removing=[2], adding=[],
                                                  recovery=0, elr=[2], last_known_elr=[], directories=[DIR1, DIR2],
                                                  version=2))
    assert r == PartitionChangeRecord(TID, 7, (1,), 1, (1, 2), (2,), (), 0, (2,), ())
    assert decode_metadata_record(b.partition_change(TID, 7, version=3)) == Unknown(5, 3)


# ---------------------------------------------------------------- the others

def test_topic_and_remove_topic():
    assert decode_metadata_record(b.topic("orders", TID)) == TopicRecord("orders", TID)
    assert decode_metadata_record(b.remove_topic(TID)) == RemoveTopicRecord(TID)


def test_config_set_and_removed():
    for value in ("1000", None):
        assert decode_metadata_record(b.config(2, "orders", "retention.ms", value)) == ConfigRecord(
            2, "orders", "retention.ms", value)
    assert decode_metadata_record(b.config(4, "1", "log.cleaner.threads", "2")).resource_type == 4


def test_feature_level_and_clear_elr():
    assert decode_metadata_record(b.feature_level("metadata.version", 27)) == FeatureLevelRecord("metadata.version", 27)
    assert decode_metadata_record(b.clear_elr("orders")) == ClearElrRecord("orders")
    assert decode_metadata_record(b.clear_elr("")) == ClearElrRecord("")


def test_transactions():
    assert decode_metadata_record(b.begin_transaction("create topics")) == BeginTransactionRecord("create topics")
    assert decode_metadata_record(b.begin_transaction()) == BeginTransactionRecord(None)
    assert decode_metadata_record(b.end_transaction()) == EndTransactionRecord()
    assert decode_metadata_record(b.abort_transaction("timeout")) == AbortTransactionRecord("timeout")
    assert decode_metadata_record(b.abort_transaction()) == AbortTransactionRecord(None)


def test_unknown_api_key_and_too_new_versions():
    assert decode_metadata_record(b.framed(99, 0, b"\x01\x02")) == Unknown(99, 0)
    assert decode_metadata_record(b.framed(6, 0, b"")) == Unknown(6, 0)          # a key no schema uses
    assert decode_metadata_record(b.framed(2, 1, b"")) == Unknown(2, 1)          # TopicRecord v1
    assert decode_metadata_record(b.framed(28, 1, b"")) == Unknown(28, 1)


@pytest.mark.parametrize("api_key", sorted(rec.SKIPPED))
def test_skipped_types_give_none_whatever_their_body(api_key):
    assert decode_metadata_record(b.framed(api_key, 0, b"\xff\xff")) is None
    assert decode_metadata_record(b.framed(api_key, 9, b"")) is None


def test_no_op_is_skipped():
    assert decode_metadata_record(b.no_op()) is None


def test_an_unknown_frame_version_is_malformed():
    with pytest.raises(MalformedRecord, match="^metadata record: frame version 0, not 1$"):
        decode_metadata_record(b.framed(2, 0, b"", frame_version=0))
    with pytest.raises(MalformedRecord, match="^metadata record: truncated at byte 0 reading frame version$"):
        decode_metadata_record(b.topic("t", TID)[:0])


def test_a_malformed_record_names_its_type_its_field_and_the_byte():
    value = b.partition(TID, 0, [1, 2], [1], leader=1)
    head = len(b.framed(3, 0, b""))                  # frame, api key, version; then the partition id
    with pytest.raises(MalformedRecord, match=f"^PartitionRecord: truncated at byte {head + 4} reading topic_id$"):
        decode_metadata_record(value[:head + 10])
    with pytest.raises(MalformedRecord, match="^PartitionRecord: broker id -2 in replicas is below 0$"):
        decode_metadata_record(b.partition(TID, 0, [1, -2], [1], leader=1))
    isr_of_two_with_one = b.uvarint(3) + b.i32(1)    # tag 0, the ISR: says two ids, has one
    change = b.framed(5, 0, b.i32(0) + b.uuid_bytes(TID) + b.tags({0: isr_of_two_with_one}))
    with pytest.raises(MalformedRecord, match="^PartitionChangeRecord record tag 0: truncated at byte 31 reading isr$"):
        decode_metadata_record(change)


@pytest.mark.parametrize("value", [
    b.register_broker(4, 1, INC, 5, ENDPOINTS, FEATURES, rack="r", log_dirs=[DIR1]),
    b.partition(TID, 0, [1, 2], [1], leader=1, version=2, directories=[DIR1, DIR2], elr=[2]),
    b.partition_change(TID, 0, isr=[1], leader=1, version=2, elr=[1]),
    b.broker_change(1, 2, fenced=1, shutdown=1),
    b.topic("orders", TID), b.config(2, "orders", "a", "b"), b.feature_level("x", 1), b.clear_elr("t"),
    b.unregister_broker(1, 2), b.remove_topic(TID), b.fence_broker(1, 2), b.begin_transaction("n"),
], ids=lambda v: f"key{v[1]}")
def test_every_truncation_of_a_record_is_malformed(value):
    assert decode_metadata_record(value) is not None
    for cut in range(len(value)):
        with pytest.raises(MalformedRecord):
            decode_metadata_record(value[:cut])


# Values outside the ranges Kafka writes, which no event can carry (found by tests/fuzz/kraft.py):
# a malformed record, not an event the stream refuses whole.
OUT_OF_RANGE = {
    "negative broker id": b.register_broker(1, -1, INC, 10, ENDPOINTS),
    "negative broker epoch": b.register_broker(1, 1, INC, -10, ENDPOINTS),
    "negative feature level": b.register_broker(1, 1, INC, 10, ENDPOINTS, {"metadata.version": (-1, 27)}),
    "negative unregistered id": b.unregister_broker(-3, 2),
    "negative fenced id": b.fence_broker(-3, 2),
    "negative change epoch": b.broker_change(1, -2, fenced=1),
    "negative partition": b.partition(TID, -1, [1], [1], leader=1),
    "negative replica": b.partition(TID, 0, [1, -2], [1], leader=1),
    "negative isr member": b.partition(TID, 0, [1], [-1], leader=1),
    "leader below -1": b.partition(TID, 0, [1], [1], leader=-2),
    "negative leader epoch": b.partition(TID, 0, [1], [1], leader=1, leader_epoch=-1),
    "negative partition epoch": b.partition(TID, 0, [1], [1], leader=1, partition_epoch=-5),
    "recovery state 2": b.partition(TID, 0, [1], [1], leader=1, recovery=2),
    "negative elr member": b.partition(TID, 0, [1], [1], leader=1, version=2, elr=[-4]),
    "change of a negative partition": b.partition_change(TID, -1, leader=1),
    "change to a leader below -2": b.partition_change(TID, 0, leader=-3),
    "change to a negative isr member": b.partition_change(TID, 0, isr=[1, -1]),
    "change to recovery state 7": b.partition_change(TID, 0, recovery=7),
}


@pytest.mark.parametrize("value", OUT_OF_RANGE.values(), ids=OUT_OF_RANGE.keys())
def test_a_value_out_of_kafkas_range_is_malformed(value):
    with pytest.raises(MalformedRecord, match="below|not 0 or 1"):
        decode_metadata_record(value)


def test_a_leader_change_to_a_leader_below_minus_1_is_malformed():
    with pytest.raises(MalformedRecord, match="below"):
        leader_change(b.control_key(2), b.leader_change_value(-2))


@pytest.mark.parametrize(("what", "batch"), [
    ("base offset", b.batch(-5, [b.no_op()])), ("epoch", b.batch(0, [b.no_op()], epoch=-1)),
    ("max timestamp", b.batch(0, [b.no_op()], max_timestamp=-2)),
    ("offset delta", b.batch(0, [None], raw_records=b.record(-1, b.no_op())))])
def test_a_batch_out_of_kafkas_ranges_is_malformed(what, batch):
    (only,) = list(batches(batch))
    assert only.malformed is not None and what in only.malformed and only.values == ()


def test_a_batch_without_timestamps_has_no_append_time():
    (only,) = list(batches(b.batch(0, [b.no_op()], max_timestamp=-1)))
    assert only.max_timestamp_ms is None and only.malformed is None


def test_a_corrupt_array_length_is_malformed():
    good = b.partition(TID, 0, [1], [1], leader=1)
    head = len(b.framed(3, 0, b"")) + 4 + 16         # frame, partition id, topic id
    bad = good[:head] + b.uvarint(10_000) + good[head + 1:]
    with pytest.raises(MalformedRecord):
        decode_metadata_record(bad)


# ---------------------------------------------------------------- batches

def test_several_batches():
    t, p = b.topic("a", TID), b.partition(TID, 0, [1], [1], leader=1)
    data = (b.batch(0, [t, p], epoch=3, max_timestamp=111)
            + b.batch(2, [(b"k", b.feature_level("x", 1))], epoch=3, max_timestamp=222)
            + b.batch(3, [None, t, p], epoch=4, max_timestamp=333))
    got = list(batches(data))
    assert [(x.base_offset, x.last_offset, x.epoch, x.max_timestamp_ms, x.control, x.malformed) for x in got] == [
        (0, 1, 3, 111, False, None), (2, 2, 3, 222, False, None), (3, 5, 4, 333, False, None)]
    assert got[0].values == ((0, None, t), (1, None, p))
    assert got[1].values == ((2, b"k", b.feature_level("x", 1)),)
    assert got[2].values == ((3, None, None), (4, None, t), (5, None, p))


def test_a_partial_trailing_batch_is_left_out():
    whole = b.batch(10, [b.topic("a", TID)])
    nxt = b.batch(11, [b.topic("b", TID), b.remove_topic(TID)])
    for cut in (1, 11, 12, 40, 61, len(nxt) - 1):
        got = list(batches(whole + nxt[:cut]))
        assert [x.base_offset for x in got] == [10], cut
    assert list(batches(b"")) == []


def test_a_batch_length_shorter_than_a_header_stops_reading():
    bad = b.i64(0) + b.i32(10) + b"\x00" * 10
    assert list(batches(bad + b.batch(1, [b.no_op()]))) == []


def test_record_headers_are_skipped_and_offset_deltas_used():
    raw = (b.record(0, b"v0", headers=[("h", b"x" * 5)]) + b.record(2, b"v2", key=b"key", timestamp_delta=-7)
           + b.record(3, b"", key=b""))
    (only,) = list(batches(b.batch(100, [None, None, None], raw_records=raw)))
    assert only.values == ((100, None, b"v0"), (102, b"key", b"v2"), (103, b"", b""))


def test_a_record_longer_than_its_length_is_malformed():
    # the value runs on past the record's stated length (into the next record's bytes)
    good = b.record(0, b"value")
    short = b.varint(3) + good[1:]
    (only,) = list(batches(b.batch(0, [None], raw_records=short)))
    assert only.malformed is not None and only.values == ()
    (only,) = list(batches(b.batch(0, [None, None], raw_records=short + b.record(1, b"x"))))
    assert only.malformed is not None and only.values == ()


def test_a_gzip_batch():
    values = [b.topic("orders", TID), b.partition(TID, 0, [1, 2], [1, 2], leader=1), b.end_transaction()]
    (only,) = list(batches(b.batch(50, values, compression=1)))
    assert only.malformed is None
    assert only.values == tuple((50 + i, None, v) for i, v in enumerate(values))


@pytest.mark.parametrize("codec,name", [(4, "zstd"), (2, "snappy"), (3, "lz4")])
def test_an_unsupported_compression_is_a_malformed_batch_and_the_next_is_still_read(codec, name):
    data = (b.batch(0, [b.topic("a", TID)]) + b.batch(1, [b.no_op(), b.no_op()], compression=codec)
            + b.batch(3, [b.topic("b", TID)]))
    got = list(batches(data))
    assert [x.base_offset for x in got] == [0, 1, 3]
    assert got[1].malformed is not None and name in got[1].malformed
    assert got[1].values == ()
    assert got[1].last_offset == 2
    assert got[0].malformed is None and got[2].values == ((3, None, b.topic("b", TID)),)


def test_corrupt_gzip_or_magic_or_record_is_a_malformed_batch():
    bad_gzip = bytearray(b.batch(0, [b.no_op()], compression=1))
    bad_gzip[b.BATCH_HEADER_SIZE + 12:] = b"\x00" * (len(bad_gzip) - b.BATCH_HEADER_SIZE - 12)
    magic1 = b.batch(1, [b.no_op()], magic=1)
    past = b.batch(2, [b.no_op()], raw_records=b.varint(40) + b"\x00\x00\x00\x01\x02")   # claims 40 bytes
    short = b.batch(3, [b.no_op(), b.no_op()], record_count=5)                          # 5 said, 2 there
    got = list(batches(bytes(bad_gzip) + magic1 + past + short + b.batch(8, [b.no_op()])))
    assert [x.base_offset for x in got] == [0, 1, 2, 3, 8]
    assert all(x.malformed and x.values == () for x in got[:4]), [x.malformed for x in got]
    assert "magic 1" in got[1].malformed
    assert got[4].malformed is None


def test_a_control_batch_with_a_leader_change():
    key, value = b.control_key(rec.CONTROL_LEADER_CHANGE), b.leader_change_value(2, voters=[1, 2, 3], granting=[2, 3])
    (only,) = list(batches(b.batch(7, [(key, value)], epoch=5, control=True)))
    assert only.control is True and only.epoch == 5
    assert only.values == ((7, key, value),)
    assert leader_change(key, value) == 2
    assert leader_change(key, b.leader_change_value(-1)) == -1


def test_other_control_records_are_not_leader_changes():
    assert leader_change(b.control_key(3), b"\x00\x00") is None           # snapshot header
    assert leader_change(b.control_key(0), b"\x00\x00\x00\x00\x00\x01") is None   # transaction abort marker
    assert leader_change(None, b.leader_change_value(1)) is None
    assert leader_change(b.control_key(2), None) is None
    assert leader_change(b"\x00\x00", b.leader_change_value(1)) is None      # a key too short to say


def test_a_kraft_version_control_record_is_the_kraft_version_feature_level():
    key = b.control_key(rec.CONTROL_KRAFT_VERSION)
    assert rec.kraft_version(key, b.kraft_version_value(1)) == FeatureLevelRecord("kraft.version", 1)
    assert rec.kraft_version(b.control_key(rec.CONTROL_LEADER_CHANGE), b.leader_change_value(1)) is None
    assert rec.kraft_version(key, None) is None and leader_change(key, b.kraft_version_value(1)) is None
    for bad in (b.kraft_version_value(1)[:3], b.kraft_version_value(-1)):   # cut short; a level below 0
        with pytest.raises(MalformedRecord):
            rec.kraft_version(key, bad)


def test_a_truncated_leader_change_is_malformed():
    with pytest.raises(MalformedRecord, match="^LeaderChange control record: truncated at byte 2 reading leader_id$"):
        leader_change(b.control_key(2), b.leader_change_value(3)[:4])


def test_a_record_cut_inside_its_batch_names_the_field():
    (only,) = list(batches(b.batch(0, [None], raw_records=b.record(0, b.no_op())[:-2])))
    assert only.malformed == "batch at offset 0: truncated at byte 6 reading value" and only.values == ()


def test_a_records_timestamp_delta_is_a_varlong():
    """Kafka writes it as a 64-bit varint (the other fields of a record in a batch are 32-bit ones)."""
    (only,) = list(batches(b.batch(0, [None], raw_records=b.record(0, b.no_op(), timestamp_delta=2**40))))
    assert only.malformed is None and only.values == ((0, None, b.no_op()),)


# ---------------------------------------------------------------- the fast paths read as field by field does

def _outcome(read):
    try:
        return read()
    except MalformedRecord as e:
        return MalformedRecord, str(e)


def _mutations(data: bytes, seed: int, count: int):
    """``data`` itself, then each of ``count`` copies with a byte changed, a byte dropped or the end cut."""
    import random
    rnd = random.Random(seed)
    yield data
    for _ in range(count):
        out = bytearray(data)
        what, at = rnd.randrange(3), rnd.randrange(len(out))
        if what == 0:
            out[at] = rnd.choice((0, 1, 0x7f, 0x80, 0xff, rnd.randrange(256)))
        elif what == 1:
            del out[at]
        else:
            del out[at:]
        yield bytes(out)


PARTITIONS = [
    b.partition(TID, 3, [1, 2, 3], [1, 2], 1, 4, 7),
    b.partition(TID, 0, [1, 2, 3], [3], -1, 0, 2, version=1),   # leaderless: read field by field
    b.partition(TID, 5, [1, 2, 3, 4], [1, 2, 3], 2, 1, 1, removing=[4], adding=[1], version=2,
                directories=[DIR1, DIR2, DIR1, DIR2], recovery=1, elr=[3], last_known_elr=[4]),
    b.partition(TID, 9, list(range(130)), list(range(130)), 0, 0, 0, version=1),   # arrays of 127 ids and more
    b.partition(TID, 1, [], [], 0, 0, 0, version=2, elr=None),
]


PARTITION_CHANGES = [
    b.partition_change(TID, 3, isr=[1, 2], leader=2),
    b.partition_change(TID, 3, isr=[1, 2, 3]),
    b.partition_change(TID, 4, leader=-1, recovery=1, elr=[2], last_known_elr=[], version=2),
    b.partition_change(TID, 5, replicas=[1, 2, 3, 4], removing=[4], adding=[1], recovery=0, directories=[DIR1] * 4,
                       version=1),
    b.partition_change(TID, 6, isr=list(range(126)), leader=125),
    b.partition_change(TID, 7, isr=list(range(127))),   # an array of 127: its length two bytes
    b.partition_change(TID, 8),
    b.partition_change(TID, 9, isr=[2], recovery=-1),   # the recovery state unchanged, said
]


@pytest.mark.parametrize("value", PARTITIONS + PARTITION_CHANGES, ids=[
    "v0", "leaderless", "v2-tags", "long-arrays", "empty",
    "change-isr-leader", "change-isr", "change-elr", "change-move", "change-126", "change-127", "change-none",
    "change-unchanged-recovery"])
def test_a_partition_record_decodes_alike_at_once_and_field_by_field(value, monkeypatch):
    fast = [_outcome(lambda v=v: decode_metadata_record(v)) for v in _mutations(value, 1, 400)]
    # field by field only
    monkeypatch.setattr(rec, "_partition_fields_at", lambda *_: None)
    monkeypatch.setattr(rec, "_DECODED_HEADS", {})
    slow = [_outcome(lambda v=v: decode_metadata_record(v)) for v in _mutations(value, 1, 400)]
    assert fast == slow
    assert isinstance(fast[0], (PartitionRecord, PartitionChangeRecord))


def test_the_head_lookup_decodes_as_the_varints_do(monkeypatch):
    values = [*PARTITIONS, b.register_broker(3, 1, INC, 5, ENDPOINTS, FEATURES, "r1", True, False),
              b.partition_change(TID, 3, isr=[1], leader=2), b.topic("orders", TID), b.fence_broker(1, 5),
              b.config(2, "orders", "min.insync.replicas", "2"), b.framed(3, 3, b"\0"), b.framed(3, 2, b"")]
    fast = [_outcome(lambda v=v: decode_metadata_record(v)) for value in values for v in _mutations(value, 2, 200)]
    monkeypatch.setattr(rec, "_DECODED_HEADS", {})
    slow = [_outcome(lambda v=v: decode_metadata_record(v)) for value in values for v in _mutations(value, 2, 200)]
    assert fast == slow


def test_a_batch_frames_its_records_alike_matched_and_field_by_field(monkeypatch):
    values = [PARTITIONS[0], None, b"", PARTITIONS[2] * 3, (b"k", PARTITIONS[1])]
    data = b.batch(100, values) + b.batch(105, [PARTITIONS[3]] * 2, compression=1)
    fast = [list(batches(v)) for v in _mutations(data, 3, 600)]

    class Never:
        @staticmethod
        def match(*_):
            return None
    monkeypatch.setattr(rec, "_UNKEYED_HEAD", Never)
    slow = [list(batches(v)) for v in _mutations(data, 3, 600)]
    assert fast == slow
    assert [v for _, _, v in fast[0][0].values] == [PARTITIONS[0], None, b"", PARTITIONS[2] * 3, PARTITIONS[1]]
