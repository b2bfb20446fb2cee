"""collectors/resync.py: the one resync bracket every collector sends its whole picture in, and its
one order (by kind, then ids, numbers numerically). Pure."""
from __future__ import annotations

from collectors.kraft import wire
from collectors.kraft.sampled import Samples, sample_states
from collectors.resync import Resync, entity_order
from kmon.events import Event, SnapshotMarker


def event(entity: str, op: str = "upsert", observed_ms: int = 5, data: object = None) -> Event:
    return Event(cluster="c", source="kraft", kind=entity.partition(":")[0], entity=entity, op=op,
                 observed_ms=observed_ms, data=data)


def marker(kind: str, data: SnapshotMarker, observed_ms: int) -> Event:
    return event(f"{kind}:kraft", "marker", observed_ms, data)


def test_the_body_holds_the_states_then_the_deletions_each_in_the_one_order() -> None:
    held = {"partition:t:10", "partition:t:2", "broker:10", "broker:2", "topic:t", "controller"}
    gone = {"broker:7", "partition:old:11", "partition:old:3"}
    body = Resync("s", "start", 1).body(held | gone, entity_order,
                                        lambda e: event(e, "delete" if e in gone else "upsert"))
    assert [(e.entity, e.op) for e in body] == [
        ("controller", "upsert"), ("broker:2", "upsert"), ("broker:10", "upsert"), ("topic:t", "upsert"),
        ("partition:t:2", "upsert"), ("partition:t:10", "upsert"),
        ("broker:7", "delete"), ("partition:old:3", "delete"), ("partition:old:11", "delete")]


def test_an_entity_with_nothing_to_say_is_left_out_and_the_markers_frame_it() -> None:
    resync = Resync("s1", "reconnect", 100)
    body = resync.body(["broker:1", "broker:2"], entity_order, lambda e: None if e == "broker:1" else event(e))
    begin, end = resync.begin(marker), resync.end(marker, len(body), 300)
    assert [e.entity for e in body] == ["broker:2"]
    assert (begin.data, begin.observed_ms) == (SnapshotMarker("s1", "reconnect"), 100)
    assert (end.data, end.observed_ms) == (SnapshotMarker("s1", "reconnect", 1, begun_ms=100), 300)


def test_the_sampled_collectors_first_round_is_in_the_one_order() -> None:
    partitions = tuple(wire.PartitionMetadata(0, p, 10, 0, (10, 2), (10, 2)) for p in (10, 2))
    metadata = wire.ClusterMetadata({10: ("h", 9010, None), 2: ("h", 9002, None)}, "cid",
                                    (wire.TopicMetadata(0, "t", "00000000-0000-0000-0000-0000000000a1", False,
                                                        partitions),))
    events, _ = Samples("c").take(sample_states(metadata, None, 1000), 1000)
    assert [e.entity for e in events] == ["snapshot:kraft", "broker:2", "broker:10", "topic:t", "partition:t:2",
                                          "partition:t:10", "snapshot:kraft"]
