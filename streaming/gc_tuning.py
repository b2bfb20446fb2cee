"""Python's cyclic garbage collector, tuned for the stream's processes.

With Python's default thresholds (700, 10, 10) a collection runs every 700 new objects, and the
older generations, which at 100k partitions hold millions of long-lived objects (the driver's
records and rendered views; the workers' pandas and pyarrow), are re-scanned every few thousand
of them: a third of the driver's time per micro-batch and a seventh of the workers' fold
(bench/README.md, "The Spark app on a real broker"). Nothing kmon keeps is cyclic garbage in
volume, so collecting 30 times less often costs little memory. The driver sets it when the app
starts; the workers inherit it from kmon's worker daemon (pydaemon.py), when that runs them.
"""
from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)


def collect_less_often() -> None:
    gc.set_threshold(*THRESHOLDS)
