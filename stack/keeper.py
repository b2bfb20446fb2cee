"""`kmon run` keeps its own parts alive, as a service manager would.

A part of the monitor that dies without being asked to (a collector, the stream app, Prometheus,
Alertmanager, kmon's events node: the kernel's OOM killer, a crash) is started again after a
pause that grows while it keeps dying young (kmon/restarts.py), with one log line saying which,
how it ended and when it comes back. The monitored cluster's brokers and ZooKeeper (or KRaft
controllers) are what a user faults on purpose: those are left as they are.

It runs in the thread that owns the stack (a child dies with the thread that started it, see
signals.die_with_parent) and only spawns: a restarted part says itself when it is ready. So a
user's `kmon stack start NAME` (a broker they killed, say) is a request it carries out: a file
``<dir>/requests/<name>`` (:func:`request_start`), since only the owner may add to its processes.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kmon.restarts import pause_after
from stack.local import LocalStack
from stack.state import StackError
from stack.process import exit_status

log = logging.getLogger("kmon.run")
REQUESTS = "requests"   # <dir>/requests/<component>: start it (kmon stack start)


def request_start(directory: Path, name: str) -> None:
    """Ask the `kmon run` that owns ``directory`` to start ``name`` again."""
    requests = directory / REQUESTS
    requests.mkdir(parents=True, exist_ok=True)
    tmp = requests / f".{name}.tmp"
    tmp.write_text(f"{os.getpid()}\n")
    tmp.replace(requests / name)


def kept(name: str) -> bool:
    """Whether `kmon run` restarts this component: its own parts, not the monitored cluster."""
    return not (name == "zookeeper" or name.startswith("broker-") or name.startswith("controller-"))


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
        """One look at every kept part, and at the user's requests; returns the names started
        again by this look."""
        assert self.stack.state
        now = self.clock()
        restarted = self._requested()
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

    def _requested(self) -> list[str]:
        """Carry out the `kmon stack start` requests: each component named, if it is stopped."""
        requests = self.stack.dir / REQUESTS
        started = []
        for request in sorted(requests.glob("[!.]*")) if requests.is_dir() else ():
            request.unlink(missing_ok=True)
            name = request.name
            try:
                if self.stack.component(name).alive():
                    log.info("%s: asked to start it, but it is running", name)
                    continue
                log.info("starting %s, as asked (kmon stack start)", name)
                self.stack.start(name)
            except (StackError, RuntimeError, OSError) as e:   # not ready in time, no such part...
                log.error("starting %s, as asked, failed: %s", name, e)
                continue
            self._parts.pop(name, None)   # a new run: its crash-loop pause starts afresh
            started.append(name)
        return started
