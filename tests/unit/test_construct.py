"""kmon.construct: the schema's instances built without their frozen __init__ are the same instances."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import assume, given, settings

from kmon.codec import encode
from kmon.construct import constructor, replace
from kmon.events import Event, LogMeta, PartitionState
from tests.unit.event_strategies import events


def _args(obj: object) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(events())
def test_a_built_event_equals_hashes_and_encodes_as_its_init_makes_it(event: Event) -> None:
    built = constructor(Event)(**{**_args(event), "data": event.data and constructor(type(event.data))(
        **_args(event.data))})
    assert built == event
    try:
        expected = hash(event)
    except TypeError:   # a state holding a dict (a broker's features, a topic's assignment)
        expected = None
    assert expected is None or hash(built) == expected
    assert encode(built) == encode(event)
    assert type(built) is Event and built.message_key == event.message_key


def test_defaults_are_the_classes_and_positional_arguments_work() -> None:
    assert constructor(LogMeta)(7, 2) == LogMeta(7, 2) and constructor(LogMeta)(7, 2).append_ms is None
    state = constructor(PartitionState)("t", 0, 1, 2, (1, 2), 3, remaining=(1, 2))
    assert state == PartitionState("t", 0, 1, 2, (1, 2), 3, remaining=(1, 2))
    with pytest.raises(TypeError):
        constructor(LogMeta)(7)   # a required field missing, as __init__ says


@settings(max_examples=300, deadline=None)
@given(events(("partition",)))
def test_replace_is_dataclasses_replace(event: Event) -> None:
    assume(event.data is not None)
    before = encode(event)
    for changes in ({"leader": 4}, {"isr": (), "elr": (1,)}, {}):
        ours, theirs = replace(event.data, **changes), dataclasses.replace(event.data, **changes)
        assert ours == theirs and ours is not event.data
        assert encode(dataclasses.replace(event, data=ours)) == encode(dataclasses.replace(event, data=theirs))
    assert encode(event) == before   # the original is untouched


def test_what_the_init_does_more_than_set_fields_is_refused() -> None:
    @dataclass(frozen=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            raise ValueError

    @dataclass(frozen=True, slots=True)
    class Slotted:
        x: int

    for cls in (Checked, Slotted):
        with pytest.raises(TypeError, match=cls.__name__):
            constructor(cls)
        with pytest.raises(TypeError):
            replace(object.__new__(cls) if cls is not Slotted else Slotted(1), x=1)


def test_a_default_factory_makes_a_new_value_at_each_call() -> None:
    @dataclass(frozen=True)
    class Made:
        x: list = field(default_factory=list)

    first, second = constructor(Made)(), constructor(Made)()
    assert first == Made() and first.x is not second.x and constructor(Made)([1]).x == [1]
