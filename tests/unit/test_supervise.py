"""The pause before a crashed collector or part of `kmon run` is started again (kmon/restarts.py)."""
from __future__ import annotations

from kmon.restarts import FIRST_PAUSE_S, HEALTHY_RUN_S, MAX_PAUSE_S, pause_after


def test_the_pause_grows_while_the_child_keeps_dying_young_and_resets_after_a_healthy_run() -> None:
    pauses, pause = [], None
    for _ in range(8):
        pause = pause_after(pause, ran_s=1.0)
        pauses.append(pause)
    assert pauses[0] == FIRST_PAUSE_S
    assert pauses == sorted(pauses) and pauses[-1] == MAX_PAUSE_S
    assert all(b == min(2 * a, MAX_PAUSE_S) for a, b in zip(pauses, pauses[1:]))
    # one death an hour is not a crash loop: each waits the first pause again
    assert pause_after(MAX_PAUSE_S, ran_s=HEALTHY_RUN_S) == FIRST_PAUSE_S
    assert pause_after(MAX_PAUSE_S, ran_s=HEALTHY_RUN_S - 1) == MAX_PAUSE_S
