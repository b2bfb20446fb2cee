"""The KRaft collector's loader alone (collectors/kraft/loader.py), as Kafka's MetadataBatchLoaderTest
tests its loader: committed records in; events, the position and whether it caught up out; the resync
brackets; and Kafka's property that a snapshot at offset k and the log after it give the image the
whole log gives (TopicsImageTest), over generated logs."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.kraft.loader import MetadataLoader, Position
from collectors.resync import Resync
from kmon.events import ControllerState
from tests.unit import kraft_builders as b

T1, T2 = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"
INC = "00000000-0000-0000-0000-000000000001"


def register(broker: int, epoch: int = 1) -> bytes:
    return b.register_broker(1, broker, INC, epoch, [("PLAINTEXT", "h", 9092, 0)], fenced=False)


def orders() -> list[bytes]:
    return [register(1), register(2), b.topic("orders", T1), b.partition(T1, 0, [1, 2], [1, 2], leader=1)]


def test_only_committed_records_are_loaded_and_the_position_follows_them() -> None:
    loader = MetadataLoader("c")
    log = b.batch(0, orders())
    loaded = loader.load(log, 2, 1_000, None)   # the high watermark cuts the batch after two records
    assert [e.entity for e in loaded.events] == ["broker:1", "broker:2"]
    assert loader.position == Position(2, 1) and loader.caught_up
    loaded = loader.load(log, 4, 1_001, None)   # the same batch again, committed further: nothing twice
    assert [e.entity for e in loaded.events] == ["partition:orders:0", "topic:orders"]
    assert [e.position for e in loaded.events] == [3, 3] and loader.position == Position(4, 1)


def test_a_transaction_open_at_the_high_watermark_is_not_caught_up_until_it_ends() -> None:
    loader = MetadataLoader("c")
    loaded = loader.load(b.batch(0, [b.begin_transaction(), *orders()]), 5, 0, None)
    assert loaded.events == [] and not loader.caught_up and loader.position == Position(5, 1)
    loaded = loader.load(b.batch(5, [b.end_transaction()]), 6, 0, None)
    assert len(loaded.events) == 4 and loader.caught_up


def test_a_resync_from_a_snapshot_is_bracketed_and_deletes_what_vanished() -> None:
    loader = MetadataLoader("c")
    loader.load(b.batch(0, [*orders(), register(3)]), 5, 0, None)
    resync = Resync("kraft-1", "log_cleaned", 500)
    snapshot = b.batch(0, orders())   # broker 3 is gone by the snapshot at offset 9
    begun = loader.begin(resync, (9, 2, snapshot), 600)
    assert [(e.entity, e.op) for e in begun.events] == [
        ("snapshot:kraft", "marker"), ("broker:1", "upsert"), ("broker:2", "upsert"), ("topic:orders", "upsert"),
        ("partition:orders:0", "upsert"), ("broker:3", "delete")]
    assert loader.position == Position(9, 2) and not loader.caught_up and begun.ended is None
    tail = b.batch(9, [b.partition_change(T1, 0, isr=[1])], epoch=2)
    loaded = loader.load(tail, 10, 700, ControllerState(1, 2))
    assert [(e.entity, e.op) for e in loaded.events] == [
        ("partition:orders:0", "upsert"), ("controller", "upsert"), ("snapshot:kraft", "marker")]
    assert loaded.ended == resync and loaded.events[-1].data.entities == 5   # the controller too
    assert loader.caught_up and loader.resync is None


def test_the_quorum_leader_is_the_controller_only_where_the_log_has_not_named_a_newer_one() -> None:
    loader = MetadataLoader("c")
    leader = b.batch(0, [(b.control_key(2), b.leader_change_value(3, [3]))], epoch=7, control=True)
    loaded = loader.load(leader, 1, 0, ControllerState(2, 6))
    assert [e.data for e in loaded.events] == [ControllerState(3, 7)]


def test_a_dynamic_quorums_kraft_version_is_a_feature_level_in_the_snapshot_and_the_log() -> None:
    """A static quorum writes no KRaftVersion record and runs at kraft.version 0; a dynamic one's snapshot
    begins with one, and an upgrade appends another."""
    loader = MetadataLoader("c")
    assert loader.image.features == {"kraft.version": 0}
    control = b.control_key(5)
    snapshot = b.batch(0, [(control, b.kraft_version_value(1))], control=True) + b.batch(1, orders())
    loader.begin(Resync("kraft-1", "first", 500), (9, 2, snapshot), 600)
    assert loader.image.features["kraft.version"] == 1
    loader.load(b.batch(9, [(control, b.kraft_version_value(2))], epoch=2, control=True), 10, 700, None)
    assert loader.image.features["kraft.version"] == 2 and loader.position.offset == 10


def test_what_cannot_be_read_or_applied_is_reported_and_skipped() -> None:
    loader = MetadataLoader("c")
    log = b.batch(0, [register(1), b.framed(99, 0, b""), b"\x01"]) + b.batch(3, [register(2)], crc=0)
    loaded = loader.load(log, 4, 0, None)
    assert loaded.unknown == [(99, 0, 1)] and loaded.unmatched == []
    assert [kind for kind, _ in loaded.malformed] == ["record"] and "offset 2" in loaded.malformed[0][1]
    assert [e.entity for e in loaded.events] == ["broker:1", "broker:2"] and loader.position == Position(4, 1)
    loaded = loader.load(b.batch(4, [b.partition_change(T1, 0, isr=[1]), b.broker_change(5, 1, fenced=1)]), 6, 0, None)
    assert loaded.unmatched == [("partition_change", 4), ("broker_change", 5)] and loaded.events == []


# ---------------------------------------------------------------- a snapshot and the tail, or the whole log

BROKERS, TOPICS = (1, 2, 3), {"a": T1, "b": T2}

record_strategy = st.one_of(
    st.builds(lambda broker, epoch: register(broker, epoch), st.sampled_from(BROKERS), st.integers(1, 3)),
    st.builds(lambda broker, epoch, fence: b.broker_change(broker, epoch, fenced=fence),
              st.sampled_from(BROKERS), st.integers(1, 3), st.sampled_from([1, -1])),
    st.builds(b.unregister_broker, st.sampled_from(BROKERS), st.integers(1, 3)),
    st.builds(lambda name: b.topic(name, TOPICS[name]), st.sampled_from(sorted(TOPICS))),
    st.builds(lambda name: b.remove_topic(TOPICS[name]), st.sampled_from(sorted(TOPICS))),
    st.builds(lambda name, p, replicas, leader: b.partition(TOPICS[name], p, replicas, replicas, leader=leader),
              st.sampled_from(sorted(TOPICS)), st.integers(0, 1),
              st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True), st.sampled_from(BROKERS)),
    st.builds(lambda name, p, isr, leader: b.partition_change(TOPICS[name], p, isr=isr, leader=leader),
              st.sampled_from(sorted(TOPICS)), st.integers(0, 1),
              st.lists(st.sampled_from(BROKERS), max_size=3, unique=True), st.sampled_from((*BROKERS, -1))),
    st.builds(lambda name, value: b.config(2, name, "retention.ms", value), st.sampled_from(sorted(TOPICS)),
              st.sampled_from(["1", "2", None])),
    st.builds(lambda level: b.feature_level("metadata.version", level), st.integers(20, 22)),
)


def _image(loader: MetadataLoader) -> tuple:
    i = loader.image
    return (i.brokers, {t.topic_id: (t.name, t.replicas, t.adding, t.removing) for t in i.topics.values()}, i.names,
            i.partitions, i.configs, i.features)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=40), st.data())
def test_a_snapshot_at_k_and_the_log_after_it_give_the_image_of_the_whole_log(records: list[bytes], data) -> None:
    """Kafka's property (TopicsImageTest: an image after a snapshot plus the delta equals the image
    after all records). The snapshot here holds the log's first k records as they were written (the
    replay is the same for the records a controller would write of that image); the tail is read from
    the same fetch, as the collector reads the log after a snapshot."""
    k = data.draw(st.integers(0, len(records)))
    whole = MetadataLoader("c")
    whole.load(b.batch(0, records), len(records), 0, None)
    resumed = MetadataLoader("c")
    snapshot = b.batch(0, records[:k]) if k else b""
    resumed.begin(Resync("s", "start", 0), (k, 1, snapshot), 0)
    resumed.load(b.batch(0, records), len(records), 0, None)
    assert _image(resumed) == _image(whole)
    assert resumed.position == whole.position == Position(len(records), 1)


def test_a_snapshot_sends_partitions_in_numeric_order_as_the_zookeeper_collector_does() -> None:
    loader = MetadataLoader("c")
    records = [register(1), b.topic("orders", T1), *(b.partition(T1, p, [1], [1], leader=1) for p in range(12))]
    begun = loader.begin(Resync("s", "start", 0), (len(records), 1, b.batch(0, records)), 0)
    assert [e.entity for e in begun.events if e.kind == "partition"] == [f"partition:orders:{p}" for p in range(12)]
