"""collectors.kraft.image.MetadataImage: the metadata log folded into kmon events. The records are
built as bytes (tests/unit/kraft_builders.py) and decoded, as the collector does."""
from dataclasses import dataclass, field

import pytest

from collectors.kraft.image import MetadataImage
from collectors.kraft.records import decode_metadata_record
from collectors.resync import Resync
from kmon.events import (BrokerState, ControllerState, Endpoint, Event, LogMeta, PartitionState, SnapshotMarker,
                         TopicState)
from tests.unit import kraft_builders as b

INC1 = "11111111-0000-4000-8000-000000000001"
INC2 = "22222222-0000-4000-8000-000000000002"
T1 = "a0000000-0000-4000-8000-00000000000a"
T2 = "b0000000-0000-4000-8000-00000000000b"
T3 = "c0000000-0000-4000-8000-00000000000c"
EPOCH = 4
NOW_MS = 42


def at(offset: int, epoch: int = EPOCH) -> LogMeta:
    return LogMeta(offset, epoch, 1_000_000 + offset)


def summary(events: list[Event]) -> list[tuple[str, str, int | None]]:
    return [(e.entity, e.op, e.position) for e in events]


@dataclass
class Fed:
    """An image fed as the loader feeds it: each feed one replay of records at consecutive offsets,
    what was sent kept as the loader keeps it. ``take_events`` gives what the feeds since its last
    call sent; ``unknown`` and ``unmatched`` collect what the replays gave."""
    image: MetadataImage = field(default_factory=lambda: MetadataImage("c1"))
    published: set[str] = field(default_factory=set)
    silent: bool = False
    sent: list[Event] = field(default_factory=list)
    unknown: list[tuple[int, int, int]] = field(default_factory=list)
    unmatched: list[tuple[str, int]] = field(default_factory=list)

    def feed(self, start: int, *values: bytes, epoch: int = EPOCH) -> None:
        """The records at offsets start, start + 1, ..., replayed as one fetch's."""
        self._replay([(decode_metadata_record(value), at(start + i, epoch)) for i, value in enumerate(values)])

    def leader_change(self, leader_id: int, where: LogMeta) -> None:
        self._replay([(ControllerState(leader_id, where.epoch), where)])

    def _replay(self, entries: list) -> None:
        replayed = self.image.replay(entries, NOW_MS, self.published, self.silent)
        self.sent += replayed.events
        self.unknown += replayed.unknown
        self.unmatched += replayed.unmatched

    def take_events(self) -> list[Event]:
        out, self.sent = self.sent, []
        return out

    def resync(self) -> None:
        """As the loader's begin: the image forgotten but its controller; what was sent is kept."""
        self.image = MetadataImage("c1", controller=self.image.controller)


@pytest.fixture
def fed() -> Fed:
    return Fed()


def register(broker_id: int = 1, incarnation: str = INC1, epoch: int = 10, fenced: bool = True,
             endpoints=(("PLAINTEXT", "b1.example", 9092, 0), ("SSL", "b1.example", 9093, 1))) -> bytes:
    return b.register_broker(3, broker_id, incarnation, epoch, endpoints, {"metadata.version": (1, 27)},
                             rack="rack-1", fenced=fenced, log_dirs=[INC1])


# ---------------------------------------------------------------- brokers

