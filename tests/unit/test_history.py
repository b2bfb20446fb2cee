"""The transition history without a cluster: the rows of each applied event (and that they
agree with the counters), the Parquet files, and ``kmon history``."""
from __future__ import annotations

import json
from dataclasses import replace
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from kmon.codec import encode
from kmon.events import (BrokerState, ControllerState, Event, GroupMember, GroupState, LogMeta, PartitionState,
                         QuorumReplica, QuorumState, TopicLag, TopicState)
from kmon.history import (CONTROLLER_CHANGES, COUNTED, ELR_LEADER_ELECTIONS, ISR_EXPANDS, ISR_SHRINKS,
                          LEADER_ELECTIONS, LOST_MESSAGES, REBALANCES, TRANSITION_KINDS, UNCLEAN_LEADER_ELECTIONS,
                          Transition, order_key, topic_key)
from streaming.fold.arrow import from_ipc, table, to_ipc
from streaming.fold.entity_step import fold
from streaming.fold.history import rows
from streaming.fold.entity import Applied, EntityRecord, apply_event, record_from_json
from streaming.history_log import HistoryLog, files, read

ROOT = Path(__file__).resolve().parents[2]
DAY_MS = 86_400_000
T0 = 1_795_000_000_000   # 2026-11-18, a fixed instant: rows are dated by it


def zk(kind: str, entity: str, data, zxid: int, op: str = "upsert", snapshot_id: str | None = None) -> Event:
    return Event(cluster="c1", source="zk", kind=kind, entity=entity, op=op, observed_ms=T0 + zxid,
                 data=data, zxid=zxid, snapshot_id=snapshot_id)


def partition(zxid: int, leader: int, isr: tuple[int, ...], epoch: int = 0) -> Event:
    return zk("partition", "partition:t:0", PartitionState("t", 0, leader, epoch, isr, 1), zxid)


def kraft(kind: str, entity: str, data, offset: int, snapshot_id: str | None = None) -> Event:
    """An event of the KRaft collector: ordered by its metadata offset."""
    return Event(cluster="c1", source="kraft", kind=kind, entity=entity, op="upsert", observed_ms=T0 + offset,
                 data=data, log=LogMeta(offset, 4), snapshot_id=snapshot_id)


def kraft_partition(offset: int, leader: int, isr: tuple[int, ...], elr: tuple[int, ...] = (),
                    recovering: bool = False, epoch: int = 0) -> Event:
    return kraft("partition", "partition:t:0", PartitionState(
        "t", 0, leader, epoch, isr, 4, leader_recovery_state=int(recovering), partition_epoch=offset, elr=elr,
        last_known_elr=()), offset)


def group(n: int, generation: int, state: str = "Stable", members: int = 1) -> Event:
    data = GroupState(group="g", state=state, generation=generation, protocol="range", leader="m0",
                      members=tuple(GroupMember(f"m{i}", "c", "h") for i in range(members)), coordinator=2)
    return Event(cluster="c1", source="groups", kind="group", entity="group:g", op="upsert",
                 observed_ms=T0 + n, data=data)


def rows_of(events: list[Event]) -> list[Transition]:
    """Each event applied in turn; the transitions it counted."""
    record, out = None, []
    for e in events:
        record, _, told = apply_event(record, e)
        out.extend(told)
    return out


def behind(n: int, committed: dict[int, int], log_start: dict[int, int], topic: str = "t") -> Event:
    """A lag poll of group g: its committed offsets and the partitions' log start offsets."""
    e = group(n, 3)
    lag = TopicLag(lag=1, lag_seconds=1.0, partitions={p: 1 for p in committed}, committed=committed,
                   log_start=log_start)
    return replace(e, data=replace(e.data, lag={topic: lag}))


# ---------------------------------------------------------------- rows of one entity

def test_isr_shrink_expand_and_elections_name_the_brokers_and_values():
    rows = rows_of([partition(1, 1, (1, 2, 3)), partition(2, 1, (1, 3)), partition(3, 3, (3,), epoch=1),
                    partition(4, 2, (2,), epoch=2), partition(5, 2, (2, 3), epoch=2)])
    assert [(r.kind, r.broker, r.old, r.new) for r in rows] == [
        ("isr_shrink", 2, "1,2,3", "1,3"),
        ("isr_shrink", 1, "1,3", "3"), ("leader_election", 3, "1", "3"),
        ("isr_shrink", 3, "3", "2"), ("isr_expand", 2, "3", "2"), ("unclean_leader_election", 2, "3", "2"),
        ("isr_expand", 3, "2", "2,3")]
    assert all((r.cluster, r.topic, r.partition, r.entity) == ("c1", "t", 0, "partition:t:0") for r in rows)
    assert [r.position for r in rows] == [2, 3, 3, 4, 4, 4, 5]
    assert rows[5].epoch == 2 and rows[5].time_ms == T0 + 4


