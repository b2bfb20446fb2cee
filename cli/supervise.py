"""A collector outlives an abort in the native library under it.

librdkafka can abort the whole process on an internal assertion (seen in the groups collector
while brokers died one after another: ``rd_kafka_enq_once_del_source_return: Assertion
`eonce->refcnt > 0' failed``), and then the cluster is unwatched until someone notices. So
``kmon collect`` runs the collector in a child process and starts it again when a signal it
was not sent ends it (with a pause that grows while it keeps dying soon after starting); the
child prints every thread's Python stack to its log when a fatal signal ends it (faulthandler),
which says what was called into the library. The child's own exit code (0 after SIGTERM, 1
after its startup timeout) ends the command. SIGTERM and SIGINT are passed on to the child;
the child dies with this process, even when this one is SIGKILLed.
"""
from __future__ import annotations

import faulthandler
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

from kmon.restarts import pause_after
from kmon.signals import die_with_parent, on_signals

log = logging.getLogger("kmon.collector")

CHILD_ENV = "KMON_COLLECTOR_CHILD"   # set in the child: it runs the collector itself


def supervised(argv: list[str], collect: Callable[[], int]) -> int:
    """Run ``collect`` in a child started as ``kmon <argv>``, again after each abnormal death."""
    if os.environ.get(CHILD_ENV):
        faulthandler.enable()
        return collect()
    stopping = threading.Event()
    child: subprocess.Popen | None = None

    def forward(signum: int) -> None:
        stopping.set()
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    on_signals(forward)
    pause: float | None = None
    while True:
        started = time.monotonic()
        child = subprocess.Popen([sys.executable, "-m", "cli", *argv], env={**os.environ, CHILD_ENV: "1"},
                                 preexec_fn=die_with_parent)
        code = child.wait()
        if code >= 0 or stopping.is_set():
            return max(code, 0)
        pause = pause_after(pause, time.monotonic() - started)
        log.error("the collector process (pid %d) died of %s, not asked to stop: an abort in a native "
                  "library, or killed; starting it again in %g s", child.pid, signal.Signals(-code).name, pause)
        if stopping.wait(pause):
            return 0
