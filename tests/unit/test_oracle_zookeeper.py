"""The ZooKeeper-mode oracle: Kafka's znodes in ZooKeeper's transaction log -> the true transitions, on
logs written byte by byte (tests/unit/zk_txnlog_builders.py) and on a real one (tests/data/oracle/zk:
one broker under the chroot /kafka, a topic made, two restarts, the topic deleted and made again)."""
from __future__ import annotations

from pathlib import Path

from bench.oracle import OracleTransition
from bench.oracle.zk_txnlog import read_log
from bench.oracle.zookeeper import derive, transitions, znode_versions
from tests.unit.oracle_rows import T0, election, isr, row
from tests.unit.zk_txnlog_builders import (TxnLog, close_session, controller, create, delete, multi, partition_state,
                                           set_data, topic)

SAMPLE = Path(__file__).parents[1] / "data" / "oracle" / "zk"
STATE = "/brokers/topics/t/partitions/0/state"


def _derived(*records: tuple[int, bytes] | tuple[tuple[int, bytes], int], chroot: str = "") -> list[OracleTransition]:
    log = TxnLog()
    for item in records:
        record, session = item if isinstance(item[0], tuple) else (item, 0x100)  # type: ignore[misc]
        log.add(record, session)  # type: ignore[arg-type]
    return derive(read_log(log.bytes(), "log.1"), chroot)








def test_every_version_of_a_partition_state_is_judged_against_the_one_before() -> None:
    assert _derived(
        create("/brokers/topics/t", topic({0: [1, 2, 3]})),                   # 1
        create(STATE, partition_state(1, [1, 2, 3])),                         # 2: a first version: nothing
        set_data(STATE, partition_state(1, [1, 3])),                          # 3
        set_data(STATE, partition_state(3, [3], leader_epoch=1)),             # 4: 3 was in the ISR
        set_data(STATE, partition_state(2, [2], leader_epoch=2)),             # 5: 2 was not
        set_data(STATE, partition_state(-1, [2], leader_epoch=3)),            # 6: offline, no election
        set_data(STATE, partition_state(2, [2], leader_epoch=4)),             # 7: back, from the ISR it kept
        set_data(STATE, partition_state(2, [2, 1, 3], leader_epoch=4)),       # 8
        set_data(STATE, b'{"leader": 3'),                                     # 9: not Kafka's: 8 stands
        set_data(STATE, partition_state(1, [2, 1, 3], leader_epoch=5)),       # 10
    ) == [
        row(1, "topic_created", "topic:t", topic="t"),
        isr(3, "isr_shrink", 2, "1,2,3", "1,3", 0),
        isr(4, "isr_shrink", 1, "1,3", "3", 1),
        election(4, "leader_election", 1, 3, 1),
        isr(5, "isr_shrink", 3, "3", "2", 2),
        isr(5, "isr_expand", 2, "3", "2", 2),
        election(5, "unclean_leader_election", 3, 2, 2),
        election(7, "leader_election", -1, 2, 4),
        isr(8, "isr_expand", 1, "2", "2,1,3", 4),
        isr(8, "isr_expand", 3, "2", "2,1,3", 4),
        election(10, "leader_election", 2, 1, 5),
    ]


def test_a_topic_being_deleted_loses_its_replicas_uncounted_and_a_topic_made_again_starts_afresh() -> None:
    assert _derived(
        create("/brokers/topics/t", topic({0: [1, 2]})),                      # 1
        create(STATE, partition_state(1, [1, 2])),
        create("/admin/delete_topics/t"),
        set_data(STATE, partition_state(-1, [2], leader_epoch=1)),
        set_data(STATE, partition_state(-2, [], leader_epoch=2)),             # 5
        multi(delete(STATE), delete("/brokers/topics/t/partitions/0")),
        delete("/brokers/topics/t"),                                          # 7
        delete("/admin/delete_topics/t"),
        create("/brokers/topics/t", topic({0: [3]})),                         # 9
        create(STATE, partition_state(3, [3])),                               # 10: nothing of the old one
        set_data(STATE, partition_state(3, [3, 1])),                          # 11
    ) == [
        row(1, "topic_created", "topic:t", topic="t"),
        row(7, "topic_deleted", "topic:t", topic="t"),
        row(9, "topic_created", "topic:t", topic="t"),
        isr(11, "isr_expand", 1, "3", "3,1", 0),
    ]