def test_a_replica_a_move_removes_is_told_as_removed_and_counted_as_no_shrink():
    moving = [zk("partition", "partition:t:0", PartitionState("t", 0, 1, 0, isr, 1, remaining=(1, 3)), zxid)
              for zxid, isr in ((1, (1, 2)), (2, (1, 2, 3)), (3, (1, 3)))]
    rows = rows_of(moving)
    assert [(r.kind, r.broker, r.old, r.new) for r in rows] == [
        ("isr_expand", 3, "1,2", "1,2,3"), ("replica_removed", 2, "1,2,3", "1,3")]
    record = None
    for e in moving:
        record, _, _ = apply_event(record, e)
    assert record.broker_counters == {ISR_EXPANDS: {3: 1}}


def test_kraft_elections_from_the_elr_and_unclean_ones_say_what_they_chose_from():
    rows = rows_of([kraft_partition(10, 1, (1, 2)), kraft_partition(11, 1, (1,), elr=(2,)),
                    kraft_partition(12, -1, (1,), elr=(2,)), kraft_partition(13, 2, (2,), epoch=1),
                    kraft_partition(14, -1, (2,)), kraft_partition(15, 3, (3,), recovering=True, epoch=2),
                    kraft_partition(16, 3, (3,), epoch=2)])
    assert [(r.kind, r.broker, r.old, r.new, r.position) for r in rows] == [
        ("isr_shrink", 2, "1,2", "1", 11),
        ("isr_shrink", 1, "1", "2", 13), ("isr_expand", 2, "1", "2", 13), ("elr_leader_election", 2, "-1", "2", 13),
        ("isr_shrink", 2, "2", "3", 15), ("isr_expand", 3, "2", "3", 15), ("unclean_leader_election", 3, "-1", "3", 15)]
    assert rows[3].detail == "isr before 1, elr before 2" and rows[3].epoch == 1
    assert rows[6].detail == "isr before 2, elr before empty, leader recovering"
    record = None
    for e in [kraft_partition(10, 1, (1, 2)), kraft_partition(11, 1, (1,), elr=(2,)),
              kraft_partition(12, -1, (1,), elr=(2,)), kraft_partition(13, 2, (2,), epoch=1)]:
        record, _, _ = apply_event(record, e)
    assert record.counters == {LEADER_ELECTIONS: 1, ELR_LEADER_ELECTIONS: 1}


def test_a_brokers_fencing_and_controlled_shutdown_under_kraft():
    b = lambda offset, fenced, shutting_down=False, incarnation="i1", snap=None: kraft(
        "broker", "broker:2", BrokerState(2, "h", 9092, None, fenced=fenced, in_controlled_shutdown=shutting_down,
                                          incarnation_id=incarnation, broker_epoch=offset), offset, snap)
    assert rows_of([b(1, True, snap="s1"), b(2, True, snap="s1")]) == []   # there before kmon watched
    rows = rows_of([b(10, True), b(11, False),                   # registers (fenced), catches up
                    b(20, False, True), b(21, True, True),        # a controlled shutdown
                    b(30, True, incarnation="i2"), b(31, False, incarnation="i2"),   # restarted
                    b(40, True, incarnation="i2"), b(40, True, incarnation="i2")])   # killed: fenced
    assert [(r.kind, r.broker, r.position, r.detail) for r in rows] == [
        ("broker_registered", 2, 10, "incarnation i1"), ("broker_unfenced", 2, 11, "incarnation i1"),
        ("broker_controlled_shutdown", 2, 20, "incarnation i1, in controlled shutdown"),
        ("broker_fenced", 2, 21, "incarnation i1, in controlled shutdown"),
        ("broker_registered", 2, 30, "incarnation i2"), ("broker_unfenced", 2, 31, "incarnation i2"),
        ("broker_fenced", 2, 40, "incarnation i2")]
    assert all(r.entity == "broker:2" and r.topic is None for r in rows)


