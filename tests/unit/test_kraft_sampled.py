"""The KRaft collector's sampled mode (the brokers' metadata, polled): what a sample makes events of,
and the epoch steps between two samples it counts instead of inventing them. Pure."""
from __future__ import annotations

from collectors.kraft import wire
from collectors.kraft.sampled import MISSED_CONTROLLER_CHANGES, MISSED_ELECTIONS, Samples, sample_states
from kmon.events import ControllerState

T1, T2 = "00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000a2"


def metadata(leader: int = 1, epoch: int = 0, isr: tuple[int, ...] = (1, 2, 3), brokers: tuple[int, ...] = (1, 2, 3),
             topic_id: str = T1, topics: bool = True) -> wire.ClusterMetadata:
    partitions = (wire.PartitionMetadata(0, 0, leader, epoch, (1, 2, 3), isr),)
    return wire.ClusterMetadata({b: ("127.0.0.1", 9090 + b, None) for b in brokers}, "cid",
                                (wire.TopicMetadata(0, "orders", topic_id, False, partitions),) if topics else ())


def quorum(leader: int, epoch: int) -> wire.QuorumInfo:
    return wire.QuorumInfo(0, None, leader, epoch, 100, (wire.ReplicaInfo(leader, 100, 5, 5),), (), {})


def take(samples: Samples, md: wire.ClusterMetadata, q: wire.QuorumInfo | None = None, now: int = 1000):
    return samples.take(sample_states(md, q, now), now)


def test_the_first_sample_is_a_bracketed_snapshot_of_sampled_events() -> None:
    events, skipped = take(Samples("c"), metadata(), quorum(1001, 4))
    assert events[0].kind == "snapshot_begin" and events[-1].kind == "snapshot_end"
    assert {e.entity for e in events[1:-1]} == {"controller", "quorum", "broker:1", "broker:2", "broker:3",
                                                "topic:orders", "partition:orders:0"}
    assert all(e.sampled and e.position is None for e in events)
    assert next(e for e in events if e.entity == "controller").data == ControllerState(1001, 4)
    assert skipped == {MISSED_ELECTIONS: 0, MISSED_CONTROLLER_CHANGES: 0}


def test_an_unchanged_sample_sends_nothing_and_a_change_only_what_changed() -> None:
    s = Samples("c")
    take(s, metadata())
    assert take(s, metadata())[0] == []
    events, _ = take(s, metadata(isr=(1, 2)))
    assert [(e.entity, e.data.isr) for e in events] == [("partition:orders:0", (1, 2))]


def test_epoch_steps_the_samples_do_not_show_are_counted() -> None:
    s = Samples("c")
    take(s, metadata(leader=1, epoch=3), quorum(1001, 4))
    # leader 1 -> 2 seen once, but the epoch went 3 -> 6: two elections happened unseen
    _, skipped = take(s, metadata(leader=2, epoch=6), quorum(1001, 4))
    assert skipped[MISSED_ELECTIONS] == 2
    # back to the same leader, one epoch on: an election away and back, seen as nothing
    _, skipped = take(s, metadata(leader=2, epoch=7), quorum(1001, 4))
    assert skipped[MISSED_ELECTIONS] == 1
    # the quorum went from epoch 4 (1001) to 7 (1002): one change seen, two not
    _, skipped = take(s, metadata(leader=2, epoch=7), quorum(1002, 7))
    assert skipped[MISSED_CONTROLLER_CHANGES] == 2


def test_a_broker_gone_from_the_metadata_is_deleted_and_a_recreated_topic_deleted_first() -> None:
    s = Samples("c")
    take(s, metadata())
    events, _ = take(s, metadata(brokers=(1, 2), topic_id=T2))
    assert [(e.entity, e.op) for e in events] == [("topic:orders", "delete"), ("topic:orders", "upsert"),
                                                  ("broker:3", "delete")]


def test_the_controller_stays_when_describe_quorum_does_not_answer() -> None:
    s = Samples("c")
    take(s, metadata(), quorum(1001, 4))
    events, _ = take(s, metadata(), None)
    assert events == []
