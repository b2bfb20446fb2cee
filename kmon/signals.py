"""Graceful shutdown of kmon's long-running commands: SIGTERM and SIGINT end them in order."""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import threading
from typing import Callable

log = logging.getLogger("kmon")


def on_signals(act: Callable[[int], None], signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """``act(signum)`` for each of ``signals``, on a thread of its own. Not in the handler: a handler runs on
    the main thread between two bytecodes, maybe while that thread holds the very lock ``act`` needs (an
    Event's, inside its own ``wait``), and it would wait for itself for ever. The handler only writes the
    signal's number to a pipe (no lock), and the thread reads it."""
    read_fd, write_fd = os.pipe()

    def relay() -> None:
        while received := os.read(read_fd, 1):
            act(received[0])

    threading.Thread(target=relay, name="kmon-signals", daemon=True).start()
    for sig in signals:
        signal.signal(sig, lambda signum, _frame: os.write(write_fd, bytes([signum])))


def stop_on_signals(stopped: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stopped``; the command then shuts down in order."""
    def stop(signum: int) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stopped.set()
    on_signals(stop)


def die_with_parent() -> None:
    """In a child before exec: SIGKILL when the process that started it dies (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_PR_SET_PDEATHSIG = 1
