"""Brokers the cluster still lists whose port refuses connections, and when the Admin API poll waits.

An Admin API request for such a broker keeps librdkafka (2.16) reconnecting at once after every
refusal: a busy loop on a core until the request times out or the broker leaves the cluster's metadata
(its session timeout, 18 s in ZooKeeper mode and 9 s under KRaft by default). A crashed broker is the
fault kmon sees most, so the poll holds its requests while a listed broker refuses, and runs anyway
every ``hold_s`` so that a long refusal still has fresh lag at a bounded cost (bench/README.md).
"""
from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable

PROBE_TIMEOUT_S = 0.5   # a refusal is immediate; a slower answer is no refusal (no busy loop either)


@dataclass(frozen=True)
class Broker:
    id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.id} ({self.host}:{self.port})"


def refuses(broker: Broker, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the broker's host answers a TCP connection to its port with a refusal."""
    try:
        with socket.create_connection((broker.host.strip("[]"), broker.port), timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:   # no answer, no route: not the immediate refusal librdkafka loops on
        return False


def refusing(brokers: Iterable[Broker], pool: ThreadPoolExecutor) -> list[Broker]:
    """The brokers that refuse connections, probed side by side."""
    listed = sorted(brokers, key=lambda b: b.id)
    return [b for b, no in zip(listed, pool.map(refuses, listed)) if no]


@dataclass
class PollGate:
    """Whether the poll runs now: always when no listed broker refuses; while one does, once every
    ``hold_s`` (the first poll of a refusal is held)."""
    hold_s: float
    _held_since: float | None = field(default=None, init=False)

    @property
    def holding(self) -> bool:
        return self._held_since is not None

    def admit(self, refused: bool, now: float) -> bool:
        if not refused:
            self._held_since = None
            return True
        if self._held_since is None:
            self._held_since = now
            return False
        if now - self._held_since >= self.hold_s:
            self._held_since = now
            return True
        return False
