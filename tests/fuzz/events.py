"""Values on the events topic, and the stream's fold of them.

tests/unit/test_hostile_events.py poisons one JSON value of a valid event at a time (hypothesis);
this mutates valid events' bytes and documents many times over, and folds whole sequences:

* ``decode``: kmon.codec.decode on one value: an Event or MalformedEvent, nothing else; an Event
  is written back as it was read.
* ``fold``: one key's values folded by the stream's step (streaming/fold/entity_step.fold, which
  calls entity.apply_event) onto a stored record: it never raises, its record is read back by
  the next batch, each value that does not decode is counted, and the record is exactly the one
  the values that decode make (the entity kept its last good state).
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from kmon.codec import decode, encode
from kmon.events import KINDS, Event, MalformedEvent
from streaming.fold.entity_step import fold
from streaming.fold.entity import record_from_json
from tests.fuzz.cases import Case
from tests.fuzz.engine import Target
from tests.unit.event_strategies import events, key_of

_PER_KIND = 4


def _drawn(kind: str) -> list[Event]:
    """Valid events of one kind, the same on every run (tests/unit/event_strategies.py's strategy)."""
    out: list[Event] = []

    @settings(max_examples=_PER_KIND, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(events((kind,)))
    def draw(event: Event) -> None:
        out.append(event)

    draw()
    return out


def _seeds() -> list[Case]:
    """Per kind, its events as one entity's sequence (the first one's key)."""
    cases = []
    for kind in KINDS:
        drawn = _drawn(kind)
        first = drawn[0]
        same = [first] + [replace(e, cluster=first.cluster, entity=first.entity) for e in drawn[1:]]
        cases.append(tuple((key_of(first).encode(), encode(e)) for e in same))
    return cases


def check_decode(case: Case) -> None:
    for _, value in case:
        try:
            event = decode(value or b"")
        except MalformedEvent:
            continue
        assert decode(encode(event)) == event, event


def check_fold(case: Case) -> None:
    key = (case[0][0] or b"").decode("utf-8", "replace")
    rows = [(0, offset, (value or b"").decode("utf-8", "replace")) for offset, (_, value) in enumerate(case)]
    out = fold(key, None, rows)
    readable = [row for row in rows if _decodes(row[2])]
    assert sum(out["malformed"].values()) >= len(rows) - len(readable)
    assert out["record"] == fold(key, None, readable)["record"]
    if out["record"] is not None:
        record_from_json(out["record"])
        again = fold(key, out["record"], rows)   # the same values replayed onto what they made
        assert again["dropped_state"] is None


def _decodes(value: str) -> bool:
    try:
        decode(value)
        return True
    except MalformedEvent:
        return False


TARGETS = (
    Target("decode", 2, _seeds, check_decode),
    Target("fold", 2, _seeds, check_fold, max_messages=16),
)