def test_the_quorum_re_emitted_every_few_seconds_writes_no_row():
    """Its high watermark moves all the time; its leader changes are the controller entity's rows."""
    q = lambda offset, leader, epoch, voters: kraft("quorum", "quorum", QuorumState(
        leader, epoch, offset, tuple(QuorumReplica(v, offset) for v in voters), features={"metadata.version": 21}),
        offset)
    events = [q(100, 1, 3, (1, 2, 3)), q(150, 1, 3, (1, 2, 3)), q(160, -1, 4, (1, 2, 3)), q(170, 2, 4, (2, 3))]
    record, folded = None, []
    for e in events:
        record, applied, told = apply_event(record, e)
        folded.append((applied, told))
    assert folded == [(Applied.APPLIED, ())] * 4
    assert record.state.leader_id == 2 and record.counters == {}


def test_replays_and_duplicates_write_nothing_twice():
    events = [partition(1, 1, (1, 2)), partition(2, 1, (1,)), partition(3, 1, (1, 2))]
    assert len(rows_of(events + events + [partition(2, 1, (1,))])) == 2


def test_controller_changes_carry_both_brokers_and_epochs():
    c = lambda zxid, broker, epoch: zk("controller", "controller", ControllerState(broker, epoch, zxid), zxid)
    rows = rows_of([c(1, 1, 5), c(2, -1, 5), c(3, 2, 6), c(3, 2, 6)])
    assert [(r.kind, r.old, r.new, r.broker, r.epoch) for r in rows] == [
        ("controller_change", "1", "-1", -1, 5), ("controller_change", "-1", "2", 2, 6)]


def test_brokers_and_topics_seen_in_the_first_snapshot_were_there_before():
    broker = lambda zxid, op="upsert", snap=None: zk(
        "broker", "broker:4", BrokerState(4, "h", 9092, None) if op == "upsert" else None, zxid, op, snap)
    assert rows_of([broker(1, snap="s1")]) == []
    rows = rows_of([broker(1, snap="s1"), broker(2, "delete"), broker(3, snap="s2"), broker(4, "delete"), broker(5)])
    assert [(r.kind, r.broker, r.position) for r in rows] == [
        ("broker_gone", 4, 2), ("broker_registered", 4, 3), ("broker_gone", 4, 4), ("broker_registered", 4, 5)]
    topic = lambda zxid, op="upsert": zk("topic", "topic:t", TopicState("t", None, {0: (1,)}) if op == "upsert"
                                         else None, zxid, op)
    assert [(r.kind, r.topic) for r in rows_of([topic(1), topic(2, "delete")])] == [
        ("topic_created", "t"), ("topic_deleted", "t")]


def test_a_reassignment_starts_and_finishes_with_its_replicas():
    t = lambda zxid, replicas, adding=(), removing=(): zk("topic", "topic:t", TopicState(
        "t", None, {0: replicas, 1: (1, 2)}, {0: adding} if adding else {}, {0: removing} if removing else {}), zxid)
    rows = rows_of([t(1, (1, 2, 3)), t(2, (2, 3, 4, 1), adding=(4,), removing=(1,)), t(3, (2, 3, 4))])
    assert [(r.kind, r.topic, r.partition, r.old, r.new) for r in rows] == [
        ("topic_created", "t", None, None, None),
        ("reassignment_started", "t", 0, "2,3,1", "2,3,4"),
        ("reassignment_finished", "t", 0, "2,3,1", "2,3,4")]


def test_records_deleted_unread_are_counted_once_each_as_the_log_start_passes_the_committed_offset():
    """Partition 0: committed at 10, the log start moves 5 -> 50 -> 80 (70 deleted unread, in two rows), then the
    group resets to 80 and reads on: nothing more. Partition 1: the group caught up past the old start before
    the deletion (committed 60, start 50): nothing lost. A partition first seen behind its start counts
    nothing then: what happened before kmon looked is not told."""
    events = [behind(1, {0: 10, 1: 30}, {0: 5, 1: 0}), behind(2, {0: 10, 1: 60}, {0: 50, 1: 50}),
              behind(3, {0: 10, 1: 60, 2: 0}, {0: 80, 1: 50, 2: 40}), behind(4, {0: 80, 1: 60, 2: 0}, {0: 80, 1: 50, 2: 40}),
              behind(5, {0: 90, 1: 60, 2: 40}, {0: 85, 1: 50, 2: 40})]
    record, told = None, []
    for e in events:
        record, _, rows = apply_event(record, e)
        told += rows
    assert [(r.kind, r.topic, r.partition, r.old, r.new) for r in told] == [
        ("records_lost", "t", 0, "10", "50"), ("records_lost", "t", 0, "50", "80")]
    assert told[0].detail == "40 record(s) deleted unread; committed offset 10"
    assert record.counters == {topic_key(LOST_MESSAGES, "t"): 70}


