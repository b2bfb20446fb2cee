"""A Kafka cluster's znodes in a FakeZk (kafka_tree, add_topic, set_state) and a ZkTree's snapshot of them."""
from __future__ import annotations

from collectors.zk.tree import Round, ZkTree
from collectors.zk.znodes import ZkPaths
from kmon.events import Event
from tests.unit.fakes import FakeZk

PATHS = ZkPaths("/kafka")


def kafka_tree() -> FakeZk:
    zk = FakeZk()
    zk.set("/kafka/controller_epoch", b"3")
    zk.set("/kafka/controller", {"version": 1, "brokerid": 1, "timestamp": "1700000000000"})
    for b in (1, 2):
        zk.set(f"/kafka/brokers/ids/{b}", {"version": 5, "host": "h", "port": 9092 + b, "jmx_port": -1,
                                          "endpoints": [f"PLAINTEXT://h:{9092 + b}"]})
    add_topic(zk, "orders", {0: [1, 2], 1: [2, 1]})
    for d in ("/kafka/admin/delete_topics", "/kafka/isr_change_notification"):
        zk.set(d, b"")
    return zk


def add_topic(zk: FakeZk, topic: str, assignment: dict[int, list[int]]) -> None:
    zk.set(f"/kafka/config/topics/{topic}", {"version": 1, "config": {}})
    zk.set(f"/kafka/brokers/topics/{topic}",
           {"version": 2, "partitions": {str(p): r for p, r in assignment.items()}})
    for p, replicas in assignment.items():
        set_state(zk, topic, p, leader=replicas[0], isr=replicas)


def set_state(zk: FakeZk, topic: str, p: int, leader: int, isr: list[int], epoch: int = 0) -> None:
    zk.set(f"/kafka/brokers/topics/{topic}/partitions/{p}/state",
           {"version": 1, "leader": leader, "leader_epoch": epoch, "isr": isr, "controller_epoch": 3})


def snapshot(tree: ZkTree, zk: FakeZk) -> list[Event]:
    rnd = Round(full=True)
    for path in tree.roots():
        rnd.follow(path)
    zk.read(tree, rnd)
    return tree.snapshot(rnd, "s1", "start", 1, 2)
