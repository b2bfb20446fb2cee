"""The client libraries' own log lines, kept at debug level.

librdkafka and kazoo log a line per failed connection attempt, for ever. The collectors
say what matters in their own words instead: the reachability line (kmon.reachability)
for an address out of reach, error callbacks for the rest. ``--log-level debug`` shows
the libraries' lines again.
"""
from __future__ import annotations

import logging
import sys
from types import TracebackType
from typing import Any, Callable, Mapping

from confluent_kafka import KafkaError

from kmon.client_config import sasl_login
from kmon.reachability import Reachability


def refusals(reach: Reachability) -> Callable[[KafkaError], None]:
    """An ``error_cb`` for a librdkafka client: failed authentication ends the command
    (librdkafka would retry the same credentials for ever); other errors are the logger's."""
    def error_cb(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            reach.refused(err.str())
    return error_cb


def kazoo_login(client: Mapping[str, Any]) -> str:
    """How a KazooClient with these arguments logs in, for messages (never a secret)."""
    sasl = client.get("sasl_options")
    return sasl_login(sasl) if sasl else "no SASL login"


def _in_sasl_login(tb: TracebackType | None) -> bool:
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_authenticate_with_sasl":
            return True
        tb = tb.tb_next
    return False


class LibrdkafkaLog:
    """The ``logger`` of a confluent-kafka client: every line at debug. A client logs only
    when polled (the consumer's and producer's loops, ``AdminClient.poll``)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def log(self, _level: int, msg: str, *args: object) -> None:
        self._logger.debug(msg, *args)


class KazooLog(logging.LoggerAdapter):
    """The ``logger`` of a KazooClient: below error, at debug (lower levels stay lower); a
    warning is a failed connection attempt, whose text explains why ``reach`` is out of reach."""

    def __init__(self, logger: logging.Logger, reach: Reachability, login: str = "no SASL login") -> None:
        super().__init__(logger, {})
        self._reach = reach
        self._login = login

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if level == logging.WARNING:
            text = str(msg) % args if args else str(msg)
            if text.startswith("AUTH_FAILED"):   # kazoo stops connecting: the login was refused
                self._reach.refused(f"{self._login}: {text}")
            else:
                self._reach.explain(text)
        elif level >= logging.ERROR and kwargs.get("exc_info") and _in_sasl_login(sys.exc_info()[2]):
            # any error but AUTH_FAILED in the SASL exchange (ZooKeeper's "SASL required" codes, which
            # kazoo 2.10 did not even know) kills kazoo's connection thread: a refused login all the same
            self._reach.refused(f"{self._login}: ZooKeeper ended the login with {sys.exc_info()[1]!r}")
            level = logging.DEBUG
        super().log(level if level >= logging.ERROR else min(level, logging.DEBUG), msg, *args, **kwargs)