def test_the_controller_and_the_brokers_under_a_chroot() -> None:
    one, two, other = 0x701, 0x702, 0x703

    def register(broker: int) -> tuple[int, bytes]:   # Kafka's checked ephemeral create
        path = f"/kafka/brokers/ids/{broker}"
        return multi(create(path, None, ephemeral=True), set_data(path, b'{"version":5}', 0))

    def elect(broker: int, epoch: int, timestamp: int = T0) -> tuple[int, bytes]:
        return multi(create("/kafka/controller", controller(broker, timestamp), ephemeral=True),
                     set_data("/kafka/controller_epoch", str(epoch).encode()))

    assert _derived(
        (register(1), one),                                                   # 1
        (create("/kafka/controller_epoch", b"0"), one),
        (elect(1, 1), one),                                                   # 3
        (register(2), two),
        (create("/controller", controller(3), ephemeral=True), other),        # 5: outside the chroot
        (delete("/kafka/controller"), one),                                   # 6: it resigned
        (elect(2, 2), two),                                                   # 7
        (close_session(listed=False), two),                                   # 8: its session expired
        (elect(1, 3), one),                                                   # 9
        (multi(delete("/kafka/controller"), create("/kafka/controller", controller(1, T0 + 1), ephemeral=True),
               set_data("/kafka/controller_epoch", b"4")), one),              # 10: re-elected itself
        (close_session("/kafka/brokers/ids/1", "/kafka/controller"), one),    # 11
        chroot="/kafka/",
    ) == [
        row(1, "broker_registered", "broker:1", broker=1),
        row(3, "controller_change", "controller", broker=1, old="-1", new="1", epoch=1),
        row(4, "broker_registered", "broker:2", broker=2),
        row(6, "controller_change", "controller", broker=-1, old="1", new="-1", epoch=1),
        row(7, "controller_change", "controller", broker=2, old="-1", new="2", epoch=2),
        row(8, "broker_gone", "broker:2", broker=2),
        row(8, "controller_change", "controller", broker=-1, old="2", new="-1", epoch=2),
        row(9, "controller_change", "controller", broker=1, old="-1", new="1", epoch=3),
        row(10, "controller_change", "controller", broker=1, old="1", new="1", epoch=4),
        row(11, "broker_gone", "broker:1", broker=1),
        row(11, "controller_change", "controller", broker=-1, old="1", new="-1", epoch=4),
    ]


def test_a_partition_moving_starts_and_finishes_once() -> None:
    assert _derived(
        create("/brokers/topics/t", topic({0: [1, 2], 1: [2, 3]})),
        set_data("/brokers/topics/t", topic({0: [1, 2, 3, 4], 1: [2, 3]}, adding={0: [3, 4]}, removing={0: [1, 2]})),
        set_data("/brokers/topics/t", b"not json"),
        # its target changed while it moves: the same move goes on
        set_data("/brokers/topics/t", topic({0: [1, 2, 3, 5], 1: [2, 3]}, adding={0: [3, 5]}, removing={0: [1, 2]})),
        set_data("/brokers/topics/t", topic({0: [3, 5], 1: [2, 3]})),          # 5
        set_data("/brokers/topics/t", topic({0: [3, 5], 1: [2, 3], 2: [1, 4]})),   # a partition added
        create("/brokers/topics/u", topic({0: [1, 2]}, adding={0: [2]})),     # 7: made while moving
        set_data("/brokers/topics/u", topic({0: [1, 2]})),
    ) == [
        row(1, "topic_created", "topic:t", topic="t"),
        row(2, "reassignment_started", "topic:t", topic="t", partition=0, old="1,2", new="3,4"),
        row(5, "reassignment_finished", "topic:t", topic="t", partition=0, old="1,2", new="3,5"),
        row(7, "topic_created", "topic:u", topic="u"),
        row(8, "reassignment_finished", "topic:u", topic="u", partition=0, old="1", new="1,2"),
    ]


