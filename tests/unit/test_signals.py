"""SIGTERM and SIGINT stop kmon's commands even when they land where the main thread holds a lock."""
import subprocess
import sys

import pytest

# The signal lands while the main thread is inside the stop event's own lock, as it is for a few bytecodes of
# each Event.wait: a handler that set the event itself would wait there for itself for ever (a KRaft collector
# SIGTERMed in the suite, 2026-11-30, hung until it was killed).
LANDS_IN_THE_LOCK = """
import os, signal, threading
from kmon.signals import stop_on_signals
stopped = threading.Event()
stop_on_signals(stopped)
with stopped._cond:
    os.kill(os.getpid(), signal.{sig})
print("stopped" if stopped.wait(10) else "not stopped", flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_inside_the_stop_events_lock_still_stops(sig: str) -> None:
    run = subprocess.run([sys.executable, "-c", LANDS_IN_THE_LOCK.format(sig=sig)], capture_output=True, text=True,
                         timeout=30)
    assert run.stdout == "stopped\n", run.stdout + run.stderr
