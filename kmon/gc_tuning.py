"""Python's cyclic garbage collector, tuned for kmon's long-lived processes: the collectors, the stream
app's driver and its workers (streaming/gc_tuning.py does more there).

With Python's default thresholds the older generations, which at scale hold millions of long-lived
objects (a collector's image of 100k partitions and more, the driver's records and views, the workers'
pandas and pyarrow), are scanned again every few thousand new objects, and find nothing to free: nothing
kmon keeps is cyclic garbage in volume, so collecting less often costs little memory (bench/NOTES.md).
"""
from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)


def collect_less_often() -> None:
    gc.set_threshold(*THRESHOLDS)
