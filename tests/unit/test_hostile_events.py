"""No single bad message blinds the monitor (design brief, fault scenario 8).

Property-based: valid events of every kind, then each with one value replaced by one that no
field of its JSON type accepts (another type, out of Kafka's range, not finite, not Unicode),
fed through decode -> fold -> the driver -> the views -> the exposition. Nothing raises, every
bad event is counted, and the entity keeps its last good state.
"""
from __future__ import annotations

import itertools
import json
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import kmon.codec
from kmon.codec import decode, encode, to_json
from kmon.events import (EVENTS_TOPIC, KINDS, STATE_TYPES, ControllerState, Event, MalformedEvent, PartitionState,
                         ZnodeMeta)
from streaming.driver import ViewDriver
from streaming.fold.entity_step import fold
from streaming.fold.entity import EntityRecord, record_from_json, record_to_json
from streaming.published import LatestPublished
from streaming.record_log import RecordLog
from streaming.views import ViewOptions
from streaming.views.exposition import FAMILIES
from tests.unit.event_strategies import events, key_of, strings
from tests.unit.views_builders import batch as driver_batch
from tests.unit.views_builders import errors, history, scrape

# Fixed examples (derandomize) so that CI runs what ran here; no example database in the tree.
# Drawing the examples is most of the cost: these counts keep the file within seconds.
FAST = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PER_KIND = settings(FAST, max_examples=15)   # x 12 kinds


# ------------------------------------------------------------------ one value made hostile

JsonPath = tuple[Any, ...]
surrogate = strings.map(lambda s: s + "\ud800")   # what JSON's "\ud800" escape decodes to


