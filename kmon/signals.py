"""Graceful shutdown of kmon's long-running commands: SIGTERM and SIGINT end them in order."""
from __future__ import annotations

import ctypes
import logging
import signal
import threading

log = logging.getLogger("kmon")


def stop_on_signals(stopped: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stopped``; the command then shuts down in order."""
    def handler(signum: int, _frame: object) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stopped.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def die_with_parent() -> None:
    """In a child before exec: SIGKILL when the process that started it dies (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_PR_SET_PDEATHSIG = 1
