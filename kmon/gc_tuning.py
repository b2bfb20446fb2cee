"""Python's cyclic garbage collector, tuned for the stream's processes and the KRaft collector.

With Python's default thresholds (700, 10, 10) a collection runs every 700 new objects, and the
older generations, which at 100k partitions hold millions of long-lived objects (the driver's
records and rendered views; the workers' pandas and pyarrow), are re-scanned every few thousand
of them: a third of the driver's time per micro-batch and a seventh of the workers' fold
(bench/README.md, "The Spark app on a real broker"). Nothing kmon keeps is cyclic garbage in
volume, so collecting 30 times less often costs little memory. The driver sets it when the app
starts; the workers inherit it from kmon's worker daemon (pydaemon.py), when that runs them.

Even so, the views' half of a broker failure at 100k partitions makes ~400k objects that
live on (records, judged partitions, rendered text), and the younger generations' collections
while it ran cost it 0.1 to 0.6 s of its ~1 s. :class:`FrozenAfterUse` runs that half without
the collector and then moves what survived out of its reach (``gc.freeze``): scanning it would
find nothing to free. Before it freezes, it collects what is not frozen yet, which is only what
every thread made since the last freeze: garbage among it would otherwise be frozen too, and
py4j's proxies are cycles (a proxy's method cache points back at it) that hold their Java
objects in Spark's JVM until Python frees them: a micro-batch's Dataset, its plan and metrics.
What the views drop is freed by reference counting as before; only cyclic garbage among frozen
objects waits for the periodic thaw, a full collection of everything. The KRaft
collector folds each fetch of the metadata log the same way (collectors/kraft/collector.py): a
start at 100k partitions keeps a few hundred thousand objects, which the full collections
triggered while they were made re-scanned again and again.
"""
from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from typing import Callable, Iterator

log = logging.getLogger("kmon.stream")
THRESHOLDS = (20_000, 20, 20)
THAW_EVERY_S = 600.0


def collect_less_often() -> None:
    gc.set_threshold(*THRESHOLDS)


class FrozenAfterUse:
    """``with frozen.paused(): ...`` runs a block without the cyclic collector, then freezes
    every object alive; every ``thaw_every_s`` it first unfreezes them and collects in full,
    so cycles dropped since then are freed. Used by one thread."""

    def __init__(self, thaw_every_s: float = THAW_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self._thaw_every_s = thaw_every_s
        self._clock = clock
        self._thawed_at = clock()

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