def test_a_broker_registered_fenced_unfenced_shut_down_then_fenced(fed):
    fed.feed(10, register())
    (e,) = fed.take_events()
    assert (e.cluster, e.source, e.kind, e.entity, e.op, e.observed_ms) == ("c1", "kraft", "broker", "broker:1",
                                                                           "upsert", 42)
    assert e.log == at(10) and e.position == 10 and e.snapshot_id is None
    assert e.data == BrokerState(
        broker_id=1, host="b1.example", port=9092, rack="rack-1",
        endpoints=(Endpoint("PLAINTEXT", "b1.example", 9092, "PLAINTEXT"), Endpoint("SSL", "b1.example", 9093, "SSL")),
        features={"metadata.version": {"min_version": 1, "max_version": 27}}, fenced=True,
        in_controlled_shutdown=False, incarnation_id=INC1, broker_epoch=10)

    fed.feed(11, b.broker_change(1, 10, fenced=-1))
    (e,) = fed.take_events()
    assert (e.data.fenced, e.data.in_controlled_shutdown, e.log) == (False, False, at(11))

    fed.feed(12, b.broker_change(1, 10, shutdown=1))
    (e,) = fed.take_events()
    assert (e.data.fenced, e.data.in_controlled_shutdown, e.log) == (False, True, at(12))

    fed.feed(13, b.fence_broker(1, 10))
    (e,) = fed.take_events()
    # fenced: the controlled shutdown is over
    assert (e.data.fenced, e.data.in_controlled_shutdown, e.log, e.position) == (True, False, at(13), 13)
    assert fed.image.brokers[1].fenced is True


def test_unfence_record_and_changes_that_change_nothing(fed):
    fed.feed(1, register())
    fed.take_events()
    fed.feed(2, b.unfence_broker(1, 10))
    assert [e.data.fenced for e in fed.take_events()] == [False]
    fed.feed(3, b.broker_change(1, 10, fenced=0), b.broker_change(1, 10, fenced=-1), b.unfence_broker(1, 10))
    assert fed.take_events() == []


def test_a_change_of_another_registration_epoch_or_an_unknown_broker_is_ignored(fed):
    fed.feed(1, register(epoch=10))
    fed.take_events()
    fed.feed(2, b.broker_change(1, 9, fenced=-1), b.fence_broker(1, 11), b.broker_change(7, 10, fenced=-1))
    assert fed.take_events() == []
    assert fed.image.brokers[1].fenced is True and 7 not in fed.image.brokers
    assert fed.unmatched == [("broker_change", 4)]   # broker 7's: counted; an old registration's change is Kafka's


def test_a_re_registration_with_a_new_incarnation_replaces_the_registration(fed):
    # a restart, not a broker gone: the stream tells it from the new incarnation
    fed.feed(1, register(incarnation=INC1, epoch=1, fenced=False))
    fed.take_events()
    fed.feed(50, register(incarnation=INC2, epoch=50))
    events = fed.take_events()
    assert summary(events) == [("broker:1", "upsert", 50)]
    assert (events[0].data.incarnation_id, events[0].data.broker_epoch, events[0].data.fenced) == (INC2, 50, True)


def test_a_re_registration_with_the_same_incarnation_is_an_upsert(fed):
    fed.feed(1, register(epoch=1))
    fed.take_events()
    fed.feed(5, register(epoch=5))
    assert summary(fed.take_events()) == [("broker:1", "upsert", 5)]


def test_unregister_broker_is_a_delete(fed):
    fed.feed(1, register())
    fed.take_events()
    fed.feed(2, b.unregister_broker(1, 10), b.unregister_broker(3, 1))
    assert summary(fed.take_events()) == [("broker:1", "delete", 2)]
    assert fed.image.brokers == {}


def test_a_broker_without_a_plaintext_listener(fed):
    fed.feed(1, register(endpoints=[("INTERNAL", "10.0.0.1", 9094, 3), ("EXT", "b.example", 9095, 1)]))
    (e,) = fed.take_events()
    assert (e.data.host, e.data.port) == ("10.0.0.1", -1)
    assert [ep.protocol for ep in e.data.endpoints] == ["SASL_SSL", "SSL"]


# ---------------------------------------------------------------- topics and partitions

def create_orders(fed: Fed, start: int = 20) -> None:
    fed.feed(start, b.topic("orders", T1), b.config(2, "orders", "retention.ms", "1000"),
             b.partition(T1, 0, [1, 2], [1, 2], leader=1, leader_epoch=0, partition_epoch=0),
             b.partition(T1, 1, [2, 3], [2, 3], leader=2, leader_epoch=0, partition_epoch=0))


