"""The views' half runs without the cyclic collector and freezes what it leaves (gc_tuning.py)."""
from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from kmon.gc_tuning import FrozenAfterUse


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """A two-object cycle nothing else holds: only the cyclic collector can free it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


def test_the_block_runs_without_the_collector_and_leaves_it_as_it_was() -> None:
    frozen = FrozenAfterUse(clock=lambda: 0.0)
    with frozen.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with frozen.paused():
        pass
    assert not gc.isenabled()


def test_what_a_block_leaves_is_frozen_until_the_thaw_collects_its_cycles() -> None:
    now = [0.0]
    frozen = FrozenAfterUse(thaw_every_s=60, clock=lambda: now[0])
    with frozen.paused():
        garbage = cycle()
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert garbage() is not None, "a frozen cycle is out of the collector's reach"
    now[0] = 59.0
    with frozen.paused():
        pass
    gc.collect()
    assert garbage() is not None
    now[0] = 60.0
    with frozen.paused():
        pass
    assert garbage() is None, "the thaw collects what was frozen"
    assert gc.get_freeze_count() > 0, "and freezes again after it"
