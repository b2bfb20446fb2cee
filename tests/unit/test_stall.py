"""How long the running micro-batch has run (streaming/stall.py), from Spark's status polls."""
from __future__ import annotations

from streaming.stall import BatchClock


def test_a_batch_runs_from_the_first_poll_that_saw_it_until_it_finishes() -> None:
    clock = BatchClock()
    assert clock.running_for(active=False, finished=0, now=0.0) == 0
    assert clock.running_for(active=True, finished=0, now=1.0) == 0     # a trigger starts
    assert clock.running_for(active=True, finished=0, now=31.0) == 30   # still the same batch
    assert clock.running_for(active=False, finished=1, now=32.0) == 0   # it finished
    assert clock.running_for(active=True, finished=1, now=33.0) == 0


def test_batches_back_to_back_each_start_the_clock_again() -> None:
    """A backlog keeps a trigger active from one poll to the next: a finished batch between
    two polls means a new batch is running."""
    clock = BatchClock()
    running = [clock.running_for(active=True, finished=n, now=10.0 * n) for n in range(10)]
    assert running == [0.0] * 10
    assert clock.running_for(active=True, finished=9, now=100.0) == 10