def test_a_topic_gives_partition_events_and_one_topic_event(fed):
    create_orders(fed)
    events = fed.take_events()
    assert summary(events) == [("partition:orders:0", "upsert", 22), ("partition:orders:1", "upsert", 23),
                               ("topic:orders", "upsert", 23)]
    assert events[0].data == PartitionState(topic="orders", partition=0, leader=1, leader_epoch=0, isr=(1, 2),
                                            controller_epoch=EPOCH, leader_recovery_state=0, partition_epoch=0,
                                            elr=(), last_known_elr=(), remaining=(1, 2))
    assert events[2].data == TopicState(topic="orders", topic_id=T1, replicas={0: (1, 2), 1: (2, 3)}, adding={},
                                        removing={}, config={"retention.ms": "1000"})
    assert fed.take_events() == []


def test_partition_changes(fed):
    create_orders(fed)
    fed.take_events()

    fed.feed(30, b.partition_change(T1, 0, isr=[1]))                 # ISR shrink
    (e,) = fed.take_events()
    assert (e.entity, e.position) == ("partition:orders:0", 30)
    assert (e.data.isr, e.data.leader, e.data.leader_epoch, e.data.partition_epoch) == ((1,), 1, 0, 1)

    fed.feed(31, b.partition_change(T1, 0, leader=2, isr=[2]))      # a new leader: the leader epoch moves
    (e,) = fed.take_events()
    assert (e.data.isr, e.data.leader, e.data.leader_epoch, e.data.partition_epoch) == ((2,), 2, 1, 2)

    fed.feed(32, b.partition_change(T1, 0, leader=-1))              # no leader
    (e,) = fed.take_events()
    assert (e.data.leader, e.data.leader_epoch, e.data.isr) == (-1, 2, (2,))

    fed.feed(33, b.partition_change(T1, 0, leader=2, recovery=1, version=2, elr=[1], last_known_elr=[3]))
    (e,) = fed.take_events()
    assert (e.data.leader, e.data.leader_epoch, e.data.leader_recovery_state) == (2, 3, 1)
    assert (e.data.elr, e.data.last_known_elr, e.position) == ((1,), (3,), 33)

    fed.feed(34, b.partition_change(T1, 0, version=2, elr=[]))
    (e,) = fed.take_events()
    assert (e.data.elr, e.data.last_known_elr, e.data.leader_recovery_state) == ((), (3,), 1)


def test_a_partition_recovering_from_an_unclean_election_and_an_empty_isr(fed):
    fed.feed(1, b.topic("t", T1), b.partition(T1, 0, [1, 2], [1], leader=1, recovery=1))
    assert fed.take_events()[0].data.leader_recovery_state == 1
    fed.feed(3, b.partition_change(T1, 0, leader=-1, isr=[], version=2, elr=[1]))
    (e,) = fed.take_events()
    assert (e.data.leader, e.data.isr, e.data.elr, e.data.leader_recovery_state) == (-1, (), (1,), 1)
    fed.feed(4, b.partition_change(T1, 0, leader=2, isr=[2], recovery=0))
    (e,) = fed.take_events()
    assert (e.data.leader, e.data.isr, e.data.leader_recovery_state) == (2, (2,), 0)


def test_an_assignment_written_again_unchanged_gives_no_topic_event(fed):
    create_orders(fed)
    fed.take_events()
    fed.feed(30, b.partition_change(T1, 0, replicas=[1, 2], adding=[], removing=[]))
    assert summary(fed.take_events()) == [("partition:orders:0", "upsert", 30)]