def test_group_states_and_one_row_per_rebalance_including_generations_missed_between_polls():
    rows = rows_of([group(1, 3), group(2, 3, "PreparingRebalance"), group(3, 4, "Stable", members=2),
                    group(4, 7, "Stable", members=3)])
    assert [(r.kind, r.old, r.new, r.generation) for r in rows] == [
        ("group_state_change", "Stable", "PreparingRebalance", 3),
        ("group_state_change", "PreparingRebalance", "Stable", 4), ("rebalance", "3", "4", 4),
        ("rebalance", "4", "5", 5), ("rebalance", "5", "6", 6), ("rebalance", "6", "7", 7)]
    assert rows[2].detail == "2 member(s), assignor range, leader m0" and rows[3].detail == "between two polls"
    assert {(r.group, r.broker) for r in rows} == {("g", 2)}


def test_a_consumer_protocol_epoch_step_names_the_members_still_reconciling():
    def epoch(n: int, group_epoch: int, assignment_epoch: int, *members: tuple[str, int, str]) -> Event:
        reconciling = sum(e != assignment_epoch or s != "STABLE" for _, e, s in members)
        data = GroupState(group="g", state="Reconciling" if reconciling else "Stable", generation=group_epoch,
                          protocol="uniform", group_type="consumer", assignment_epoch=assignment_epoch,
                          reconciling=reconciling,
                          members=tuple(GroupMember(m, "c", "h", member_epoch=e, member_state=s) for m, e, s in members))
        return Event(cluster="c1", source="groups", kind="group", entity="group:g", op="upsert",
                     observed_ms=T0 + n, data=data)
    rows = rows_of([epoch(1, 4, 4, ("a", 4, "STABLE")),
                    epoch(2, 5, 5, ("a", 4, "UNREVOKED_PARTITIONS"), ("b", 5, "STABLE"))])
    [rebalance] = [r for r in rows if r.kind == "rebalance"]
    assert (rebalance.old, rebalance.new, rebalance.generation) == ("4", "5", 5)
    assert rebalance.detail == ("2 member(s), assignor uniform, consumer protocol, target assignment epoch 5, "
                                "1 reconciling: a (client c, epoch 4, UNREVOKED_PARTITIONS)")
    [reconciling] = [r for r in rows if r.kind == "group_state_change"]   # Stable at epoch 4, Reconciling at 5
    assert (reconciling.old, reconciling.new, reconciling.detail) == ("Stable", "Reconciling", rebalance.detail)


# ---------------------------------------------------------------- rows agree with the counters

_isr = st.lists(st.sampled_from([1, 2, 3]), max_size=3, unique=True).map(tuple)
# leader, ISR, ELR, recovering (KRaft only), position step
_partition_events = st.lists(st.tuples(st.sampled_from([-1, 1, 2, 3]), _isr, _isr, st.booleans(), st.integers(0, 2)),
                             min_size=1, max_size=25)


def _value(e: Event) -> str:
    return encode(e).decode()


def _batches(values: list[str], cuts: list[int]) -> list[list[tuple[int, int, str]]]:
    rows = [(0, i, v) for i, v in enumerate(values)]
    edges = sorted({c % (len(rows) + 1) for c in cuts} | {0, len(rows)})
    return [rows[a:b] for a, b in zip(edges, edges[1:])]


def _fold_batches(key: str, batches) -> tuple[EntityRecord, list[dict]]:
    """fold() over consecutive batches, the state carried as Spark carries it."""
    state, rows = None, []
    for batch in batches:
        out = fold(key, state, batch)
        state = out["record"]
        rows.extend(out["transitions"])
    return record_from_json(state), rows


@settings(max_examples=150, deadline=None)
@given(_partition_events, st.lists(st.integers(0, 30), max_size=4), st.booleans())
def test_partition_rows_equal_the_counters_whatever_the_batches(steps, cuts, under_kraft):
    values, position = [], 0
    for leader, isr, elr, recovering, bump in steps:
        position += bump   # 0: the same position again (a re-read or a half-stale read)
        values.append(_value(kraft_partition(position, leader, isr, elr, recovering) if under_kraft
                             else partition(position, leader, isr)))
    record, rows = _fold_batches("c1/partition:t:0", _batches(values, cuts))
    counters = record.counters
    kinds = Counter(r.kind for r in rows)
    by_broker = Counter((r.kind, r.broker) for r in rows)
    counted = Counter({({ISR_SHRINKS: "isr_shrink", ISR_EXPANDS: "isr_expand"}[name], broker): n
                       for name, per_broker in record.broker_counters.items() for broker, n in per_broker.items()})
    assert counted == Counter({(kind, broker): n for (kind, broker), n in by_broker.items() if kind.startswith("isr")})
    elections = kinds["leader_election"] + kinds["elr_leader_election"] + kinds["unclean_leader_election"]
    assert elections == counters.get(LEADER_ELECTIONS, 0)
    assert kinds["unclean_leader_election"] == counters.get(UNCLEAN_LEADER_ELECTIONS, 0)
    assert kinds["elr_leader_election"] == counters.get(ELR_LEADER_ELECTIONS, 0)
    assert under_kraft or not kinds["elr_leader_election"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 3), st.sampled_from(["Stable", "PreparingRebalance", "Empty"])),
                min_size=1, max_size=20),
       st.lists(st.tuples(st.sampled_from([-1, 1, 2]), st.integers(0, 1)), min_size=1, max_size=20),
       st.lists(st.integers(0, 30), max_size=4))
