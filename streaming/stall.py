"""A micro-batch that never ends, told apart from a long one by how long it has run.

A batch can hang where nothing times out: pyspark's transfer of a batch's rows to the driver
(``toArrow``) waits for good on a failed socket handshake, and a Python worker that stopped
(SIGSTOP, a frozen cgroup) holds its task for good. The query then neither fails nor
progresses: the views freeze and only the KmonPipelineStalled alert says so. ``run_until``
asks Spark every poll whether a trigger is running and exits once one has run longer than
``--stall-timeout``, for the service manager to start kmon again from its checkpoint (the
stuck batch was never committed: it is read again).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BatchClock:
    """How long the running micro-batch has run, from polls of whether a trigger is active and
    of how many batches the sink has finished (a new one finished: a new batch)."""
    since: float | None = None
    finished: int = -1

    def running_for(self, active: bool, finished: int, now: float) -> float:
        if not active:
            self.since = None
        elif self.since is None or finished != self.finished:
            self.since = now
        self.finished = finished
        return 0.0 if self.since is None else now - self.since