def test_a_reassignment_updates_the_topic_state(fed):
    create_orders(fed)
    fed.take_events()
    fed.feed(40, b.partition_change(T1, 1, replicas=[2, 3, 4], adding=[4], removing=[]))
    events = fed.take_events()
    assert summary(events) == [("partition:orders:1", "upsert", 40), ("topic:orders", "upsert", 40)]
    assert events[1].data.replicas == {0: (1, 2), 1: (2, 3, 4)}
    assert events[1].data.adding == {1: (4,)} and events[1].data.removing == {}

    fed.feed(41, b.partition_change(T1, 1, isr=[2, 3, 4]))        # catching up: no topic event
    assert summary(fed.take_events()) == [("partition:orders:1", "upsert", 41)]

    fed.feed(41, b.partition_change(T1, 1, replicas=[3, 2, 4]))   # only the replicas: adding stays
    assert fed.take_events()[-1].data.adding == {1: (4,)}
    fed.feed(41, b.partition_change(T1, 1, removing=[3]))          # only removing: adding stays
    events = fed.take_events()
    assert (events[-1].data.adding, events[-1].data.removing) == ({1: (4,)}, {1: (3,)})
    fed.feed(41, b.partition_change(T1, 1, adding=[]))             # only adding: removing stays
    events = fed.take_events()
    assert (events[-1].data.adding, events[-1].data.removing) == ({}, {1: (3,)})
    fed.feed(41, b.partition_change(T1, 1, replicas=[2, 3, 4], adding=[4], removing=[]))
    fed.take_events()

    fed.feed(42, b.partition_change(T1, 1, replicas=[4, 3], removing=[2], adding=[]),   # one fetch:
             b.partition_change(T1, 1, removing=[], isr=[4, 3], leader=4))           # one topic event
    events = fed.take_events()
    assert summary(events) == [("partition:orders:1", "upsert", 42), ("partition:orders:1", "upsert", 43),
                               ("topic:orders", "upsert", 43)]
    assert (events[2].data.replicas[1], events[2].data.adding, events[2].data.removing) == ((4, 3), {}, {})


def test_a_partition_says_which_replicas_it_keeps_while_it_moves_and_after(fed):
    """The record that completes a move drops the removing replica from the replicas and the ISR
    at once: the state it gives no longer keeps that replica."""
    create_orders(fed)
    assert [e.data.remaining for e in fed.take_events()[:2]] == [(1, 2), (2, 3)]
    fed.feed(40, b.partition_change(T1, 1, replicas=[2, 3, 4], adding=[4], removing=[2]))
    fed.feed(41, b.partition_change(T1, 1, isr=[2, 3, 4]))
    fed.feed(42, b.partition_change(T1, 1, replicas=[3, 4], adding=[], removing=[], isr=[3, 4], leader=3))
    moving, caught_up, done = (e.data for e in fed.take_events() if e.kind == "partition")
    assert (moving.remaining, caught_up.remaining) == ((3, 4), (3, 4))
    assert (done.isr, done.remaining) == ((3, 4), (3, 4))


def test_a_change_of_an_unknown_partition_or_topic_is_ignored(fed):
    create_orders(fed)
    fed.take_events()
    fed.feed(30, b.partition_change(T1, 9, isr=[1]), b.partition_change(T2, 0, leader=1),
             b.partition(T2, 0, [1], [1], leader=1))
    assert fed.take_events() == []
    assert fed.unmatched == [("partition_change", 30), ("partition_change", 31)]


def test_config_changes_give_a_topic_event_and_other_resources_none(fed):
    create_orders(fed)
    fed.take_events()
    fed.feed(30, b.config(2, "orders", "retention.ms", None), b.config(2, "orders", "cleanup.policy", "compact"),
             b.config(4, "1", "log.cleaner.threads", "2"), b.config(2, "nope", "x", "y"))
    (e,) = fed.take_events()
    assert (e.entity, e.position, e.data.config) == ("topic:orders", 31, {"cleanup.policy": "compact"})
    # a broker's (type 4) or a client quota's config of the same name is not the topic's
    fed.feed(40, b.config(4, "orders", "log.cleaner.threads", "2"), b.config(1, "orders", "a", "b"))
    assert fed.take_events() == []


