"""`kmon run` keeps its own parts alive, as a service manager would.

A part of the monitor that dies without being asked to (a collector, the stream app, Prometheus,
Alertmanager, kmon's events node: the kernel's OOM killer, a crash) is started again after a
pause that grows while it keeps dying young (kmon/restarts.py), with one log line saying which,
how it ended and when it comes back. The monitored cluster's brokers and ZooKeeper are what a
user faults on purpose: those are left as they are.

It runs in the thread that owns the stack (a child dies with the thread that started it, see
signals.die_with_parent) and only spawns: a restarted part says itself when it is ready.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from kmon.restarts import pause_after
from stack.local import LocalStack
from stack.process import exit_status

log = logging.getLogger("kmon.run")


def kept(name: str) -> bool:
    """Whether `kmon run` restarts this component: its own parts, not the monitored cluster."""
    return not (name == "zookeeper" or name.startswith("broker-"))


@dataclass
class _Part:
    since: float                   # when it was (last) seen started
    pause: float | None = None     # the pause before its latest restart
    due: float | None = None       # when it starts again, while it is down


class Keeper:
    def __init__(self, stack: LocalStack, clock: Callable[[], float] = time.monotonic):
        self.stack = stack
        self.clock = clock
        self._parts: dict[str, _Part] = {}

    def check(self) -> list[str]:
        """One look at every kept part; returns the names started again by this look."""
        assert self.stack.state
        now = self.clock()
        restarted = []
        for name, c in list(self.stack.state.components.items()):
            if not kept(name):
                continue
            part = self._parts.setdefault(name, _Part(since=now))
            if part.due is None:
                if c.alive():
                    continue
                ran = now - part.since
                part.pause = pause_after(part.pause, ran)
                part.due = now + part.pause
                log.warning("%s (pid %d) %s after %.0f s, not asked to stop; starting it again in %g s (log: %s)",
                            name, c.pid, exit_status(c.pid), ran, part.pause, c.log)
            if now < part.due:
                continue
            try:
                self.stack.respawn(name)
            except OSError as e:
                part.pause = pause_after(part.pause, 0)
                part.due = now + part.pause
                log.error("starting %s again failed (%s); trying again in %g s", name, e, part.pause)
                continue
            part.since, part.due = now, None
            restarted.append(name)
            log.info("%s started again (pid %d)", name, c.pid)
        return restarted
