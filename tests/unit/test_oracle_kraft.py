"""The KRaft oracle: a metadata log as Kafka's DumpLogSegments prints it -> the true transitions, on
records written by hand (the form the tool's JSON takes) and on a real log (tests/data/oracle/kraft: one
node, broker and controller, with ELR on: a topic made, a stop (controlled shutdown) and a kill, the topic
deleted and made again), whose dump by the tool is stored beside it and made again where Java is."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.oracle import IncompleteLog, MalformedLog, OracleTransition, kraft
from bench.oracle.kraft import derive
from bench.oracle.kraft_dump import MetadataRecord, dump, parse, segments
from kmon.toolchain import find_toolchain
from tests.unit.oracle_rows import T0, election, isr, row, time_at

DATA = Path(__file__).parents[1] / "data" / "oracle"
SAMPLE = DATA / "kraft" / "__cluster_metadata-0"


def _log(*entries: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], int]) -> list[MetadataRecord]:
    """Records at offsets 1, 2, ... (a LeaderChange's epoch given third), each batch a second after the last."""
    out = []
    for offset, (kind, data, *epoch) in enumerate(entries, start=1):
        out.append(MetadataRecord(offset, epoch[0] if epoch else 1, time_at(offset), kind == "LeaderChange",
                                  kind, data))
    return out




def _change(**fields: object) -> tuple[str, dict[str, Any]]:
    return "PARTITION_CHANGE_RECORD", {"partitionId": 0, "topicId": "A", **fields}


TOPIC = ("TOPIC_RECORD", {"name": "t", "topicId": "A"})
PARTITION = ("PARTITION_RECORD", {"partitionId": 0, "topicId": "A", "replicas": [1, 2, 3], "isr": [1, 2, 3],
                                  "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
                                  "partitionEpoch": 0})






def test_each_partition_change_merged_as_kafka_does_and_judged() -> None:
    assert derive(_log(
        TOPIC, PARTITION,                                                        # 1, 2: first sights
        _change(isr=[1, 2], eligibleLeaderReplicas=[3]),                         # 3: 3 left, stays eligible
        _change(leader=2, isr=[2]),                                              # 4: from the ISR
        _change(leader=-1, isr=[], eligibleLeaderReplicas=[3, 2]),               # 5: offline, no election
        _change(leader=3, isr=[3]),                                              # 6: from the ELR
        _change(leader=1, isr=[1]),                                              # 7: from neither
        _change(leaderRecoveryState=0),                                          # 8: recovered
        _change(leader=1),                                                       # 9: the same leader, a new epoch
        _change(isr=[1, 2], leaderRecoveryState=-1),                             # 10
        _change(leader=2, leaderRecoveryState=1),                                # 11: Kafka says unclean
        _change(isr=[2, 1]),                                                     # 12: still recovering
        _change(leader=1, leaderRecoveryState=1),                                # 13: not newly: judged by the ISR
        _change(leader=-1, isr=[], eligibleLeaderReplicas=[2]),                  # 14
        ("CLEAR_ELR_RECORD", {"topicName": "t"}),                                # 15: ELR off for t
        _change(leader=2, isr=[2]),                                              # 16: no longer eligible
    )) == [
        row(1, "topic_created", "topic:t", topic="t"),
        isr(3, "isr_shrink", 3, "1,2,3", "1,2", 0),
        isr(4, "isr_shrink", 1, "1,2", "2", 1),
        election(4, "leader_election", 1, 2, 1),
        isr(5, "isr_shrink", 2, "2", "", 2),
        isr(6, "isr_expand", 3, "", "3", 3),
        election(6, "elr_leader_election", -1, 3, 3),
        isr(7, "isr_shrink", 3, "3", "1", 4),
        isr(7, "isr_expand", 1, "3", "1", 4),
        election(7, "unclean_leader_election", 3, 1, 4),
        isr(10, "isr_expand", 2, "1", "1,2", 5),
        election(11, "unclean_leader_election", 1, 2, 6),
        election(13, "leader_election", 2, 1, 7),
        isr(14, "isr_shrink", 1, "2,1", "", 8),
        isr(14, "isr_shrink", 2, "2,1", "", 8),
        isr(16, "isr_expand", 2, "", "2", 9),
        election(16, "unclean_leader_election", -1, 2, 9),
    ]


def test_a_partition_moving_starts_and_finishes_once() -> None:
    assert derive(_log(
        TOPIC, PARTITION,
        _change(replicas=[1, 2, 3, 4], addingReplicas=[4], removingReplicas=[1]),
        _change(isr=[1, 2, 3, 4]),
        _change(replicas=[2, 3, 4], isr=[2, 3, 4], addingReplicas=[], removingReplicas=[]),
    )) == [
        row(1, "topic_created", "topic:t", topic="t"),
        row(3, "reassignment_started", "topic:t", topic="t", partition=0, old="1,2,3", new="2,3,4"),
        isr(4, "isr_expand", 4, "1,2,3", "1,2,3,4", 0),
        isr(5, "replica_removed", 1, "1,2,3,4", "2,3,4", 0),
        row(5, "reassignment_finished", "topic:t", topic="t", partition=0, old="1,2,3", new="2,3,4"),
    ]


def test_a_topic_is_its_id() -> None:
    assert derive(_log(
        TOPIC, PARTITION, ("REMOVE_TOPIC_RECORD", {"topicId": "A"}),
        ("TOPIC_RECORD", {"name": "t", "topicId": "B"}),                        # 4: t made again
        _change(leader=2),                                                       # of the topic removed
        ("PARTITION_RECORD", {**PARTITION[1], "topicId": "Z"}),                  # of a topic never made
        ("PARTITION_CHANGE_RECORD", {"partitionId": 0, "topicId": "Z", "isr": [3]}),
        ("PARTITION_RECORD", {**PARTITION[1], "topicId": "B", "leader": 3}),     # a first sight
        ("PARTITION_CHANGE_RECORD", {"partitionId": 0, "topicId": "B", "isr": [3]}),
    )) == [
        row(1, "topic_created", "topic:t", topic="t"),
        row(3, "topic_deleted", "topic:t", topic="t"),
        row(4, "topic_created", "topic:t", topic="t"),
        isr(9, "isr_shrink", 1, "1,2,3", "3", 0),
        isr(9, "isr_shrink", 2, "1,2,3", "3", 0),
    ]


def _register(incarnation: str, epoch: int, fenced: bool = True) -> tuple[str, dict[str, Any]]:
    return "REGISTER_BROKER_RECORD", {"brokerId": 1, "incarnationId": incarnation, "brokerEpoch": epoch,
                                      "fenced": fenced, "inControlledShutdown": False}


def _registration_change(epoch: int, **change: int) -> tuple[str, dict[str, Any]]:
    return "BROKER_REGISTRATION_CHANGE_RECORD", {"brokerId": 1, "brokerEpoch": epoch, **change}


def test_a_broker_s_registrations() -> None:
    def broker(offset: int, kind: str) -> OracleTransition:
        return row(offset, kind, "broker:1", broker=1)

    assert derive(_log(
        _register("a", 1),                                         # 1
        _registration_change(1, fenced=-1),                        # 2
        _registration_change(1, inControlledShutdown=1),           # 3
        _registration_change(1, fenced=1),                         # 4
        _registration_change(1, inControlledShutdown=1),           # 5: still in it, as Kafka keeps it
        _registration_change(0, fenced=-1),                        # 6: of an older registration
        _register("b", 7),                                         # 7: the broker restarted
        _register("b", 8, fenced=False),                           # 8: the same process again, unfenced
        ("FENCE_BROKER_RECORD", {"id": 1, "epoch": 8, "brokerId": 1, "brokerEpoch": 8}),
        ("UNFENCE_BROKER_RECORD", {"id": 1, "epoch": 8, "brokerId": 1, "brokerEpoch": 8}),
        ("UNREGISTER_BROKER_RECORD", {"brokerId": 1, "brokerEpoch": 8}),   # 11
        ("UNREGISTER_BROKER_RECORD", {"brokerId": 1, "brokerEpoch": 8}),
    )) == [broker(1, "broker_registered"), broker(2, "broker_unfenced"), broker(3, "broker_controlled_shutdown"),
           broker(4, "broker_fenced"), broker(7, "broker_registered"), broker(8, "broker_unfenced"),
           broker(9, "broker_fenced"), broker(10, "broker_unfenced"), broker(11, "broker_gone")]


def test_the_quorum_s_leaders() -> None:
    assert derive(_log(("LeaderChange", {"leaderId": 1}, 1),                # the first: a first sight
                       ("LeaderChange", {"leaderId": 2}, 2),
                       ("LeaderChange", {"leaderId": 2}, 3),                # elected again
                       ("NO_OP_RECORD", {}, 3))) == [
        row(2, "controller_change", "controller", broker=2, old="1", new="2", epoch=2),
        row(3, "controller_change", "controller", broker=2, old="2", new="2", epoch=3),
    ]


def test_a_metadata_transaction_takes_effect_at_its_end_or_never() -> None:
    assert derive(_log(
        ("BEGIN_TRANSACTION_RECORD", {"name": "t"}), TOPIC, ("LeaderChange", {"leaderId": 1}),
        ("LeaderChange", {"leaderId": 2}, 2), ("END_TRANSACTION_RECORD", {}),   # 5
        ("BEGIN_TRANSACTION_RECORD", {}), ("TOPIC_RECORD", {"name": "u", "topicId": "U"}),
        ("ABORT_TRANSACTION_RECORD", {}),
        ("BEGIN_TRANSACTION_RECORD", {}), ("TOPIC_RECORD", {"name": "v", "topicId": "V"}),   # never ended
    )) == [
        row(4, "controller_change", "controller", broker=2, old="1", new="2", epoch=2),
        row(2, "topic_created", "topic:t", topic="t"),
    ]


# ---------------------------------------------------------------- DumpLogSegments' output

BATCH = ("baseOffset: {base} lastOffset: {last} count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
         "producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: false deleteHorizonMs: "
         "OptionalLong.empty position: 0 CreateTime: {time} size: 72 magic: 2 compresscodec: none crc: 1 "
         "isvalid: {valid}")
RECORD = "| offset: {offset} CreateTime: {time} keySize: -1 valueSize: 4 sequence: -1 headerKeys: [] payload: {payload}"


def _dump(*batches: tuple[int, str], valid: str = "true") -> str:
    lines = ["Dumping 00000000000000000000.log", "Log starting offset: 0"]
    for base, payload in batches:
        lines += [BATCH.format(base=base, last=base, time=T0 + base, valid=valid),
                  RECORD.format(offset=base, time=T0 + base, payload=payload)]
    return "\n".join(lines) + "\n"


NO_OP = json.dumps({"type": "NO_OP_RECORD", "version": 0, "data": {}})


def test_the_tool_s_output_is_read_in_full() -> None:
    assert parse(_dump((0, NO_OP), (1, NO_OP))) == [MetadataRecord(0, 1, T0, False, "NO_OP_RECORD", {}),
                                                    MetadataRecord(1, 1, T0 + 1, False, "NO_OP_RECORD", {})]
    with pytest.raises(IncompleteLog, match="offset 1 follows offset -1"):
        parse(_dump((1, NO_OP)))
    with pytest.raises(IncompleteLog, match="offset 3 follows offset 0"):
        parse(_dump((0, NO_OP), (3, NO_OP)))
    with pytest.raises(MalformedLog, match="CRC"):
        parse(_dump((0, NO_OP), valid="false"))
    with pytest.raises(MalformedLog, match="offset 0: payload: Error at 0, skipping"):
        parse(_dump((0, "Error at 0, skipping. Unknown metadata id 99")))


def test_a_log_must_start_at_offset_zero(tmp_path: Path) -> None:
    with pytest.raises(IncompleteLog, match="no log segment"):
        segments(tmp_path)
    (tmp_path / "00000000000000000100.log").write_bytes(b"")
    (tmp_path / "00000000000000000100.index").write_bytes(b"")
    with pytest.raises(IncompleteLog, match="starts at offset 100"):
        segments(tmp_path)
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert [p.name for p in segments(tmp_path)] == ["00000000000000000000.log", "00000000000000000100.log"]


def test_a_real_log() -> None:
    """Kafka 4.3 with ELR: a stop moves the only replica to the ELR, and its return is an ELR election; a
    kill makes the broker's shutdown unclean (its ELR is cleared), and its return an unclean election."""
    times = {14: 1795740437461, 18: 1795740438497, 20: 1795740439062, 23: 1795740439266, 70: 1795740455657,
             83: 1795740455738, 85: 1795740473422, 91: 1795740476649, 95: 1795740477992, 110: 1795740497040,
             129: 1795740507340, 141: 1795740507340, 156: 1795740508362, 159: 1795740509004, 175: 1795740510174,
             176: 1795740510309, 192: 1795740517474, 204: 1795740517703}

    def real(offset: int, kind: str, entity: str, at: int | None = None, **fields: object) -> OracleTransition:
        return OracleTransition(kind=kind, entity=entity, position=offset, time_ms=times[at or offset], **fields)

    partitions = [("__consumer_offsets", p) for p in range(10)] + [("orders", 0), ("orders", 1)]

    def each(first: int, at: int, kinds: tuple[str, ...], old: int, new: int, epoch: int,
             which: list[tuple[str, int]] = partitions, orders_epoch: int | None = None) -> list[OracleTransition]:
        """One partition a record, from ``first`` on, as the controller wrote them in one batch (``at``)."""
        out = []
        for i, (topic, p) in enumerate(which):
            isr = {"old": "" if old == -1 else "1", "new": "" if new == -1 else "1"}
            for kind in kinds:
                election = kind.endswith("election")
                out.append(real(first + i, kind, f"partition:{topic}:{p}", at, topic=topic, partition=p, broker=1,
                               epoch=orders_epoch if topic == "orders" and orders_epoch is not None else epoch,
                               **({"old": str(old), "new": str(new)} if election else isr)))
        return out

    def broker(offset: int, kind: str) -> OracleTransition:
        return real(offset, kind, "broker:1", broker=1)

    def topic(offset: int, kind: str, name: str = "orders") -> OracleTransition:
        return real(offset, kind, f"topic:{name}", topic=name)

    def controller(offset: int, epoch: int) -> OracleTransition:
        return real(offset, "controller_change", "controller", broker=1, old="1", new="1", epoch=epoch)

    expected = [
        broker(14, "broker_registered"), broker(18, "broker_unfenced"),
        topic(20, "topic_created"), topic(23, "topic_created", "__consumer_offsets"),
        broker(70, "broker_controlled_shutdown"), *each(71, 70, ("isr_shrink",), 1, -1, 1), broker(83, "broker_fenced"),
        controller(85, 2), broker(91, "broker_registered"), broker(95, "broker_unfenced"),
        *each(96, 95, ("isr_expand", "elr_leader_election"), -1, 1, 2),
        controller(110, 3),   # killed: the same node leads again
        *each(129, 129, ("isr_shrink",), 1, -1, 3), broker(141, "broker_fenced"),
        broker(156, "broker_registered"), broker(159, "broker_unfenced"),
        *each(160, 159, ("isr_expand", "unclean_leader_election"), -1, 1, 4),
        topic(175, "topic_deleted"), topic(176, "topic_created"),
        broker(192, "broker_controlled_shutdown"),
        # the topic made again: its partition's first leader epoch
        *each(193, 192, ("isr_shrink",), 1, -1, 5, [("orders", 0)] + partitions[:10], orders_epoch=1),
        broker(204, "broker_fenced"),
    ]
    assert derive(parse((DATA / "kraft-dump.txt").read_text())) == expected


def test_kafka_s_tool_reads_the_real_log_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = find_toolchain()
    if shutil.which("java") is None or not any(tools.kafka4_libs.glob("kafka-tools-4.*.jar")):
        pytest.fail("Java or Kafka 4's jars are not installed: run deploy/install.sh, which `make test` runs first",
                    pytrace=False)
    printed: list[str] = []
    monkeypatch.setattr(kraft, "dump", lambda files, t: printed.append(dump(files, t)) or printed[-1])
    stored = (DATA / "kraft-dump.txt").read_text()
    assert kraft.transitions(SAMPLE, tools) == derive(parse(stored))
    # the stored dump was made in the segment's folder: the tool names the file as it was given
    assert printed[0].replace(f"Dumping {SAMPLE}/", "Dumping ") == stored
