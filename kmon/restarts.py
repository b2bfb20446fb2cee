"""The pause before a process that died unasked is started again (pure).

Shared by the two supervisors: `kmon collect`'s around its collector child
(cli/supervise.py) and `kmon run`'s around the parts of the monitor (stack/keeper.py).
"""
from __future__ import annotations

FIRST_PAUSE_S = 1.0
MAX_PAUSE_S = 30.0
HEALTHY_RUN_S = 2 * MAX_PAUSE_S   # a death after a run this long is not part of a crash loop


def pause_after(previous: float | None, ran_s: float) -> float:
    """The pause before starting again a process that died after ``ran_s`` seconds;
    ``previous`` is the pause before that run (None for the first)."""
    if previous is None or ran_s >= HEALTHY_RUN_S:
        return FIRST_PAUSE_S
    return min(previous * 2, MAX_PAUSE_S)
