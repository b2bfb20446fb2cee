"""kmon.construct: the schema's frozen dataclasses built without their __init__, the same instances."""
import dataclasses

import orjson
import pytest

from kmon.construct import constructor, replace
from kmon.events import BrokerState, Event, LogMeta, PartitionState, TopicState


def partition_state(**changes) -> dict:
    return dict(topic="orders", partition=3, leader=2, leader_epoch=5, isr=(2, 1), controller_epoch=7, **changes)


@pytest.mark.parametrize("fields", [partition_state(), partition_state(deleting=True, partition_epoch=9, elr=(1,))])
def test_an_instance_equal_to_its_init_s_hashable_and_encoded_alike(fields):
    built, made = constructor(PartitionState)(**fields), PartitionState(**fields)
    assert type(built) is PartitionState
    assert built == made and hash(built) == hash(made)
    assert orjson.dumps(built) == orjson.dumps(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.leader = 1   # type: ignore[misc]


def test_positional_arguments_defaults_and_default_factories():
    assert constructor(LogMeta)(10, 2) == LogMeta(10, 2) == LogMeta(10, 2, None)
    a, b = constructor(BrokerState)(1, "h", 9092, None), constructor(BrokerState)(1, "h", 9092, None)
    assert a == BrokerState(1, "h", 9092, None)
    assert a.features == {} and a.features is not b.features      # a new one each time, as __init__ makes
    topic = constructor(TopicState)(topic="t", topic_id=None, replicas={0: (1,)}, config={"a": "b"})
    assert topic == TopicState("t", None, {0: (1,)}, config={"a": "b"})


def test_wrong_arguments_are_refused_as_by_init():
    with pytest.raises(TypeError):
        constructor(LogMeta)(1)
    with pytest.raises(TypeError):
        constructor(LogMeta)(1, 2, bogus=3)


def test_replace_as_dataclasses_replace():
    event = Event("c", "kraft", "partition", "partition:orders:3", "upsert", 5, PartitionState(**partition_state()),
                  log=LogMeta(1, 2))
    assert replace(event, op="delete", data=None) == dataclasses.replace(event, op="delete", data=None)
    assert orjson.dumps(replace(event.data, isr=(2,))) == orjson.dumps(dataclasses.replace(event.data, isr=(2,)))
    with pytest.raises(TypeError):
        replace(event, bogus=1)


def test_a_class_whose_init_does_more_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            assert self.x > 0

    @dataclasses.dataclass(frozen=True)
    class Derived:
        x: int
        y: int = dataclasses.field(init=False, default=0)

    for cls in (Checked, Derived):
        with pytest.raises(TypeError):
            constructor(cls)