def test_group_and_controller_rows_equal_the_counters(gens, controllers, cuts):
    generation, values = 0, []
    for i, (step, state) in enumerate(gens):
        generation = -1 if step < 0 else generation + step   # -1: the Admin API does not know it
        values.append(_value(group(i, generation, state)))
    record, rows = _fold_batches("c1/group:g", _batches(values, cuts))
    counters = record.counters
    assert len([r for r in rows if r.kind == "rebalance"]) == counters.get(REBALANCES, 0)
    values, epoch = [], 0
    for i, (broker, bump) in enumerate(controllers):
        epoch += bump
        values.append(_value(zk("controller", "controller", ControllerState(broker, epoch, T0 + epoch), i + 1)))
    record, rows = _fold_batches("c1/controller", _batches(values, cuts))
    counters = record.counters
    assert len(rows) == counters.get(CONTROLLER_CHANGES, 0)


def test_every_counted_kind_and_counter_is_known():
    from kmon.metrics import CATALOG
    names = {m.name for m in CATALOG}
    assert {c.metric for c in COUNTED} <= names
    assert {k for c in COUNTED for k in c.kinds} <= set(TRANSITION_KINDS)
    assert len({c.key for c in COUNTED}) == len(COUNTED)


def test_the_readme_history_table_names_every_kind_and_what_counts_it():
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| kind | one row per | counted in |"):]
    named = set(re.findall(r"`(\w+)`", table[:table.index("\n\n")]))
    assert set(TRANSITION_KINDS) - named == set()
    assert {c.metric for c in COUNTED} - named == set()


# ---------------------------------------------------------------- the files

def row(n: int, kind: str = "isr_shrink", cluster: str = "c1", **kw) -> Transition:
    fields = {"topic": "t", "partition": 0, "broker": 2, "old": "1,2", "new": "1", "position": n} | kw
    return Transition(time_ms=T0 + n, cluster=cluster, kind=kind, **({"entity": "partition:t:0"} | fields))


def test_a_file_holds_its_rows_in_order_key_order(tmp_path: Path):
    """The writer sorts by column (kmon.history.ORDER); readers merge files by order_key."""
    rows = [row(1, position=9), row(1, position=None, entity="partition:t:1"), row(1, position=None, kind="isr_expand"),
            row(0, position=20), row(1, position=9, entity="partition:t:10"), row(1, position=3)]
    HistoryLog(tmp_path, "w1", 7, Clock(T0)).append(0, [table(rows)])
    (found,) = files(tmp_path)
    assert list(read(found)) == sorted(rows, key=order_key)


def test_transitions_travel_from_the_executors_as_an_arrow_stream():
    rows = [row(1), row(2, cluster="c2", position=None, detail="x")]
    assert from_ipc(to_ipc(table(rows))).to_pylist() == [t._asdict() for t in rows]
    assert table([]).num_rows == 0 and from_ipc(to_ipc(table([]))).num_rows == 0
    with pytest.raises(ValueError, match="not an Arrow stream"):
        from_ipc(b"garbage")
    with pytest.raises(ValueError, match="not the columns of transitions"):
        from_ipc(to_ipc(table(rows).drop_columns(["detail"])))


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def test_a_batch_is_one_file_per_cluster_and_day_and_a_rerun_rewrites_it(tmp_path: Path):
    history = HistoryLog(tmp_path, "w1", 7, Clock(T0))
    batch = [row(3), row(1, cluster="prod eu%1"), row(DAY_MS), row(2)]
    written = history.append(5, [table(batch)])
    assert written.rows == {"c1": 3, "prod eu%1": 1} and written.lost == {}
    history.append(5, [table(batch)])   # Spark runs batch 5 again after a restart
    found = sorted(files(tmp_path), key=lambda f: (f.cluster, f.day))
    assert [(f.cluster, f.day.isoformat(), f.path.name) for f in found] == [
        ("c1", "2026-11-18", "w1-000000000005.parquet"), ("c1", "2026-11-19", "w1-000000000005.parquet"),
        ("prod eu%1", "2026-11-18", "w1-000000000005.parquet")]
    assert list(read(found[0])) == [row(2), row(3)], "in order, rows as written"
    assert list(read(found[2])) == [row(1, cluster="prod eu%1")]


