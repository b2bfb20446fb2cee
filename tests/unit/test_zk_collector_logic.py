"""The pure half of the ZooKeeper collector: which events a sequence of reads implies."""
from __future__ import annotations

import itertools
from typing import Callable

import pytest

from collectors.zk.tree import Read, Round, ZkTree, version_gap
from kmon.events import ControllerState, Event
from kmon.history import CONTROLLER_CHANGES
from streaming.fold.entity import apply_event
from tests.unit.fakes import FakeZk
from tests.unit.zk_builders import PATHS, add_topic, kafka_tree, set_state, snapshot


def follow(tree: ZkTree, zk: FakeZk, *paths: str,
           meanwhile: Callable[[str], None] = lambda path: None) -> tuple[list[Event], Round]:
    rnd = Round(full=False)
    for path in paths:
        rnd.follow(path)
    zk.read(tree, rnd, meanwhile)
    return tree.changes(rnd, 3), rnd


@pytest.fixture
def zk() -> FakeZk:
    return kafka_tree()


@pytest.fixture
def tree(zk: FakeZk) -> ZkTree:
    tree = ZkTree(PATHS, "c1")
    snapshot(tree, zk)
    return tree


def test_version_gap() -> None:
    assert version_gap((10, 3), 10, 4, live=True) == 0
    assert version_gap((10, 3), 10, 7, live=True) == 3       # versions 4-6 coalesced
    assert version_gap((10, 3), 10, 3, live=False) == 0      # the same version again
    assert version_gap((10, 3), 20, 2, live=True) == 2       # re-created, versions 0-1 missed
    assert version_gap(None, 20, 2, live=True) == 2          # created while watched
    assert version_gap(None, 20, 2, live=False) == 0         # first seen in a snapshot: unknown


def test_snapshot_brackets_every_entity_in_order(zk: FakeZk) -> None:
    events = snapshot(ZkTree(PATHS, "c1"), zk)
    assert [e.entity for e in events] == [
        "snapshot:zk", "controller", "broker:1", "broker:2", "topic:orders",
        "partition:orders:0", "partition:orders:1", "snapshot:zk"]
    begin, *entities, end = events
    assert (begin.kind, end.kind, end.data.entities, end.data.begun_ms) == ("snapshot_begin", "snapshot_end", 6, 1)
    assert {e.snapshot_id for e in events} == {"s1"} and all(e.op == "upsert" for e in entities)
    controller = entities[0]
    assert controller.data == ControllerState(1, 3, 1700000000000)
    assert controller.zxid == zk.nodes["/kafka/controller"][2]   # newer than the epoch
    assert controller.message_key == "c1/controller"
    assert end.zxid == max(e.zxid for e in entities)


def test_unchanged_reread_emits_nothing_and_a_change_one_event(tree: ZkTree, zk: FakeZk) -> None:
    state = "/kafka/brokers/topics/orders/partitions/0/state"
    assert follow(tree, zk, state)[0] == []
    set_state(zk, "orders", 0, leader=1, isr=[1], epoch=1)
    [event], _ = follow(tree, zk, state)
    assert (event.entity, event.data.isr, event.zxid) == ("partition:orders:0", (1,), zk.zxid)
    assert (event.znode.path, event.znode.version, event.znode.version_gap) == (state, 1, 0)


def test_coalesced_writes_show_as_a_version_gap(tree: ZkTree, zk: FakeZk) -> None:
    state = "/kafka/brokers/topics/orders/partitions/1/state"
    for epoch in (1, 2, 3):
        set_state(zk, "orders", 1, leader=2, isr=[2], epoch=epoch)
    [event], _ = follow(tree, zk, state)
    assert (event.znode.version, event.znode.version_gap) == (3, 2)


def test_topic_combines_assignment_and_config(tree: ZkTree, zk: FakeZk) -> None:
    zk.set("/kafka/config/topics/orders", {"version": 1, "config": {"min.insync.replicas": "2"}})
    [event], _ = follow(tree, zk, "/kafka/config/topics/orders")
    assert event.data.config == {"min.insync.replicas": "2"} and event.data.replicas == {0: (1, 2), 1: (2, 1)}
    assert event.zxid == zk.zxid and event.znode.path == "/kafka/config/topics/orders"


