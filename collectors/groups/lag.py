"""Consumer lag in seconds, estimated from sampled log end offsets.

Method (as in Burrow and kafka-lag-exporter): for each partition keep a bounded table
of samples ``(end_offset, time)`` of the log end offset, oldest first, with strictly
increasing offsets and times. The lag of a committed offset ``c`` at time ``now`` is
``now - t(c)``, where ``t(c)`` is the time at which the end offset was ``c``:

* ``c`` at or beyond the newest end offset: the consumer is caught up, lag 0 (exact).
* ``c`` equal to a sampled offset: ``t(c)`` is that sample's time (exact).
* ``c`` between two samples: ``t(c)`` is linearly interpolated between them.
* ``c`` older than the oldest sample: extrapolated back from the two oldest samples'
  production rate; with a single sample, ``now`` minus that sample's time, which is a
  lower bound of the true lag.

Error bound: the end offset only grows, so the true moment it reached ``c`` lies
between the two samples around ``c`` (for an exact hit, between the previous sample and
this one). An interpolated or exact estimate is therefore off by at most one sampling
interval (the time between those two samples). Extrapolation has no such bound: it
assumes the production rate before the oldest sample was that of the two oldest ones.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

__all__ = ["EndOffsetSamples", "LagTable"]

DEFAULT_MAX_SAMPLES = 60


class EndOffsetSamples:
    """Bounded (end offset, time) samples of one partition, oldest first."""

    def __init__(self, max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
        _check_max_samples(max_samples)
        self._samples: deque[tuple[int, float]] = deque(maxlen=max_samples)

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, end_offset: int, timestamp: float) -> bool:
        """Record a sample; returns False when it was dropped."""
        if self._samples:
            last_offset, last_time = self._samples[-1]
            if end_offset < last_offset:
                # The log went backwards (topic recreated, unclean leader election):
                # older samples describe another log.
                self._samples.clear()
            elif end_offset == last_offset or timestamp <= last_time:
                # Keep the earliest time of an end offset: it bounds when it was reached.
                # A clock going backwards would make times non-monotonic: drop that too.
                return False
        self._samples.append((end_offset, timestamp))
        return True

    def lag_seconds(self, committed_offset: int, now: float) -> float | None:
        """Estimated lag of `committed_offset` at `now`; None without samples."""
        if not self._samples:
            return None
        newest_offset, _ = self._samples[-1]
        if committed_offset >= newest_offset:
            return 0.0
        oldest_offset, _ = self._samples[0]
        if committed_offset < oldest_offset:
            return self._extrapolate(committed_offset, now)
        return self._interpolate(committed_offset, now)

    def _interpolate(self, committed_offset: int, now: float) -> float:
        # Precondition: oldest offset <= committed < newest, so both neighbours exist.
        index = bisect_right([offset for offset, _ in self._samples], committed_offset)
        # an exact hit on the older sample is that sample's time
        return _elapsed(now, _time_at(committed_offset, self._samples[index - 1], self._samples[index]))

    def _extrapolate(self, committed_offset: int, now: float) -> float:
        if len(self._samples) == 1:   # a lower bound of the true lag
            _, time = self._samples[0]
            return _elapsed(now, time)
        return _elapsed(now, _time_at(committed_offset, self._samples[0], self._samples[1]))


class LagTable:
    """End-offset samples of many partitions, each table bounded to `max_samples`."""

    def __init__(self, max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
        _check_max_samples(max_samples)  # fail at construction, not at the first add()
        self._max_samples = max_samples
        self._partitions: dict[tuple[str, int], EndOffsetSamples] = {}

    def add(self, topic: str, partition: int, end_offset: int, timestamp: float) -> bool:
        key = (topic, partition)
        if key not in self._partitions:
            self._partitions[key] = EndOffsetSamples(self._max_samples)
        return self._partitions[key].add(end_offset, timestamp)

    def lag_seconds(
        self, topic: str, partition: int, committed_offset: int, now: float
    ) -> float | None:
        samples = self._partitions.get((topic, partition))
        return None if samples is None else samples.lag_seconds(committed_offset, now)

    def forget(self, topic: str, partition: int) -> None:
        """Drop a deleted partition's samples."""
        self._partitions.pop((topic, partition), None)


def _check_max_samples(max_samples: int) -> None:
    if max_samples < 1:
        raise ValueError(f"max_samples must be at least 1, got {max_samples}")


def _time_at(offset: int, a: tuple[int, float], b: tuple[int, float]) -> float:
    """Time at which the end offset was `offset`, on the line through samples a and b."""
    (offset_a, time_a), (offset_b, time_b) = a, b
    return time_a + (offset - offset_a) * (time_b - time_a) / (offset_b - offset_a)


def _elapsed(now: float, time: float) -> float:
    # A `now` earlier than a sample (clock skew between callers) is no lag, not negative.
    return max(0.0, now - time)