def test_a_topic_removed_and_created_again_in_one_window(fed):
    fed.feed(1, b.topic("orders", T1), b.partition(T1, 0, [1], [1], leader=1), b.remove_topic(T1),
             b.topic("orders", T2), b.partition(T2, 0, [2], [2], leader=2))
    events = fed.take_events()
    assert summary(events) == [
        ("partition:orders:0", "upsert", 2), ("topic:orders", "upsert", 2),
        ("partition:orders:0", "delete", 3), ("topic:orders", "delete", 3),
        ("partition:orders:0", "upsert", 5), ("topic:orders", "upsert", 5)]
    topics = [e for e in events if e.kind == "topic"]
    assert [e.data.topic_id if e.data else None for e in topics] == [T1, None, T2]
    assert events[4].data.leader == 2
    assert list(fed.image.topics) == [T2] and fed.image.names == {"orders": T2}


def test_a_topic_of_an_existing_name_replaces_it(fed):
    create_orders(fed)
    fed.take_events()
    fed.feed(30, b.topic("orders", T2), b.partition(T2, 0, [3], [3], leader=3))
    events = fed.take_events()
    assert summary(events) == [("partition:orders:0", "delete", 30), ("partition:orders:1", "delete", 30),
                               ("topic:orders", "delete", 30), ("partition:orders:0", "upsert", 31),
                               ("topic:orders", "upsert", 31)]
    assert events[-1].data == TopicState(topic="orders", topic_id=T2, replicas={0: (3,)})


def test_a_topic_id_taken_by_another_name_replaces_the_topic_it_named(fed):
    """Found by tests/fuzz/kraft.py: the old name kept pointing at the id, and its next event
    was a KeyError."""
    create_orders(fed)
    fed.take_events()
    fed.feed(30, b.topic("payments", T1), b.remove_topic(T1))
    assert [e for e in summary(fed.take_events()) if e[0].startswith("topic")] == [
        ("topic:orders", "delete", 30), ("topic:payments", "upsert", 30), ("topic:payments", "delete", 31)]
    assert fed.image.topics == {} and fed.image.names == {}


def test_remove_topic_of_a_published_topic(fed):
    create_orders(fed)
    fed.take_events()
    fed.feed(30, b.remove_topic(T1), b.remove_topic(T3))
    assert summary(fed.take_events()) == [("partition:orders:0", "delete", 30),
                                            ("partition:orders:1", "delete", 30), ("topic:orders", "delete", 30)]
    assert fed.image.partitions == {} and fed.image.configs == {}


# ---------------------------------------------------------------- transactions

def test_records_of_a_transaction_apply_at_its_end(fed):
    fed.feed(1, b.begin_transaction("create"), b.topic("orders", T1), b.partition(T1, 0, [1], [1], leader=1))
    assert fed.image.in_transaction()
    assert fed.take_events() == [] and fed.image.topics == {}
    fed.feed(4, b.partition(T1, 1, [1], [1], leader=1), b.end_transaction())
    assert not fed.image.in_transaction()
    assert summary(fed.take_events()) == [("partition:orders:0", "upsert", 3), ("partition:orders:1", "upsert", 4),
                                            ("topic:orders", "upsert", 4)]


def test_records_of_an_aborted_transaction_apply_nothing(fed):
    fed.feed(1, b.begin_transaction(), b.topic("orders", T1), b.partition(T1, 0, [1], [1], leader=1),
             b.abort_transaction("controller failover"))
    assert not fed.image.in_transaction()
    assert fed.take_events() == []
    assert fed.image.topics == {} and fed.image.partitions == {}
    fed.feed(5, b.topic("after", T2))                   # records after the abort apply as usual
    assert summary(fed.take_events()) == [("topic:after", "upsert", 5)]


