"""The views' half runs without the cyclic collector and freezes what it leaves (gc_tuning.py)."""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Iterator

import pytest

from streaming.gc_tuning import FrozenAfterUse, release_freed_memory


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


def test_the_c_heap_is_trimmed_after_a_block_at_most_every_trim_interval() -> None:
    now, trims = [0.0], []
    frozen = FrozenAfterUse(clock=lambda: now[0], trim_every_s=10, trim=lambda: trims.append(now[0]))
    for now[0] in (1.0, 9.0, 10.0, 15.0, 20.5):
        with frozen.paused():
            pass
    assert trims == [10.0, 20.5]


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_freed_strings_pinned_by_a_few_survivors_go_back_to_the_os() -> None:
    """What a batch frees between strings it keeps stays with the process until trimmed (glibc only
    gives back the top of its heap by itself)."""
    strings = [("x" * 700 + str(i)) for i in range(200_000)]   # record-sized: past pymalloc, in glibc's heap
    kept = strings[::50]
    del strings
    before = _resident_bytes()
    release_freed_memory()
    freed = before - _resident_bytes()
    assert len(kept) == 4_000
    assert freed > 50 * 2**20, f"{freed / 2**20:.0f} MB given back of ~140 MB freed"


FREED_ARROW_COLUMNS = """
import sys, time
import pyarrow as pa
from streaming.gc_tuning import arrow_on_the_system_allocator, release_freed_memory
if sys.argv[1] == "system":
    arrow_on_the_system_allocator()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
base = rss()
columns = [pa.array(["x" * 700] * 2000) for _ in range(200)]   # a drain batch's record columns, ~280 MB
peak = rss() - base
kept = columns[::40]
del columns
time.sleep(0.2)
release_freed_memory()
print(peak, rss() - base)
"""


def test_arrow_columns_a_batch_freed_go_back_to_the_os_on_the_system_allocator() -> None:
    """pyarrow's own allocator (mimalloc) kept ~all of it, out of malloc_trim's reach (bench/README.md)."""
    done = subprocess.run([sys.executable, "-c", FREED_ARROW_COLUMNS, "system"], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    peak, left = map(int, done.stdout.split())
    assert peak > 200 * 2**20 and left < peak / 3, (peak, left)