def places(doc: Any, at: JsonPath = ()) -> list[tuple[JsonPath, Any]]:
    """Every value below the document's root, with its path."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    return [place for key, value in items for place in [((*at, key), value), *places(value, (*at, key))]]


# JSON type -> values that no field holding one accepts (every int of the schema lies in [-2, 2**63));
# the schema has no bool field, and a None field is optional, so it takes other values
HOSTILE: dict[type, st.SearchStrategy] = {
    int: st.sampled_from(["7", True, False, 7.0, [7], {"0": 7}])
    | st.integers(max_value=-3) | st.integers(min_value=2**63, max_value=2**70),
    float: st.sampled_from(["1.5", True, [1.5], float("nan"), float("inf"), float("-inf")])
    | st.floats(max_value=-1e-9, allow_infinity=False),
    str: st.sampled_from([0, 1, True, 1.5, ["s"], {"0": "s"}]) | surrogate,
    list: st.sampled_from([{}, "1", 1, True]),
    dict: st.sampled_from([[], "x", 0, False]),
    bool: st.sampled_from([0, 1, "true", None, [True]]),
}


@st.composite
def poisoned(draw: st.DrawFn, doc: dict[str, Any]) -> str:
    """A JSON document (an event, a stored record) with one value, or one object key below its
    top level, made hostile."""
    doc = json.loads(json.dumps(doc))   # a copy
    # hypothesis favours the first spots: the state's, then the envelope's
    spots = sorted(((at, value) for at, value in places(doc) if value is not None), key=lambda s: s[0][0] != "data")
    at, value = draw(st.sampled_from(spots))
    *parent_path, last = at
    parent = doc
    for key in parent_path:
        parent = parent[key]
    if isinstance(parent, dict) and parent_path and draw(st.booleans()):
        parent[draw(surrogate)] = parent.pop(last)   # an unknown field, or a map key that is not Unicode
    else:
        parent[last] = draw(HOSTILE[type(value)])
    return json.dumps(doc)


def wire(event: Event) -> dict[str, Any]:
    return json.loads(encode(event))


def record_of(event: Event) -> str | None:
    """The stored record that folding ``event`` into a new key makes."""
    return fold(key_of(event), None, [(0, 1, encode(event).decode())])["record"]


def every_kind(test: Any) -> Any:
    """``test(kind, data)`` for each kind, with PER_KIND examples each."""
    return pytest.mark.parametrize("kind", KINDS)(PER_KIND(given(st.data())(test)))


# ------------------------------------------------------------------ properties

@every_kind
def test_every_valid_event_decodes_back(kind: str, data: st.DataObject) -> None:
    event = data.draw(events((kind,)))
    assert decode(encode(event)) == event


@every_kind
def test_a_schema_dataclass_is_written_the_same_built_or_decoded(kind: str, data: st.DataObject) -> None:
    """to_json lets orjson write dataclasses itself: a decoded event (its __dict__ filled by the fast
    decoder) must be written as the event built, field order included, and as encode writes it."""
    event = data.draw(events((kind,)))
    assert to_json(decode(encode(event))) == to_json(event) == encode(event).decode()
    record = record_of(event)
    assume(record is not None)
    assert record_to_json(record_from_json(record)) == record


@every_kind
def test_the_driver_reads_an_executor_s_record_unchecked_as_the_checked_path_does(kind: str, data: st.DataObject) -> None:
    """The driver reads the records the executors folded without checking them again
    (record_from_json's trusted): it must make exactly what the checked path makes of them,
    counters and per-broker counters included (a second event of the same entity)."""
    first, second = data.draw(events((kind,))), data.draw(events((kind,)))
    second = replace(second, cluster=first.cluster, entity=first.entity)
    record = fold(key_of(first), None, [(0, 1, encode(first).decode()), (0, 2, encode(second).decode())])["record"]
    assume(record is not None)
    assert record_from_json(record, trusted=True) == record_from_json(record)


@every_kind
def test_a_bad_event_is_counted_and_the_entity_keeps_its_last_good_state(kind: str, data: st.DataObject) -> None:
    event = data.draw(events((kind,)))
    good = record_of(event)
    bad = data.draw(poisoned(wire(event)))
    with pytest.raises(MalformedEvent):
        decode(bad)
    out = fold(key_of(event), good, [(2, 7, bad)])
    assert out["malformed"] == {"unknown": 1}
    assert (out["malformed_partition"], out["malformed_offset"]) == (2, 7)
    assert out["record"] == good


@settings(FAST, max_examples=40)
@given(st.data())
def test_a_batch_with_bad_events_is_counted_and_every_family_still_renders(data: st.DataObject) -> None:
    good = data.draw(st.lists(events(), min_size=1, max_size=8))
    bad = [(key_of(e), data.draw(poisoned(wire(e)))) for e in data.draw(st.lists(st.sampled_from(good), max_size=4))]
    with tempfile.TemporaryDirectory() as d:
        holder = LatestPublished()
        driver = ViewDriver(RecordLog(Path(d)), history(Path(d)), holder, ViewOptions(detail="all"), EVENTS_TOPIC)
        offsets = itertools.count()
        states: dict[str, str | None] = {}
        expected_malformed = 0
        batches = [[(key_of(e), encode(e).decode()) for e in good], bad]
        for batch, values in enumerate(batches):
            rows_by_key: dict[str, list] = defaultdict(list)   # as Spark groups the topic by key
            for key, value in values:
                rows_by_key[key].append((0, next(offsets), value))
            outs = [fold(key, states.get(key), rows) for key, rows in rows_by_key.items()]
            states.update((out["key"], out["record"]) for out in outs)
            expected_malformed += sum(n for out in outs for n in out["malformed"].values())
            driver.on_batch(batch, *driver_batch(outs), started=0.0)
        series = scrape(holder)
    assert set(errors(series).values()) <= {0}
    counted = sum(v for (name, _), v in series.items() if name == "kmon_malformed_total")
    assert counted == expected_malformed >= len(bad)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | strings | surrogate,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
                           max_leaves=12)
field_names = st.sampled_from(sorted({f for cls in (Event, *STATE_TYPES.values())
                                      for f in cls.__dataclass_fields__}))


@FAST
@given(st.binary(max_size=40) | json_values.map(json.dumps)
       | st.dictionaries(field_names, json_values | st.dictionaries(field_names, json_values)).map(json.dumps)
       | st.builds(lambda doc, kind: json.dumps({**doc, "v": 1, "kind": kind}),
                   st.dictionaries(field_names, json_values), st.sampled_from(KINDS)))
def test_decode_raises_malformed_event_and_nothing_else(value: bytes | str) -> None:
    try:
        event = decode(value)
    except MalformedEvent:
        return
    assert decode(encode(event)) == event


@every_kind
def test_a_bad_stored_record_raises_malformed_event_and_nothing_else(kind: str, data: st.DataObject) -> None:
    event = data.draw(events((kind,)))
    record = record_of(event)
    assume(record is not None)   # an end marker without its begin makes none
    stored = json.loads(record)
    if stored["state"] and data.draw(st.booleans()):   # the state, as decode sees an event's
        text = json.dumps({**stored, "state": json.loads(data.draw(poisoned(stored["state"])))})
    else:                                              # the record around it
        text = data.draw(poisoned(stored))
    with pytest.raises(MalformedEvent):
        record_from_json(text)


# ------------------------------------------------------------------ known poisons, by example

BASE = {"v": 1, "cluster": "c1", "source": "zk", "op": "upsert", "observed_ms": 1}


@pytest.mark.parametrize("value", [
    '{"v": []}',                                           # was a TypeError out of decode
    "[" * 100_000 + "]" * 100_000,                         # RecursionError
    '{"v": 1, "x": ' + "1" * 5000 + "}",                   # ValueError: too many digits
    b"\xff\xfe",
    json.dumps({**BASE, "v": True, "kind": "controller", "entity": "controller",
                "data": {"broker_id": 1, "epoch": None}}),
    json.dumps({**BASE, "kind": "partition", "entity": "partition:t:0",
                "data": {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 0, "isr": ["1", "2"],
                         "controller_epoch": 1}}),
    json.dumps({**BASE, "kind": "topic", "entity": "topic:t", "data": {"topic": "t", "topic_id": None,
                                                                       "replicas": {"0": [1, "2"]}}}),
    json.dumps({**BASE, "kind": "topic", "entity": "topic:t", "data": {"topic": "t", "topic_id": None,
                                                                       "replicas": []}}),
    json.dumps({**BASE, "kind": "topic", "entity": "topic:t", "data": {"topic": "t", "topic_id": None,
                                                                       "replicas": {"+1": [1]}}}),
    json.dumps({**BASE, "source": "groups", "kind": "group", "entity": "group:g",
                "data": {"group": "\ud800", "state": "Stable", "generation": 1}}),
    json.dumps({**BASE, "source": "groups", "kind": "group", "entity": "group:g",
                "data": {"group": "g", "state": "Stable", "generation": 10**400}}),
    json.dumps({**BASE, "source": "groups", "kind": "group", "entity": "group:g",
                "data": {"group": "g", "state": "Stable", "generation": 1, "members": None}}),
    json.dumps({**BASE, "source": "groups", "kind": "group", "entity": "group:g",
                "data": {"group": "g", "state": "Stable", "generation": 1,
                         "lag": {"t": {"lag": 1, "lag_seconds": float("inf")}}}}),
    json.dumps({**BASE, "source": "kafka", "kind": "controller", "entity": "controller",
                "data": {"broker_id": 1, "epoch": None}}),
])
def test_known_poisons_are_malformed(value: str | bytes) -> None:
    with pytest.raises(MalformedEvent):
        decode(value)


def test_unknown_envelope_fields_are_ignored_but_unknown_state_fields_are_not() -> None:
    doc = {**BASE, "kind": "controller", "entity": "controller", "data": {"broker_id": -1, "epoch": None}}
    assert decode(json.dumps({**doc, "added_later": 1})).data == ControllerState(-1, None)
    with pytest.raises(MalformedEvent, match="unknown fields"):
        decode(json.dumps({**doc, "data": {**doc["data"], "added_later": 1}}))


# ------------------------------------------------------------------ records stored by a laxer kmon

CONTROLLER = EntityRecord("c1", "controller", "controller", "zk", ControllerState(1, 3), position=4)


def poisoned_record() -> EntityRecord:
    """What an older kmon stored after an ISR event with strings for broker ids."""
    return EntityRecord(cluster="c1", entity="partition:t:0", kind="partition", source="zk",
                        state=PartitionState("t", 0, 1, 0, ("1", "2"), 1), position=5)  # type: ignore[arg-type]


def test_a_poisoned_state_store_record_is_dropped_counted_and_rebuilt() -> None:
    event = Event("c1", "zk", "partition", "partition:t:0", "upsert", 9, PartitionState("t", 0, 1, 0, (1, 2), 1), 6)
    out = fold("c1/partition:t:0", record_to_json(poisoned_record()), [(0, 3, encode(event).decode())])
    assert "PartitionState.isr" in out["dropped_state"]
    assert record_from_json(out["record"]).state == event.data and out["malformed"] == {}
    holder = LatestPublished()
    with tempfile.TemporaryDirectory() as d:
        driver = ViewDriver(RecordLog(Path(d)), history(Path(d)), holder, ViewOptions(), EVENTS_TOPIC)
        driver.on_batch(0, *driver_batch([out]), started=0.0)
    assert scrape(holder)[("kmon_malformed_total", frozenset({"cluster": "c1", "source": "unknown"}.items()))] == 1


def test_a_poisoned_record_log_does_not_stop_the_restart_and_is_counted(tmp_path: Path) -> None:
    lines = [{"key": "c1/controller", "record": record_to_json(CONTROLLER)},
             {"key": "c1/partition:t:0", "record": record_to_json(poisoned_record())},
             {"key": "c1/other", "record": record_to_json(replace(CONTROLLER, broker_counters={"isr_shrinks": {"x": 1}}))},
             {"key": "c1/broker:1", "record": '{"counters": []}'},
             ["not", "a", "line"]]
    poisoned = "".join(json.dumps(line) + "\n" for line in lines) + "{cut\n"
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "full-1.jsonl").write_text(poisoned)
    loaded = RecordLog(tmp_path / "copy").load()
    assert loaded.records == {"c1/controller": CONTROLLER}
    assert loaded.dropped == {"c1": 3, "unknown": 2}
    (tmp_path / "full-1.jsonl").write_text(poisoned)
    for _ in range(2):   # a restart after it: each bad line counted once, and the good record kept
        holder = LatestPublished()
        ViewDriver(RecordLog(tmp_path), history(tmp_path), holder, ViewOptions(), EVENTS_TOPIC)
        series = scrape(holder)
        assert series[("kmon_malformed_total", frozenset({"cluster": "c1", "source": "unknown"}.items()))] == 3
        assert series[("kmon_controller_id", frozenset({"cluster": "c1"}.items()))] == 1
        assert errors(series) == dict.fromkeys(FAMILIES, 0)


def test_a_bad_delta_line_keeps_the_key_s_earlier_record(tmp_path: Path) -> None:
    (tmp_path / "full-1.jsonl").write_text(json.dumps({"key": "c1/controller", "record": record_to_json(CONTROLLER)}) + "\n")
    (tmp_path / "delta-2.jsonl").write_text(json.dumps({"key": "c1/controller", "record": "{}"}) + "\n")
    assert RecordLog(tmp_path).load().records == {"c1/controller": CONTROLLER}


@settings(FAST, max_examples=400)
@given(st.data())
def test_decode_s_fast_path_accepts_nothing_the_checked_path_refuses(data: st.DataObject) -> None:
    """kmon.events writes out a decoder per dataclass for valid input; whatever it accepts, the
    field-by-field checked path must accept too, with the same result."""
    event = data.draw(events())
    doc = json.loads(data.draw(poisoned(wire(event))))
    for cls, raw in ((STATE_TYPES[event.kind], doc.get("data")), (ZnodeMeta, doc.get("znode")),
                     (Event, {**doc, "data": None})):
        try:
            fast = kmon.codec._fast(cls)(raw)
        except Exception:
            continue   # refused: from_plain asks the checked path, which decides
        assert kmon.codec._checked(cls, raw) == fast
