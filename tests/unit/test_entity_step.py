"""The executor's step without Spark: a bucket of keys folded against its state."""
import json

from kmon.codec import encode
from kmon.events import ControllerState, Event, PartitionState, ZnodeMeta
from streaming.fold.entity_step import fold_bucket, summarise
from streaming.fold.entity import record_from_json


def value(entity: str, state, zxid: int) -> str:
    kind = entity.split(":")[0]
    return encode(Event(cluster="c1", source="zk", kind=kind, entity=entity, op="upsert", observed_ms=zxid,
                        data=state, zxid=zxid, znode=ZnodeMeta("/x", zxid, 0, 0))).decode()


def partition(isr: tuple[int, ...], zxid: int) -> str:
    return value("partition:t:0", PartitionState("t", 0, 1, 0, isr, 1), zxid)


def test_each_key_of_a_bucket_is_folded_in_offset_order_and_the_state_carries_over():
    rows = [("c1/partition:t:0", 0, 3, partition((1,), 3)),       # out of order on purpose
            ("c1/controller", 1, 7, value("controller", ControllerState(2, 1), 4)),
            ("c1/partition:t:0", 0, 1, partition((1, 2), 1))]
    state, out = fold_bucket(None, rows)
    by_key = {row["key"]: row for row in out}
    assert set(by_key) == {"c1/partition:t:0", "c1/controller"}
    assert by_key["c1/partition:t:0"]["rows"] == 2
    assert record_from_json(by_key["c1/partition:t:0"]["record"]).broker_counters == {"isr_shrinks": {2: 1}}
    assert json.loads(state) == {key: row["record"] for key, row in by_key.items()}
    state, out = fold_bucket(state, [("c1/partition:t:0", 0, 9, partition((1, 2), 9))])
    assert [record_from_json(row["record"]).broker_counters for row in out] == [{"isr_shrinks": {2: 1},
                                                                                  "isr_expands": {2: 1}}]
    assert set(json.loads(state)) == {"c1/partition:t:0", "c1/controller"}, "keys not in the batch stay"


def test_a_replayed_batch_counts_nothing_twice():
    rows = [("c1/partition:t:0", 0, 1, partition((1, 2), 1)), ("c1/partition:t:0", 0, 2, partition((1,), 2))]
    state, first = fold_bucket(None, rows)
    _, replay = fold_bucket(state, rows)
    assert record_from_json(replay[0]["record"]).broker_counters == {"isr_shrinks": {2: 1}}
    assert first[0]["record"] == replay[0]["record"]


def test_a_state_that_does_not_parse_is_dropped_counted_and_rebuilt():
    for bad in ("{cut", '["a"]', '{"c1/controller": 1}'):
        state, out = fold_bucket(bad, [("c1/partition:t:0", 0, 1, partition((1,), 1))])
        assert out[0]["dropped_state"].startswith("the state of its bucket")
        assert list(json.loads(state)) == ["c1/partition:t:0"]


def test_a_bucket_with_nothing_to_hold_has_no_state():
    state, out = fold_bucket(None, [("c1/partition:t:0", 0, 1, "not json"), ("c1/controller", 0, 2, None)])
    assert state is None
    assert [row["record"] for row in out] == [None, None]
    assert out[0]["malformed"] == {"unknown": 1}


def test_a_buckets_summary_counts_what_its_rows_saw_per_cluster_and_lists_what_to_log():
    rows = [("c1/partition:t:0", 0, 1, partition((1, 2), 1)),
            ("c1/partition:t:0", 0, 2, partition((1,), 5)),
            ("c1/controller", 1, 3, value("controller", ControllerState(2, 1), 4)),
            ("c1/controller", 1, 4, "{not json"),
            ("c2/broker:1", 2, 5, "null")]
    _, out = fold_bucket(None, rows)
    summary = summarise(out)
    assert summary["input_rows"] == {"c1": 4, "c2": 1}
    assert summary["events"] == {"c1": {"zk": {"partition": 2, "controller": 1}}}
    assert summary["newest_observed_ms"] == {"c1": {"zk": 5}}
    assert summary["malformed"] == {"c1": {"unknown": 1}, "c2": {"unknown": 1}}
    problems = {p["key"]: p for p in summary["problems"]}
    assert set(problems) == {"c1/controller", "c2/broker:1"}
    assert (problems["c1/controller"]["malformed_partition"], problems["c1/controller"]["malformed_offset"]) == (1, 4)
    assert json.loads(json.dumps(summary)) == summary, "it travels as JSON"
