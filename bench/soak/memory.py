"""Resident memory of every kmon process through a soak, and how fast it grows after warm-up."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from bench.support.measure import descendants, rss_mb
from stack.local import LocalStack

KMON_PARTS = ("collector-", "stream")   # the stack's kmon processes (the stream app with its Spark JVM)


@dataclass
class MemorySampler:
    stack: LocalStack
    every_s: float = 10.0
    # (part, pid) -> (time, MB): one list per process, as the soak restarts kmon's parts too
    samples: dict[tuple[str, int], list[tuple[float, float]]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, name="soak-memory", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            assert self.stack.state
            now = time.time()
            for name, c in list(self.stack.state.components.items()):
                if name.startswith(KMON_PARTS) and c.alive():
                    try:
                        mb = rss_mb(c.pid) + sum(map(_rss_or_zero, descendants(c.pid)))
                    except (OSError, ValueError):   # it died between the check and the read
                        continue
                    self.samples.setdefault((name, c.pid), []).append((now, mb))

    def longest_lived(self) -> dict[str, list[tuple[float, float]]]:
        """Each part's samples from its process that ran longest (the one a growth shows in)."""
        out: dict[str, list[tuple[float, float]]] = {}
        for (name, _), samples in self.samples.items():
            if len(samples) > len(out.get(name, ())):
                out[name] = samples
        return out


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
