"""Stand-ins the unit tests share for what is not under test."""
from __future__ import annotations


class Clock:
    """A monotonic clock the test moves by hand (``clock.now += 5``)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