def test_a_replica_a_move_removes_leaves_the_isr_before_the_assignment_drops_it() -> None:
    """As Kafka's controller completes a move: the new replica joins the ISR, the removing one is
    taken out of it, and only then is the assignment written without it."""
    assert _derived(
        create("/brokers/topics/t", topic({0: [1, 2]})),
        create(STATE, partition_state(1, [1, 2])),
        set_data("/brokers/topics/t", topic({0: [1, 2, 3]}, adding={0: [3]}, removing={0: [2]})),   # 3
        set_data(STATE, partition_state(1, [1, 2, 3])),                                            # 4
        set_data(STATE, partition_state(1, [1, 3])),                                               # 5
        set_data("/brokers/topics/t", topic({0: [1, 3]})),                                         # 6
        set_data(STATE, partition_state(1, [1])),                                                  # 7: 3 fell behind
    ) == [
        row(1, "topic_created", "topic:t", topic="t"),
        row(3, "reassignment_started", "topic:t", topic="t", partition=0, old="1,2", new="1,3"),
        isr(4, "isr_expand", 3, "1,2", "1,2,3", 0),
        isr(5, "replica_removed", 2, "1,2,3", "1,3", 0),
        row(6, "reassignment_finished", "topic:t", topic="t", partition=0, old="1,2", new="1,3"),
        isr(7, "isr_shrink", 3, "1,3", "1", 0),
    ]


def test_a_leader_is_a_broker_id() -> None:
    # -2: Kafka's "leader during delete", never an election (kmon counts any leader but -1)
    assert _derived(create(STATE, partition_state(1, [1])), set_data(STATE, partition_state(-2, [1], 1)),
                    set_data(STATE, partition_state(1, [1], 2))) == [election(3, "leader_election", -2, 1, 2)]


# ---------------------------------------------------------------- a real log

def _real(zxid: int, time_ms: int, kind: str, entity: str, **fields: object) -> OracleTransition:
    return OracleTransition(kind=kind, entity=entity, position=zxid, time_ms=time_ms, **fields)


def test_a_real_cluster_s_log() -> None:
    def came(zxid: int, time_ms: int, kind: str) -> OracleTransition:
        return _real(zxid, time_ms, kind, "broker:1", broker=1)

    def controller_now(zxid: int, time_ms: int, broker: int, epoch: int) -> OracleTransition:
        return _real(zxid, time_ms, "controller_change", "controller", broker=broker, old=str(-broker),
                     new=str(broker), epoch=epoch)

    def orders(zxid: int, time_ms: int, kind: str, name: str = "orders") -> OracleTransition:
        return _real(zxid, time_ms, kind, f"topic:{name}", topic=name)

    assert transitions(SAMPLE, "/kafka") == [
        came(0x2E, 1795740346570, "broker_registered"),
        controller_now(0x30, 1795740346715, 1, 1),
        orders(0x39, 1795740347851, "topic_created"),
        orders(0x41, 1795740348491, "topic_created", "__consumer_offsets"),
        came(0x57, 1795740363328, "broker_gone"),             # stopped (SIGTERM): its session closed
        controller_now(0x57, 1795740363328, -1, 1),
        came(0x85, 1795740382478, "broker_registered"),
        controller_now(0x86, 1795740382620, 1, 2),
        came(0x8A, 1795740389400, "broker_gone"),             # killed: its session expired
        controller_now(0x8A, 1795740389400, -1, 2),
        came(0xB2, 1795740401117, "broker_registered"),
        controller_now(0xB3, 1795740401200, 1, 3),
        orders(0xBF, 1795740404847, "topic_deleted"),         # its partitions went offline uncounted before
        orders(0xC4, 1795740406735, "topic_created"),
        came(0xC8, 1795740414034, "broker_gone"),
        controller_now(0xC8, 1795740414034, -1, 3),
    ]
    assert transitions(SAMPLE) == []   # nothing of Kafka's outside the chroot


def test_each_znode_s_versions_of_a_real_log() -> None:
    versions = znode_versions(SAMPLE, "/kafka")
    assert {path: versions[path] for path in ("/kafka/brokers/ids/1", "/kafka/controller", "/kafka/controller_epoch",
                                              "/kafka/brokers/topics/orders/partitions/0/state")} == {
        "/kafka/brokers/ids/1": 6,   # three registrations, each created empty then written in one multi
        "/kafka/controller": 3,
        "/kafka/controller_epoch": 4,
        "/kafka/brokers/topics/orders/partitions/0/state": 3,   # made, taken offline for the deletion, made again
    }
    assert all(path.startswith("/kafka/") for path in versions)
