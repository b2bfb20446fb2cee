"""Resident memory of every kmon process through a soak, and how fast it grows after warm-up.

The stream app's Spark JVM commits its heap lazily, in steps, up to spark.driver.memory: in the
first hour of the 60-minute soak of 2026-11-27 each step of its resident memory was a step of its
committed heap (279 -> 381 -> 510 MB). That growth is bounded by the heap's limit, and a leak inside
the heap ends in OutOfMemoryError, a restart the verdict flags. So each sample also holds the heap
the part's JVMs have committed, and growth is judged on the memory beyond it."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.support.jvm import heap_committed_mb
from bench.support.measure import descendants, rss_mb
from stack.local import LocalStack

KMON_PARTS = ("collector-", "stream")   # the stack's kmon processes (the stream app with its Spark JVM)


@dataclass
class MemorySampler:
    stack: LocalStack
    record: Path | None = None   # each sample also a JSON line here, split by process (see :func:`split`)
    every_s: float = 10.0
    # (part, pid) -> (time, MB, of which JVM heap committed MB): one list per process, as the soak
    # restarts kmon's parts too
    samples: dict[tuple[str, int], list[tuple[float, float, float]]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, name="soak-memory", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        with open(self.record, "w") if self.record else contextlib.nullcontext() as record:
            while not self._stop.wait(self.every_s):
                assert self.stack.state
                now = time.time()
                for name, c in list(self.stack.state.components.items()):
                    if name.startswith(KMON_PARTS) and c.alive():
                        try:
                            own, children = rss_mb(c.pid), descendants(c.pid)
                        except (OSError, ValueError):   # it died between the check and the read
                            continue
                        parts = split(own, [(_rss_or_zero(pid), heap_committed_mb(pid)) for pid in children])
                        self.samples.setdefault((name, c.pid), []).append((now, parts.total, parts.heap))
                        if record:
                            line = {"at": now, "part": name, "pid": c.pid, **dataclasses.asdict(parts)}
                            record.write(json.dumps(line) + "\n")
                            record.flush()

    def longest_lived(self) -> dict[str, list[tuple[float, float, float]]]:
        """Each part's samples from its process that ran longest (the one a growth shows in)."""
        out: dict[str, list[tuple[float, float, float]]] = {}
        for (name, _), samples in self.samples.items():
            if len(samples) > len(out.get(name, ())):
                out[name] = samples
        return out


@dataclass(frozen=True)
class Split:
    """One sample of a kmon part, MB: its own process (the stream app's Python driver), its JVMs
    (Spark's) and their committed heap, and its other children (Spark's Python workers): where a
    growth beyond the heap lives."""
    own: float
    jvm: float
    heap: float
    other: float

    @property
    def total(self) -> float:
        return self.own + self.jvm + self.other


def split(own_mb: float, children: list[tuple[float, float | None]]) -> Split:
    """Pure: ``children`` as (resident MB, heap committed MB or None where it is no JVM)."""
    jvms = [(mb, heap) for mb, heap in children if heap is not None]
    return Split(own_mb, sum(mb for mb, _ in jvms), sum(heap for _, heap in jvms),
                 sum(mb for mb, heap in children if heap is None))


def _rss_or_zero(pid: int) -> float:
    """A child's memory, 0 if it ended meanwhile (Spark's Python workers come and go by the batch)."""
    try:
        return rss_mb(pid)
    except (OSError, ValueError):
        return 0.0


def growth_per_hour(samples: list[tuple[float, float]], warm_up_s: float) -> tuple[float, float, float] | None:
    """Pure: (MB at the end of warm-up, MB at the end, growth per hour as a fraction of the first)
    from a least-squares line through the samples after ``warm_up_s``; None with too few samples.
    A line, not the last minus the first: one sample taken in a garbage collector's swing would make
    either end anything."""
    if not samples:
        return None
    start = samples[0][0] + warm_up_s
    kept = [(t, mb) for t, mb in samples if t >= start]
    if len(kept) < 3:
        return None
    n = len(kept)
    mean_t, mean_mb = sum(t for t, _ in kept) / n, sum(mb for _, mb in kept) / n
    var = sum((t - mean_t) ** 2 for t, _ in kept)
    slope = sum((t - mean_t) * (mb - mean_mb) for t, mb in kept) / var if var else 0.0
    first = mean_mb + slope * (kept[0][0] - mean_t)
    last = mean_mb + slope * (kept[-1][0] - mean_t)
    return first, last, slope * 3600 / first if first > 0 else 0.0


def beyond_heap(samples: list[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """Pure: each sample's resident memory less the JVM heap committed at that moment."""
    return [(t, mb - heap) for t, mb, heap in samples]


def memory_row(samples: list[tuple[float, float, float]],
               warm_up_s: float) -> tuple[float, float, float, float, float] | None:
    """Pure: resident MB after warm-up and at the end (fitted), growth per hour of the memory beyond
    the JVM heap, and the heap committed after warm-up and at the end; None with too few samples."""
    resident = growth_per_hour([(t, mb) for t, mb, _ in samples], warm_up_s)
    beyond = growth_per_hour(beyond_heap(samples), warm_up_s)
    if resident is None or beyond is None:
        return None
    heap = [h for t, _, h in samples if t >= samples[0][0] + warm_up_s]
    return resident[0], resident[1], beyond[2], heap[0], heap[-1]