# ---------------------------------------------------------------- ClearElr

def elr_topics(fed: Fed) -> None:
    fed.feed(1, b.topic("a", T1), b.topic("b", T2),
             b.partition(T1, 0, [1, 2], [1], leader=1, version=2, elr=[2]),
             b.partition(T1, 1, [1, 2], [1, 2], leader=1, version=2),                       # no ELR: unchanged
             b.partition(T2, 0, [1, 2], [1], leader=1, version=2, last_known_elr=[2]))
    fed.take_events()


def test_clear_elr_of_one_topic(fed):
    elr_topics(fed)
    fed.feed(10, b.clear_elr("a"))
    events = fed.take_events()
    assert summary(events) == [("partition:a:0", "upsert", 10)]
    assert (events[0].data.elr, events[0].data.last_known_elr, events[0].data.isr) == ((), (), (1,))
    assert fed.image.partitions[(T2, 0)].last_known_elr == (2,)


def test_clear_elr_of_every_topic(fed):
    elr_topics(fed)
    fed.feed(10, b.clear_elr(""))
    assert sorted(summary(fed.take_events())) == [("partition:a:0", "upsert", 10), ("partition:b:0", "upsert", 10)]
    assert all(not p.elr and not p.last_known_elr for p in fed.image.partitions.values())


def test_clear_elr_of_a_topic_the_image_does_not_hold_changes_nothing(fed):
    # Kafka never writes it, but a TopicRecord kmon could not read (a newer version) must not stop the fold
    elr_topics(fed)
    fed.feed(10, b.clear_elr("gone"))
    assert fed.take_events() == []


# ---------------------------------------------------------------- the controller

def test_leader_change_gives_a_controller_event_once_per_state(fed):
    fed.leader_change(2, at(5, epoch=7))
    (e,) = fed.take_events()
    assert (e.kind, e.entity, e.op, e.data, e.position) == ("controller", "controller", "upsert",
                                                           ControllerState(2, 7), 5)
    fed.leader_change(2, at(9, epoch=7))
    assert fed.take_events() == []
    fed.leader_change(3, at(12, epoch=8))
    assert [(e.data, e.position) for e in fed.take_events()] == [(ControllerState(3, 8), 12)]


# ---------------------------------------------------------------- snapshots