def test_new_topic_and_added_partition_are_followed(tree: ZkTree, zk: FakeZk) -> None:
    add_topic(zk, "pay", {0: [1]})
    events, _ = follow(tree, zk, "/kafka/brokers/topics")
    assert [e.entity for e in events] == ["topic:pay", "partition:pay:0"]
    assert events[1].znode.version_gap == 0
    zk.set("/kafka/brokers/topics/pay", {"version": 2, "partitions": {"0": [1], "1": [2]}})
    events, _ = follow(tree, zk, "/kafka/brokers/topics/pay")   # state znode not created yet
    assert [e.entity for e in events] == ["topic:pay"]
    assert tree.read_mode("/kafka/brokers/topics/pay/partitions/1/state") is Read.WATCH_CREATE
    set_state(zk, "pay", 1, leader=2, isr=[2])
    [event], _ = follow(tree, zk, "/kafka/brokers/topics/pay/partitions/1/state")
    assert event.entity == "partition:pay:1"


def test_only_the_partitions_of_a_topic_queued_for_deletion_say_so(tree: ZkTree, zk: FakeZk) -> None:
    set_state(zk, "orders", 1, leader=2, isr=[2], epoch=1)
    [shrunk], _ = follow(tree, zk, "/kafka/brokers/topics/orders/partitions/1/state")
    assert shrunk.data.deleting is False
    add_topic(zk, "pay", {0: [1, 2]})
    follow(tree, zk, "/kafka/brokers/topics")
    zk.set("/kafka/admin/delete_topics/pay", b"")
    follow(tree, zk, "/kafka/admin/delete_topics")
    set_state(zk, "orders", 1, leader=2, isr=[2, 1], epoch=2)
    set_state(zk, "pay", 0, leader=-1, isr=[2], epoch=1)
    events, _ = follow(tree, zk, "/kafka/brokers/topics/orders/partitions/1/state",
                       "/kafka/brokers/topics/pay/partitions/0/state")
    assert {e.entity: e.data.deleting for e in events} == {"partition:orders:1": False, "partition:pay:0": True}
    # a snapshot while the deletion runs says it too
    assert {e.entity: e.data.deleting for e in snapshot(tree, zk) if e.kind == "partition"} == {
        "partition:orders:0": False, "partition:orders:1": False, "partition:pay:0": True}


