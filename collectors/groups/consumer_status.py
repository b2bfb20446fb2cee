"""Each consumer group judged from its offsets over a sliding window, as Burrow judges them: pure.

Every poll adds a sample per partition a group commits to: (time, committed offset, end offset).
Over the samples of the last ``window_s`` seconds a partition is

* ``ok``: caught up (no lag), or its committed offset moves and its lag does not keep growing;
* ``falling_behind``: its committed offset moves, but its lag grew at every sample of the window;
* ``rewound``: its committed offset went back (a reset, or a consumer replaying);
* ``stalled``: its committed offset did not move for the whole window while new messages arrived
  and it has lag: a consumer alive enough to hold its partitions, doing nothing with them;
* ``stopped``: its committed offset did not move for the whole window, with lag, and nothing new
  arrived: a backlog nobody works on.

A partition is judged once its samples span the window; a topic that gets no new messages with
nothing left to consume is ``ok``, however old its last commit. The group's status is its worst
partition's. What the window trades: a consumer that commits less often than every ``window_s``
seconds while messages arrive is reported stalled; a shorter window would say it sooner (Burrow
waits for ten commits).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Mapping

from kmon.metrics import CONSUMER_STATUSES

PartitionKey = tuple[str, int]   # (topic, partition)


@dataclass(frozen=True)
class Sample:
    at: float
    committed: int
    end: int


def judge(samples: list[Sample], window_s: float) -> str | None:
    """A partition's status from its samples (oldest first), None until they span the window."""
    if not samples or samples[-1].at - samples[0].at < window_s:
        return None
    last = samples[-1]
    if any(b.committed < a.committed for a, b in zip(samples, samples[1:])):
        return "rewound"
    if last.end - last.committed <= 0:
        return "ok"
    if all(s.committed == last.committed for s in samples):
        return "stalled" if last.end > samples[0].end else "stopped"
    lags = [s.end - s.committed for s in samples]
    return "falling_behind" if all(b > a for a, b in zip(lags, lags[1:])) else "ok"


@dataclass
class ConsumerStatus:
    """The samples of every group's partitions, and their statuses."""
    window_s: float = 60.0
    _samples: dict[str, dict[PartitionKey, deque[Sample]]] = field(default_factory=dict)

    def observe(self, at: float, committed: Mapping[str, Mapping[PartitionKey, int]],
                end_offsets: Mapping[PartitionKey, int]) -> None:
        """One poll: each group's committed offsets and the partitions' end offsets. A partition
        without an end offset this time keeps its samples; one no longer committed to is dropped."""
        self._samples = {group: self._samples.get(group, {}) for group in committed}
        for group, offsets in committed.items():
            kept = self._samples[group]
            for partition in set(kept) - set(offsets):
                del kept[partition]
            for partition, offset in offsets.items():
                end = end_offsets.get(partition)
                if end is None:
                    continue
                window = kept.setdefault(partition, deque())
                window.append(Sample(at, offset, end))
                # keep one sample older than the window: the window then spans it whole
                while len(window) > 2 and at - window[1].at >= self.window_s:
                    window.popleft()

    def partitions(self, group: str) -> dict[PartitionKey, str]:
        """The statuses of a group's judged partitions."""
        judged = {p: judge(list(s), self.window_s) for p, s in self._samples.get(group, {}).items()}
        return {p: status for p, status in judged.items() if status is not None}

    def group(self, group: str) -> str | None:
        """The group's status: its worst partition's; None until one is judged."""
        statuses = self.partitions(group).values()
        return max(statuses, key=CONSUMER_STATUSES.index) if statuses else None
