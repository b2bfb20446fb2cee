"""Python's cyclic garbage collector, tuned for the stream app's processes (the driver, and the
workers through kmon's worker daemon, pydaemon.py): collected less often, as every kmon process is
(kmon/gc_tuning.py; the cost measured: bench/NOTES.md, "The Spark app on a real broker"), and more.

:class:`FrozenAfterUse` runs the views' half of a batch without the collector and then moves what
survived out of its reach (``gc.freeze``). Before it freezes, it collects what is not frozen yet,
which is only what every thread made since the last freeze: garbage among it would otherwise be
frozen too, and py4j's proxies are cycles (a proxy's method cache points back at it) that hold
their Java objects in Spark's JVM until Python frees them: a micro-batch's Dataset, its plan and
metrics. What the views drop is freed by reference counting as before; only cyclic garbage among
frozen objects waits for the periodic thaw, a full collection of everything.

After the block it also hands the C heap's free pages back to the OS (``malloc_trim``), at most every
``trim_every_s``: a drain or a storm at 100k partitions allocates and frees hundreds of MB of record
strings and Arrow columns on the sink's and the views' threads, and glibc keeps what a thread freed in
its arena, so the driver's resident memory stayed at the batch's peak (bench/README.md, "The driver's
memory").
"""
from __future__ import annotations

import ctypes
import gc
import logging
import time
from contextlib import contextmanager
from typing import Callable, Iterator

log = logging.getLogger("kmon.stream")
THAW_EVERY_S = 600.0
TRIM_EVERY_S = 10.0


def release_freed_memory() -> None:
    """Free pages of every glibc arena back to the OS; nothing where the C library is not glibc."""
    # the process's own symbols (dlopen(NULL)), libc's among them: no library search, which would run ldconfig
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)   # ctypes lets go of the GIL meanwhile: scrapes are served


# pyarrow's default allocator (mimalloc in pyarrow 21) keeps the segments a batch's columns freed, out of
# malloc_trim's reach; on glibc's, what a drain's Arrow batches freed goes back with the rest (bench/README.md)
ARROW_POOL_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system"}


def arrow_on_the_system_allocator() -> None:
    """This process's Arrow columns from glibc's heap; the Spark workers' get ARROW_POOL_ENV."""
    import pyarrow as pa   # here: the collectors and the CLI need no pyarrow

    pa.set_memory_pool(pa.system_memory_pool())


class FrozenAfterUse:
    """``with frozen.paused(): ...`` runs a block without the cyclic collector, then freezes
    every object alive; every ``thaw_every_s`` it first unfreezes them and collects in full,
    so cycles dropped since then are freed. Used by one thread."""

    def __init__(self, thaw_every_s: float = THAW_EVERY_S, clock: Callable[[], float] = time.monotonic,
                 trim_every_s: float = TRIM_EVERY_S, trim: Callable[[], None] = release_freed_memory):
        self._thaw_every_s = thaw_every_s
        self._trim_every_s = trim_every_s
        self._trim = trim
        self._clock = clock
        self._thawed_at = self._trimmed_at = clock()

    @contextmanager
    def paused(self) -> Iterator[None]:
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            started = time.perf_counter()
            thaw = self._clock() - self._thawed_at >= self._thaw_every_s
            if thaw:
                gc.unfreeze()
                self._thawed_at = self._clock()
            found = gc.collect()   # frozen objects are out of its reach: since the last freeze, or all
            if thaw:
                log.debug("full garbage collection: %d objects freed in %.2f s", found, time.perf_counter() - started)
            gc.freeze()
            if enabled:
                gc.enable()
            if (now := self._clock()) - self._trimmed_at >= self._trim_every_s:
                self._trimmed_at = now
                self._trim()
