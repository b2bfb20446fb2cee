"""The views' half runs without the cyclic collector and freezes what it leaves (gc_tuning.py)."""
from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from streaming.gc_tuning import FrozenAfterUse


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


def test_garbage_made_since_the_last_freeze_is_collected_not_frozen() -> None:
    frozen = FrozenAfterUse(clock=lambda: 0.0)
    with frozen.paused():
        garbage = cycle()
    assert garbage() is None, "a cycle dropped before the freeze is collected (py4j's proxies are cycles)"
    assert gc.get_freeze_count() > 0


def test_a_cycle_alive_at_the_freeze_waits_for_the_thaw() -> None:
    now = [0.0]
    frozen = FrozenAfterUse(thaw_every_s=60, clock=lambda: now[0])
    with frozen.paused():
        held = [cycle_kept := Node()]
        cycle_kept.other = cycle_kept
        alive = weakref.ref(cycle_kept)
        del cycle_kept
    held.clear()   # garbage now, frozen while it was alive
    gc.collect()
    assert alive() is not None, "a frozen cycle is out of the collector's reach"
    now[0] = 59.0
    with frozen.paused():
        pass
    assert alive() is not None
    now[0] = 60.0
    with frozen.paused():
        pass
    assert alive() is None, "the thaw collects what was frozen"
    assert gc.get_freeze_count() > 0, "and freezes again after it"