def test_other_parquet_readers_see_cluster_and_date_as_columns(tmp_path: Path):
    HistoryLog(tmp_path, "w1", 7, Clock(T0)).append(0, [table([row(1), row(2, kind="isr_expand")])])
    found = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table().to_pylist()
    assert sorted((r["cluster"], str(r["date"]), r["kind"], r["broker"]) for r in found) == [
        ("c1", "2026-11-18", "isr_expand", 2), ("c1", "2026-11-18", "isr_shrink", 2)]


def test_days_past_the_retention_are_deleted(tmp_path: Path):
    clock = Clock(T0)
    history = HistoryLog(tmp_path, "w1", 2, clock)
    for day in range(4):
        history.append(day, [table([row(day * DAY_MS)])])
    clock.ms = T0 + 4 * DAY_MS   # a new day: the next batch prunes
    history.append(9, [table([row(4 * DAY_MS)])])
    assert sorted(f.day.isoformat() for f in files(tmp_path)) == ["2026-11-20", "2026-11-21", "2026-11-22"]


def test_a_file_that_cannot_be_written_costs_its_rows_only(tmp_path: Path, caplog):
    history = HistoryLog(tmp_path, "w1", 7, Clock(T0))
    (tmp_path / "cluster=bad").write_text("a file where the cluster's directory goes")
    written = history.append(0, [table([row(1), row(2, cluster="bad")])])
    assert (written.rows, written.lost) == ({"c1": 1}, {"bad": 1})
    assert "could not write 1 transition(s) of bad" in caplog.text


# ---------------------------------------------------------------- kmon history

@pytest.fixture
def history_dir(tmp_path: Path) -> Path:
    now = int(time.time() * 1000)
    at = lambda n: {"time_ms": now - 600_000 + n * 1000}
    rows = [Transition(**at(1), cluster="c1", kind="isr_shrink", entity="partition:t:0", topic="t", partition=0,
                       broker=2, old="1,2", new="1", epoch=4, position=10),
            Transition(**at(2), cluster="c1", kind="leader_election", entity="partition:t:1", topic="t",
                       partition=1, broker=1, old="2", new="1", epoch=5, position=11),
            Transition(**at(3), cluster="c1", kind="controller_change", entity="controller", broker=3,
                       old="2", new="3", epoch=7, position=12),
            Transition(**at(4), cluster="c2", kind="rebalance", entity="group:g", group="g", broker=1,
                       old="3", new="4", generation=4, detail="2 member(s), assignor range, leader m0"),
            Transition(time_ms=now - 3 * 3600_000, cluster="c1", kind="broker_gone", entity="broker:2", broker=2)]
    HistoryLog(tmp_path, "w1", 7).append(0, [table(rows[:2] + rows[4:])])
    HistoryLog(tmp_path, "w1", 7).append(1, [table(rows[2:4])])
    return tmp_path