def test_a_snapshot_is_silent_then_sent_whole_with_deletions(fed):
    # published before: broker 1, broker 9, the topic "old" and its partition, the controller
    fed.leader_change(1, at(0, epoch=1))
    fed.feed(1, register(1, epoch=1), register(9, epoch=2), b.topic("old", T1),
             b.partition(T1, 0, [1], [1], leader=1))
    before = fed.take_events()
    assert len(before) == 5

    fed.resync()
    fed.silent = True
    fed.feed(100, register(1, epoch=1, fenced=False), register(2, epoch=50), b.topic("new", T2),
             b.config(2, "new", "retention.ms", "5"), b.partition(T2, 0, [1, 2], [1, 2], leader=2, leader_epoch=3),
             b.partition(T2, 1, [2, 1], [2, 1], leader=2), b.feature_level("metadata.version", 27))
    assert fed.take_events() == []                        # silent: nothing
    fed.silent = False

    snap_at = LogMeta(199, 6)
    events = fed.image.snapshot_events(Resync("kraft-1", "reconnect", 500), snap_at, 900, fed.published)
    begin = events[0]
    assert (begin.kind, begin.entity, begin.op, begin.observed_ms, begin.snapshot_id) == (
        "snapshot_begin", "snapshot:kraft", "marker", 500, "kraft-1")
    assert begin.data == SnapshotMarker("kraft-1", "reconnect")
    assert all(e.snapshot_id == "kraft-1" for e in events)
    assert [(e.entity, e.op) for e in events[1:]] == [
        # the controller is no record of a snapshot: the last one known stands (never deleted, which
        # would reset its counter), until the log after the snapshot says who leads
        ("controller", "upsert"),
        ("broker:1", "upsert"), ("broker:2", "upsert"), ("topic:new", "upsert"),
        ("partition:new:0", "upsert"), ("partition:new:1", "upsert"),
        # published before the reset and not in the snapshot
        ("broker:9", "delete"), ("topic:old", "delete"), ("partition:old:0", "delete")]
    by_entity = {e.entity: e for e in events[1:]}
    assert by_entity["broker:1"].data.fenced is False and by_entity["broker:1"].position == 100
    assert by_entity["topic:new"].data == TopicState(topic="new", topic_id=T2, replicas={0: (1, 2), 1: (2, 1)},
                                                     config={"retention.ms": "5"})
    assert by_entity["partition:new:0"].data.leader_epoch == 3 and by_entity["partition:new:0"].position == 104
    assert all(by_entity[k].log == snap_at and by_entity[k].data is None
               for k in ("broker:9", "topic:old", "partition:old:0"))
    assert by_entity["controller"].data == ControllerState(1, 1)
    assert fed.image.features == {"kraft.version": 0, "metadata.version": 27}   # a static quorum: no KRaftVersion

    end = fed.image.end_marker(Resync("kraft-1", "reconnect", 500), LogMeta(210, 6), 900)
    assert (end.kind, end.entity, end.op, end.snapshot_id, end.position) == ("snapshot_end", "snapshot:kraft",
                                                                             "marker", "kraft-1", 210)
    assert end.data == SnapshotMarker("kraft-1", "reconnect", entities=6, begun_ms=500)

    # after the snapshot, what it sent is what is published: its deletions are sent, older ones are not again
    fed.take_events()
    fed.feed(211, b.remove_topic(T2), b.unregister_broker(9, 2), b.unregister_broker(2, 50))
    assert summary(fed.take_events()) == [("partition:new:0", "delete", 211), ("partition:new:1", "delete", 211),
                                            ("topic:new", "delete", 211), ("broker:2", "delete", 213)]


def test_a_second_snapshot_deletes_nothing_it_still_holds(fed):
    fed.feed(1, register(1), b.topic("t", T1), b.partition(T1, 0, [1], [1], leader=1))
    fed.take_events()
    fed.resync()
    fed.silent = True
    fed.feed(1, register(1), b.topic("t", T1), b.partition(T1, 0, [1], [1], leader=1))
    fed.silent = False
    events = fed.image.snapshot_events(Resync("s2", "start", 1), LogMeta(3, 1), NOW_MS, fed.published)
    assert [(e.entity, e.op) for e in events] == [("snapshot:kraft", "marker"), ("broker:1", "upsert"),
                                                  ("topic:t", "upsert"), ("partition:t:0", "upsert")]


def test_a_deleted_entity_is_not_deleted_again_by_a_later_snapshot(fed):
    create_orders(fed)
    fed.feed(30, b.remove_topic(T1))
    fed.take_events()
    fed.resync()
    events = fed.image.snapshot_events(Resync("s", "reconnect", 1), LogMeta(31, 1), NOW_MS, fed.published)
    assert [(e.entity, e.op) for e in events] == [("snapshot:kraft", "marker")]


def test_deletions_of_entities_never_sent_are_not_sent(fed):
    fed.silent = True
    create_orders(fed)
    assert fed.take_events() == []
    fed.silent = False
    fed.feed(30, b.remove_topic(T1))
    assert fed.take_events() == []


def test_unknown_records_are_collected_not_applied(fed):
    fed.feed(1, b.framed(99, 0, b""), b.topic("t", T1)[:2] + b.uvarint(1) + b"x")
    assert fed.unknown == [(99, 0, 1), (2, 1, 2)]
    assert fed.take_events() == [] and fed.image.topics == {}