def test_a_partition_says_which_replicas_it_keeps_while_a_move_removes_one(tree: ZkTree, zk: FakeZk) -> None:
    """The controller takes a removing replica out of the ISR before it writes the new assignment:
    the partition's state read then no longer keeps it."""
    set_state(zk, "orders", 0, leader=1, isr=[1, 2], epoch=1)
    [before], _ = follow(tree, zk, "/kafka/brokers/topics/orders/partitions/0/state")
    assert before.data.remaining == (1, 2)
    zk.set("/kafka/brokers/topics/orders", {"version": 2, "partitions": {"0": [1, 2, 3], "1": [2, 1]},
                                            "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [2]}})
    follow(tree, zk, "/kafka/brokers/topics/orders")
    set_state(zk, "orders", 0, leader=1, isr=[1, 3], epoch=2)
    [removed], _ = follow(tree, zk, "/kafka/brokers/topics/orders/partitions/0/state")
    assert (removed.data.isr, removed.data.remaining) == ((1, 3), (1, 3))
    # and so does a snapshot; the other partition keeps all of its replicas
    assert {e.entity: e.data.remaining for e in snapshot(tree, zk) if e.kind == "partition"} == {
        "partition:orders:0": (1, 3), "partition:orders:1": (2, 1)}


def test_deleted_topic_deletes_partitions_then_topic_at_the_listing_pzxid(tree: ZkTree, zk: FakeZk) -> None:
    zk.set("/kafka/admin/delete_topics/orders", b"")
    [marker], _ = follow(tree, zk, "/kafka/admin/delete_topics")
    assert (marker.entity, marker.op) == ("topic_deletion:orders", "upsert")
    # being deleted: a vanished partition state gets no exists-watch
    assert tree.read_mode("/kafka/brokers/topics/orders/partitions/0/state") is Read.WATCH
    # the controller takes the replicas offline: the states say why their ISRs shrink
    set_state(zk, "orders", 0, leader=-1, isr=[2], epoch=1)
    [offline], _ = follow(tree, zk, "/kafka/brokers/topics/orders/partitions/0/state")
    assert (offline.data.isr, offline.data.deleting) == ((2,), True)
    zk.delete("/kafka/brokers/topics/orders")
    zk.delete("/kafka/config/topics/orders")
    zk.delete("/kafka/admin/delete_topics/orders")
    events, _ = follow(tree, zk, "/kafka/brokers/topics", "/kafka/admin/delete_topics")
    assert [(e.entity, e.op) for e in events] == [
        ("partition:orders:0", "delete"), ("partition:orders:1", "delete"), ("topic:orders", "delete"),
        ("topic_deletion:orders", "delete")]
    assert all(e.data is None for e in events)
    assert {e.zxid for e in events[:3]} == {zk.nodes["/kafka/brokers/topics"][4]}   # the topic znode's deletion
    assert tree.read_mode("/kafka/brokers/topics/orders/partitions/0/state") is Read.IGNORE


def test_snapshot_after_blindness_deletes_what_vanished_and_repeats_the_rest(tree: ZkTree, zk: FakeZk) -> None:
    before = {e.entity: e.zxid for e in snapshot(ZkTree(PATHS, "c1"), zk)}
    zk.delete("/kafka/brokers/ids/2")
    events = snapshot(tree, zk)
    deletes = [e for e in events if e.op == "delete"]
    assert [(e.entity, e.snapshot_id) for e in deletes] == [("broker:2", "s1")]
    assert events.index(deletes[0]) == len(events) - 2   # inside the markers, after the upserts
    upserts = {e.entity: e.zxid for e in events if e.op == "upsert"}
    assert upserts == {k: v for k, v in before.items() if k not in ("broker:2", "snapshot:zk")}
    assert all(e.znode.version_gap == 0 for e in events if e.op == "upsert")


def test_controller_gone_is_a_state_with_the_deletion_zxid(tree: ZkTree, zk: FakeZk) -> None:
    zk.delete("/kafka/controller")
    [event], _ = follow(tree, zk, "/kafka/controller")
    assert (event.op, event.data) == ("upsert", ControllerState(-1, 3))
    assert event.zxid == zk.zxid   # the chroot's pzxid: the deletion itself


def test_controller_made_again_unseen_tells_the_spell_without_one_first(tree: ZkTree, zk: FakeZk) -> None:
    # ZooKeeper restarted: the controller's session ended and another broker was elected, the
    # deletion never notified; the next read finds a new registration (another czxid)
    zk.delete("/kafka/controller")
    gone = zk.zxid
    zk.set("/kafka/controller", {"version": 1, "brokerid": 2, "timestamp": "1700000009000"})
    zk.set("/kafka/controller_epoch", b"4")
    events, _ = follow(tree, zk, "/kafka/controller", "/kafka/controller_epoch")
    assert [(e.data.broker_id, e.data.epoch) for e in events] == [(-1, 3), (2, 4)]
    assert gone <= events[0].zxid < zk.nodes["/kafka/controller"][1] < events[1].zxid
    # the same, seen by a resync: before its snapshot, which it precedes
    zk.delete("/kafka/controller")
    zk.set("/kafka/controller", {"version": 1, "brokerid": 2, "timestamp": "1700000019000"})
    events = snapshot(tree, zk)
    assert events[0].data == ControllerState(-1, 4) and events[0].snapshot_id is None
    assert events[1].kind == "snapshot_begin"
    # a registration read again, or after its deletion was seen, tells nothing more
    assert follow(tree, zk, "/kafka/controller")[0] == []
    zk.delete("/kafka/controller")
    follow(tree, zk, "/kafka/controller")
    zk.set("/kafka/controller", {"version": 1, "brokerid": 1, "timestamp": "1700000029000"})
    [event], _ = follow(tree, zk, "/kafka/controller")
    assert event.data.broker_id == 1


def test_an_election_between_the_registration_and_epoch_reads_counts_once_for_any_number_of_collectors(
        zk: FakeZk) -> None:
    # The controller's session ends; its registration is read missing, then a new controller is
    # elected (registration and epoch bump in one multi-op) before the epoch is read.
    trees = {name: ZkTree(PATHS, "c1") for name in ("a", "b")}
    first = [e for tree in trees.values() for e in snapshot(tree, zk) if e.entity == "controller"][0]
    zk.delete("/kafka/controller")
    gone = zk.zxid

    def elect(path: str) -> None:
        if path == "/kafka/controller_epoch" and "/kafka/controller" not in zk.nodes:
            zk.set("/kafka/controller", {"version": 1, "brokerid": 2, "timestamp": "1700000009000"})
            zk.set("/kafka/controller_epoch", b"4")
            zk.zxid -= 1   # one transaction
            zk.nodes["/kafka/controller_epoch"][2] = zk.nodes["/kafka/controller"][1] = zk.zxid

    # a reads the registration missing and the epoch after the election; b reads both before it
    told = {"b": follow(trees["b"], zk, "/kafka/controller")[0]}
    assert [(e.data, e.zxid) for e in told["b"]] == [(ControllerState(-1, 3), gone)]
    told["a"] = follow(trees["a"], zk, "/kafka/controller", meanwhile=elect)[0]
    told["b"] += follow(trees["b"], zk, "/kafka/controller")[0]
    election = zk.nodes["/kafka/controller"][1]
    # a tells the spell without a controller as it was, then reads the registration again: no
    # state the cluster was never in ("none, epoch 4") at the election's zxid
    assert [(e.data.broker_id, e.data.epoch, e.zxid) for e in told["a"]] == [(-1, 3, gone), (2, 4, election)]
    assert [(e.data.broker_id, e.data.epoch, e.zxid) for e in told["b"]] == [(-1, 3, gone), (2, 4, election)]
    assert follow(trees["a"], zk, "/kafka/controller")[0] == []
    # whatever order the events topic holds the two collectors' events in, one election folds
    # into the two changes the cluster made (old -> none -> new), as ZooKeeper's log has them
    for order in set(itertools.permutations(["a", "a", "b", "b"])):
        queues = {name: list(events) for name, events in told.items()}
        record, *_ = apply_event(None, first)
        for name in order:
            record, *_ = apply_event(record, queues[name].pop(0))
        assert record.state.broker_id == 2 and record.counters[CONTROLLER_CHANGES] == 2, order


def test_malformed_znode_keeps_last_state_and_is_reported(tree: ZkTree, zk: FakeZk) -> None:
    zk.set("/kafka/admin/reassign_partitions", b"{not json")
    events, rnd = follow(tree, zk, "/kafka/admin/reassign_partitions")
    assert events == [] and [r.value for r, _ in rnd.malformed] == ["reassignment"]
    assert "/kafka/admin/reassign_partitions" in str(rnd.malformed[0][1])
    zk.set("/kafka/admin/reassign_partitions", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [2, 1]}]})
    [event], _ = follow(tree, zk, "/kafka/admin/reassign_partitions")
    assert event.data.partitions == {"orders:0": (2, 1)} and event.znode.version == 1
    zk.set("/kafka/config/topics/orders", {"config": {"retention.ms": 5}})   # a number: wrong type
    events, rnd = follow(tree, zk, "/kafka/config/topics/orders")
    assert events == [] and [r.value for r, _ in rnd.malformed] == ["topic_config"]
    snap = {e.entity: e for e in snapshot(tree, zk)}
    assert snap["topic:orders"].data.config == {}   # the last valid config stands