def history(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(["history", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_the_last_hour_in_order_as_an_aligned_table(history_dir: Path, capsys):
    code, lines, _ = history(capsys, "--dir", str(history_dir))
    assert code == 0
    assert lines[0].split()[:3] == ["TIME", "(UTC)", "CLUSTER"]
    assert [line.split()[2] for line in lines[1:]] == ["isr_shrink", "leader_election", "controller_change",
                                                       "rebalance"], "broker_gone is 3 h old"
    assert len({line.index("KIND") if i == 0 else line.index(line.split()[2]) for i, line in enumerate(lines)}) == 1
    assert "t:0" in lines[1] and "1,2 -> 1" in lines[1]
    assert lines[4].endswith("2 member(s), assignor range, leader m0") and "group g" in lines[4]


def test_filters_and_json_lines(history_dir: Path, capsys):
    code, lines, _ = history(capsys, "--dir", str(history_dir), "--since", "4h", "--broker", "2", "--json")
    rows = [json.loads(line) for line in lines]
    assert code == 0
    # broker 2 left an ISR, lost a leadership and the controller role, and its registration
    assert [r["kind"] for r in rows] == ["broker_gone", "isr_shrink", "leader_election", "controller_change"]
    assert rows[1]["time"].endswith("Z") and rows[1]["topic"] == "t" and rows[1]["cluster"] == "c1"
    _, lines, _ = history(capsys, "--dir", str(history_dir), "--cluster", "c2", "--json")
    assert [json.loads(line)["kind"] for line in lines] == ["rebalance"]
    _, lines, _ = history(capsys, "--dir", str(history_dir), "--kind", "leader_election,controller_change", "--json")
    assert [json.loads(line)["epoch"] for line in lines] == [5, 7]
    code, lines, err = history(capsys, "--dir", str(history_dir), "--topic", "nope")
    assert (code, lines, err.strip()) == (0, [], "kmon history: no transition matches")


def test_a_row_two_stream_apps_wrote_shows_once(history_dir: Path, capsys):
    for f in files(history_dir):   # a second stream app, with its own checkpoint, wrote the same
        (f.path.parent / f.path.name.replace("w1-", "w2-")).write_bytes(f.path.read_bytes())
    code, lines, _ = history(capsys, "--dir", str(history_dir), "--json")
    assert code == 0 and [json.loads(line)["kind"] for line in lines] == [
        "isr_shrink", "leader_election", "controller_change", "rebalance"]


def test_from_and_to_bound_the_range(history_dir: Path, capsys):
    now_s = time.time()
    _, lines, _ = history(capsys, "--dir", str(history_dir), "--from", str(now_s - 4 * 3600),
                          "--to", str(now_s - 3600), "--json")
    assert [json.loads(line)["kind"] for line in lines] == ["broker_gone"]


@pytest.mark.parametrize("argv, needle", [
    (["--kind", "isr_shrink,bogus"], "unknown kind bogus"),
    (["--since", "yesterday"], "--since 'yesterday' is not a duration"),
    (["--from", "23/11/2026"], "--from '23/11/2026' is not a time"),
    (["--to", "soon"], "--to 'soon' is not a time"),
    (["--broker", "two"], "--broker 'two' is not a broker id"),
    (["--from", "2026-11-23T10:00", "--to", "2026-11-23T09:00"], "--to '2026-11-23T09:00' is before"),
    (["--follow", "--to", "2026-11-23T09:00"], "--follow and --to exclude each other"),
    # found by tests/fuzz/history.py: times past the calendar's end raised from deep in the reader,
    # and a kind with a line break in it broke the line
    (["--since", "9" * 30 + "w"], "--since '999999999999999999999999999999w' reaches past"),
    (["--since", "9" * 400 + "s"], "reaches past"),
    (["--from", "9" * 30], "--from '999999999999999999999999999999' is past"),
    (["--to", "-" + "9" * 30], "is not a time"),
    (["--to", "99999999999999"], "--to '99999999999999' is past"),
    (["--kind", "isr_shrink,bo\rgus"], "unknown kind 'bo\\rgus'"),
])
def test_bad_input_is_one_line_and_exit_2(history_dir: Path, capsys, argv, needle):
    code, lines, err = history(capsys, "--dir", str(history_dir), *argv)
    assert (code, lines) == (2, [])
    assert err.startswith("kmon history: ") and needle in err and err.count("\n") == 1


def test_a_missing_or_empty_history_is_one_line_and_exit_2(tmp_path: Path, capsys):
    code, _, err = history(capsys, "--dir", str(tmp_path / "none"))
    assert code == 2 and err == f"kmon history: no history at {tmp_path / 'none'} (kmon stream writes it to its " \
                                "--history-dir, by default <checkpoint>/history)\n"
    code, _, err = history(capsys, "--dir", str(tmp_path))
    assert code == 2 and "holds no history yet" in err and err.count("\n") == 1


def test_a_corrupted_file_is_skipped_with_a_warning_naming_it(history_dir: Path, capsys, caplog):
    bad = next(history_dir.glob("cluster=c2/date=*")) / "w1-000000000099.parquet"
    bad.write_bytes(b"PAR1 not really")
    code, lines, _ = history(capsys, "--dir", str(history_dir), "--json")
    assert code == 0 and len(lines) == 4
    assert f"skipped {bad}: not a readable Parquet file" in caplog.text


def test_a_file_of_another_schema_or_values_is_skipped_with_one_line_naming_it(history_dir: Path, capsys, caplog):
    """Found by tests/fuzz/history.py: each made `kmon history` raise (TypeError comparing a text time,
    ValueError printing a time past year 9999, TypeError hashing a list); an empty file's warning was
    several lines."""
    day = next(history_dir.glob("cluster=c1/date=*"))
    rows = {c: pa.array([getattr(t, c) for t in [row(1)]]) for c in Transition._fields if c != "cluster"}
    others = {"text time": {**rows, "time_ms": pa.array(["1"])}, "null time": {**rows, "time_ms": pa.array([None], pa.int64())},
              "list broker": {**rows, "broker": pa.array([[1]])}, "time past 9999": {**rows, "time_ms": pa.array([2**62])},
              "float time": {**rows, "time_ms": pa.array([1.5])}}
    for name, columns in others.items():
        pq.write_table(pa.table(columns), day / f"{name}.parquet")
    (day / "empty.parquet").write_bytes(b"")
    code, lines, _ = history(capsys, "--dir", str(history_dir), "--json", "--since", "1w")
    assert code == 0 and len(lines) == 5
    skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped")]
    assert len(skipped) == len(others) + 1 and not any("\n" in message for message in skipped)
    assert sum("not a kmon history file" in message for message in skipped) == len(others)


def test_a_poll_interval_that_is_not_finite_is_refused_before_anything_waits_on_it(history_dir: Path, capsys):
    for value in ("inf", "1e400"):
        with pytest.raises(SystemExit) as e:
            main(["history", "--dir", str(history_dir), "--follow", "--poll-interval", value])
        assert e.value.code == 2 and "finite" in capsys.readouterr().err


def test_follow_prints_new_transitions_until_sigterm(tmp_path: Path):
    log = HistoryLog(tmp_path, "w1", 7)
    log.append(0, [table([Transition(time_ms=int(time.time() * 1000), cluster="c1", kind="topic_created",
                              entity="topic:a", topic="a")])])
    proc = subprocess.Popen([sys.executable, "-m", "cli", "history", "--dir", str(tmp_path), "--follow",
                             "--json", "--poll-interval", "0.1"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["topic"] == "a"
        log.append(1, [table([Transition(time_ms=int(time.time() * 1000), cluster="c1", kind="topic_deleted",
                                  entity="topic:a", topic="a")])])
        assert json.loads(proc.stdout.readline())["kind"] == "topic_deleted"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert "Traceback" not in proc.stderr.read()   # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


def test_a_reader_that_stops_early_ends_it_quietly(tmp_path: Path):
    now = int(time.time() * 1000)
    HistoryLog(tmp_path, "w1", 7).append(0, [table([Transition(time_ms=now - i, cluster="c1", kind="topic_created",
                                                        entity=f"topic:t{i}", topic=f"t{i}") for i in range(20000)])])
    proc = subprocess.Popen([sys.executable, "-m", "cli", "history", "--dir", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"TIME")
    proc.stdout.close()   # as `kmon history | head -1` does
    assert proc.wait(60) == 0
    assert b"Traceback" not in proc.stderr.read()   # type: ignore[union-attr]


def test_kmon_history_loads_neither_the_spark_app_nor_py4j() -> None:
    """It needs the history's path and reader, not the app that writes it (py4j, every view)."""
    import subprocess
    import sys
    loaded = subprocess.run([sys.executable, "-c", "import sys, streaming.history_cli; "
                             "print(sorted(m for m in ('py4j', 'pyspark', 'streaming.app', 'streaming.views') "
                             "if m in sys.modules))"], capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def test_kmon_history_reads_its_files_without_pandas(tmp_path: Path) -> None:
    """pyarrow's dataset API imports pandas, seconds of CPU at each `kmon history`: the files are read one by one."""
    HistoryLog(tmp_path, "w1", 7).append(0, [table([Transition(time_ms=T0, cluster="c1", kind="topic_created",
                                                               entity="topic:t", topic="t")])])
    loaded = subprocess.run([sys.executable, "-c", "import sys; from streaming.history_log import files, read; "
                             f"from pathlib import Path; "
                             f"rows = [r for f in files(Path({str(tmp_path)!r})) for r in read(f)]; "
                             "print(len(rows), 'pandas' in sys.modules)"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert loaded.stdout.split() == ["1", "False"], loaded.stdout + loaded.stderr


def test_a_kraft_row_is_timed_by_the_controllers_append_not_by_when_a_collector_read_it() -> None:
    # a collector restarted reads a minute later what happened while it was away
    old, new = PartitionState("t", 0, 1, 0, (1, 2), 1), PartitionState("t", 0, 1, 0, (1,), 1)
    event = Event(cluster="c1", source="kraft", kind="partition", entity="partition:t:0", op="upsert",
                  observed_ms=T0 + 60_000, data=new, log=LogMeta(offset=42, epoch=3, append_ms=T0))
    (row,) = rows(old, new, event, first_sight=False)
    assert (row.kind, row.time_ms, row.position) == ("isr_shrink", T0, 42)
