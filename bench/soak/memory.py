"""Resident memory of every kmon process through a soak, and how fast it grows after warm-up.

The stream app's Spark JVM commits its heap lazily, in steps, up to spark.driver.memory, and its
resident memory follows as the collector first writes each committed region: in the 50-minute
ZooKeeper-mode soak of 2026-11-27 the heap stayed at 320 MB committed while the resident memory
beyond it (taken as resident less committed) rose 358 -> 377 MB, and read from the kernel's map the
stream JVM's heap was 265 of 392 committed MB resident 30 s after start, 320 at a minute.
That growth is bounded by the heap's limit, and a leak inside the heap ends in OutOfMemoryError, a
restart the verdict flags. The JIT's code cache fills for tens of minutes (the stream JVM's grew
~0.9 MB a minute at 20 to 27 minutes old, compiling ~250 methods a minute), up to its reservation,
240 MB. So each sample also holds how much of its JVMs' heap and code cache is resident, and growth
is judged on the memory beyond both; the committed heap and the code cache are kept for the table.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from bench.support.jvm import Reserved, heap_committed_mb, jcmd_beside, reserved, resident_mb
from bench.support.measure import descendants, rss_mb
from stack.local import LocalStack

KMON_PARTS = ("collector-", "stream")   # the stack's kmon processes (the stream app with its Spark JVM)


class Sample(NamedTuple):
    at: float
    mb: float               # the part's resident memory, its children's with it
    heap_resident: float    # of which its JVMs' heap
    heap_committed: float   # (not all of it resident)
    code_resident: float    # of which its JVMs' JIT code cache

    @property
    def beyond(self) -> float:
        """The memory beyond the JVMs' two bounded reservations, where a leak would show."""
        return self.mb - self.heap_resident - self.code_resident


class JvmMemory(NamedTuple):
    """Of one JVM, MB: its heap resident and committed, and its JIT's code cache resident."""
    heap_resident: float
    heap_committed: float
    code_resident: float


@dataclass
class MemorySampler:
    stack: LocalStack
    record: Path | None = None   # each sample also a JSON line here, split by process (see :func:`split`)
    every_s: float = 10.0
    # (part, pid) -> its samples: one list per process, as the soak restarts kmon's parts too
    samples: dict[tuple[str, int], list[Sample]] = field(default_factory=dict)
    _reserved: dict[int, Reserved] = field(default_factory=dict)   # by a JVM's pid
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
                        parts = split(own, [(_rss_or_zero(pid), self._jvm(pid)) for pid in children])
                        self.samples.setdefault((name, c.pid), []).append(Sample(
                            now, parts.total, parts.heap_resident, parts.heap_committed, parts.code_resident))
                        if record:
                            line = {"at": now, "part": name, "pid": c.pid, **dataclasses.asdict(parts)}
                            record.write(json.dumps(line) + "\n")
                            record.flush()

    def _jvm(self, pid: int) -> JvmMemory | None:
        """None if ``pid`` is no JVM (or it just ended)."""
        committed = heap_committed_mb(pid)
        if committed is None:
            return None
        if pid not in self._reserved:
            self._reserved[pid] = reserved(jcmd_beside(self.stack.tools.java), pid)
        at = self._reserved[pid]
        resident = resident_mb(pid, [span for span in (at.heap, at.code) if span])
        if resident is None:
            return None
        # where jcmd could not say, committed stands in for the heap's resident part (it overstates
        # it), nothing for the code cache's
        return JvmMemory(resident.pop(0) if at.heap else committed, committed, resident.pop(0) if at.code else 0.0)

    def longest_lived(self) -> dict[str, list[Sample]]:
        """Each part's samples from its process that ran longest (the one a growth shows in)."""
        out: dict[str, list[Sample]] = {}
        for (name, _), samples in self.samples.items():
            if len(samples) > len(out.get(name, ())):
                out[name] = samples
        return out


@dataclass(frozen=True)
class Split:
    """One sample of a kmon part, MB: its own process (the stream app's Python driver), its JVMs
    (Spark's) with how much of their heap is resident and committed and of their code cache resident,
    and its other children (Spark's Python workers): where a growth beyond the heap lives."""
    own: float
    jvm: float
    heap_resident: float
    heap_committed: float
    code_resident: float
    other: float

    @property
    def total(self) -> float:
        return self.own + self.jvm + self.other


def split(own_mb: float, children: list[tuple[float, JvmMemory | None]]) -> Split:
    """Pure: ``children`` as (resident MB, what of it is a JVM's, None where it is no JVM)."""
    jvms = [(mb, of) for mb, of in children if of is not None]
    return Split(own_mb, sum(mb for mb, _ in jvms), *(sum(of[i] for _, of in jvms) for i in range(3)),
                 sum(mb for mb, of in children if of is None))


def _rss_or_zero(pid: int) -> float:
    """A child's memory, 0 if it ended meanwhile (Spark's Python workers come and go by the batch)."""
    try:
        return rss_mb(pid)
    except (OSError, ValueError):
        return 0.0


def growth_per_hour(samples: list[tuple[float, float]], warm_up_s: float) -> tuple[float, float, float] | None:
    """Pure: (MB at the end of warm-up, MB at the end, growth per hour as a fraction of the first)
    from a Theil-Sen line through the samples after ``warm_up_s`` (the median of the slopes between
    every two samples); None with too few samples. A line, not the last minus the first: one sample
    taken in a garbage collector's swing would make either end anything. A median, not least squares:
    Spark forks Python workers for a batch now and then, and one sample of the 60-minute KRaft soak's
    stream with 770 MB more of them bent its flat line to -10 % an hour."""
    if not samples:
        return None
    start = samples[0][0] + warm_up_s
    kept = [(t, mb) for t, mb in samples if t >= start]
    if len(kept) < 3:
        return None
    slope = statistics.median((mb2 - mb1) / (t2 - t1) for i, (t1, mb1) in enumerate(kept)
                              for t2, mb2 in kept[i + 1:] if t2 > t1)
    intercept = statistics.median(mb - slope * t for t, mb in kept)
    first, last = intercept + slope * kept[0][0], intercept + slope * kept[-1][0]
    return first, last, slope * 3600 / first if first > 0 else 0.0


class MemoryRow(NamedTuple):
    """A part's memory after warm-up: resident MB then and at the end (fitted), the growth per hour of
    its memory beyond its JVMs' heap and code cache, and those two (heap committed, code cache
    resident) after warm-up and at the end."""
    first: float
    last: float
    growth: float
    heap_first: float
    heap_last: float
    code_first: float
    code_last: float


def memory_row(samples: list[Sample], warm_up_s: float) -> MemoryRow | None:
    """Pure: None with too few samples after warm-up."""
    resident = growth_per_hour([(s.at, s.mb) for s in samples], warm_up_s)
    beyond = growth_per_hour([(s.at, s.beyond) for s in samples], warm_up_s)
    if resident is None or beyond is None:
        return None
    kept = [s for s in samples if s.at >= samples[0].at + warm_up_s]
    return MemoryRow(resident[0], resident[1], beyond[2], kept[0].heap_committed, kept[-1].heap_committed,
                     kept[0].code_resident, kept[-1].code_resident)