def test_badly_named_children_are_reported_not_followed(tree: ZkTree, zk: FakeZk) -> None:
    zk.set("/kafka/brokers/ids/not-a-number", {"version": 5})
    events, rnd = follow(tree, zk, "/kafka/brokers/ids")
    assert events == [] and [r.value for r, _ in rnd.malformed] == ["broker_ids"]
    zk.delete("/kafka/brokers/ids/not-a-number")
    assert follow(tree, zk, "/kafka/brokers/ids")[0] == []


def test_a_broker_registered_again_unseen_was_gone_in_between(zk: FakeZk) -> None:
    """kmon stopped (or a ZooKeeper restart hid the deletion) while broker 2 restarted: its registration is
    another znode, the same bytes. The state carries the znode's creation zxid, so the fold tells it even
    from a collector that never saw the old one."""
    broker_2 = lambda events: [e for e in events if e.entity == "broker:2"]
    [seen] = broker_2(snapshot(ZkTree(PATHS, "c1"), zk))
    record, _, told = apply_event(None, seen)
    registration = zk.nodes["/kafka/brokers/ids/2"][0]
    zk.delete("/kafka/brokers/ids/2")
    zk.set("/kafka/brokers/ids/2", registration)
    [again] = broker_2(snapshot(ZkTree(PATHS, "c1"), zk))   # a collector started anew
    assert again.data.registration_zxid == zk.nodes["/kafka/brokers/ids/2"][1] > seen.data.registration_zxid
    record, _, told = apply_event(record, again)
    assert [(t.kind, t.broker) for t in told] == [("broker_gone", 2), ("broker_registered", 2)]
    [reread] = broker_2(snapshot(ZkTree(PATHS, "c1"), zk))
    assert apply_event(record, reread)[2] == ()
