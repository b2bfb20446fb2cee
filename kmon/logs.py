"""How every kmon process logs: one format on stderr, the client libraries' chatter kept down.

``kmon`` and the spark-submit entry point of the stream app both start here, so a stream app
under spark-submit logs as ``kmon stream`` does without loading the other commands.
"""
from __future__ import annotations

import argparse
import logging
import sys
import threading

from kmon import flags

LEVELS = ("debug", "info", "warning", "error")
log = logging.getLogger("kmon")


def flag(p: argparse.ArgumentParser) -> None:
    flags.flag(p, "--log-level", default="info", choices=LEVELS, help="log verbosity")


def configure(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for chatty in ("kazoo.client", "py4j"):  # connection chatter that says nothing about kmon
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if level != "debug":
        for handler in logging.getLogger().handlers:
            handler.addFilter(_py4j_root_chatter)
    threading.excepthook = _thread_died


def _py4j_root_chatter(record: logging.LogRecord) -> bool:
    """py4j logs a connection to Spark's JVM that ends (when kmon stream stops, or a signal to
    the process group stopped the JVM first) on the root logger, with a stack trace, at info."""
    return not (record.name == "root" and record.levelno < logging.WARNING and "py4j" in record.pathname)


def _thread_died(died: threading.ExceptHookArgs) -> None:
    """A library thread that dies (kazoo's connection thread on a login it cannot parse) says so
    in one line; its stack trace is for --log-level debug."""
    if died.exc_type is SystemExit:
        return
    log.error("thread %s ended by %s: %s", died.thread.name if died.thread else "?", died.exc_type.__name__,
              died.exc_value)
    log.debug("the thread's stack", exc_info=(died.exc_type, died.exc_value, died.exc_traceback))
