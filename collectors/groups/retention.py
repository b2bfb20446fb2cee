"""How long each topic keeps its records (``retention.ms`` as the brokers apply it: the topic's own
setting, else the cluster's default), for how close a group is to losing what it has not read.

Asked with DescribeConfigs (DESCRIBE_CONFIGS on the topic), only for topics a group lags on, and kept
``TTL_S``: a topic's retention changes rarely, and a change shows within that. A topic whose config
cannot be read has none (its ratio is left out).
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from confluent_kafka.admin import ConfigResource, ResourceType

from collectors.groups.gather import Gathered

TTL_S = 300.0
DESCRIBE_BATCH = 100
RETENTION_MS = "retention.ms"


class TopicRetention:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._known: dict[str, tuple[int | None, float]] = {}   # topic -> (retention.ms, when read)

    def stale(self, topics: Iterable[str]) -> list[str]:
        """The topics to ask for now: never asked, or asked more than TTL_S ago."""
        now = self._clock()
        return sorted(t for t in set(topics) if t not in self._known or now - self._known[t][1] > TTL_S)

    def learn(self, asked: Iterable[str], gathered: Gathered[str]) -> None:
        """What a describe of ``asked`` answered; a topic that failed is asked again at the next TTL."""
        now = self._clock()
        for topic in asked:
            entries = gathered.results.get(topic)
            entry = entries.get(RETENTION_MS) if isinstance(entries, dict) else None
            try:
                value = int(entry.value) if entry is not None and entry.value is not None else None
            except ValueError:
                value = None
            self._known[topic] = (value, now)

    def of(self, topics: Iterable[str]) -> dict[str, int]:
        """retention.ms of the topics known to have one (-1: kept forever)."""
        return {t: ms for t in topics if (known := self._known.get(t)) and (ms := known[0]) is not None}

    def forget_except(self, topics: Iterable[str]) -> None:
        keep = set(topics)
        self._known = {t: k for t, k in self._known.items() if t in keep}


def describe(admin, timeout_s: float) -> Callable[[list[str]], dict]:
    """A ``gather`` submitter of DescribeConfigs for a batch of topics: topic -> future of its entries."""
    def submit(batch: list[str]) -> dict:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in batch],
                                         request_timeout=timeout_s)
        return {resource.name: future for resource, future in futures.items()}
    return submit
