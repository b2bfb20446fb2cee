"""Topic ids to names, for the records of Kafka 4's group protocols, which name partitions by topic
id only. The cluster is asked (list the topics, describe those not known yet) when an id is met
that is not known, at most once per ``min_interval_s``: a topic is created once and its id never
changes. An id still unknown after that (a topic deleted meanwhile) is shown as the id itself."""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Callable, Iterable

from confluent_kafka import KafkaException, TopicCollection, Uuid
from confluent_kafka.admin import AdminClient

log = logging.getLogger("kmon.collector.groups")


def id_text(topic_id: Uuid) -> str:
    """confluent-kafka's Uuid as the canonical text the records' decoder gives a topic id."""
    bits = (topic_id.get_most_significant_bits() % 2**64) << 64 | topic_id.get_least_significant_bits() % 2**64
    return str(uuid.UUID(int=bits))


class TopicNames:
    def __init__(self, admin: AdminClient, timeout_s: float, min_interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._admin = admin
        self._timeout_s = timeout_s
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}     # topic id -> name
        self._next_refresh = 0.0

    def __call__(self, ids: Iterable[str]) -> dict[str, str]:
        """Each id's topic name (the id itself where none is known)."""
        wanted = set(ids)
        with self._lock:
            if wanted - self._names.keys() and self._clock() >= self._next_refresh:
                self._next_refresh = self._clock() + self._min_interval_s
                self._refresh()
            return {i: self._names.get(i, i) for i in wanted}

    def _refresh(self) -> None:
        known = set(self._names.values())
        try:
            listed = [t for t in self._admin.list_topics(timeout=self._timeout_s).topics if t not in known]
            if not listed:
                return
            futures = self._admin.describe_topics(TopicCollection(listed), request_timeout=self._timeout_s)
            for name, future in futures.items():
                try:
                    self._names[id_text(future.result().topic_id)] = name
                except KafkaException as e:   # deleted since it was listed
                    log.debug("describe topic %s: %s", name, e)
        except KafkaException as e:
            log.warning("cannot read topic names for the groups' assignments (%s); shown by topic id meanwhile", e)
