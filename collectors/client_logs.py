"""The client libraries' own log lines, kept at debug level.

librdkafka and kazoo log a line per failed connection attempt, for ever. The collectors
say what matters in their own words instead: the reachability line (kmon.reachability)
for an address out of reach, error callbacks for the rest. ``--log-level debug`` shows
the libraries' lines again.
"""
from __future__ import annotations

import logging
from typing import Any

from kmon.reachability import Reachability


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

    def __init__(self, logger: logging.Logger, reach: Reachability) -> None:
        super().__init__(logger, {})
        self._reach = reach

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if level == logging.WARNING:
            self._reach.explain(str(msg) % args if args else str(msg))
        super().log(level if level >= logging.ERROR else min(level, logging.DEBUG), msg, *args, **kwargs)
