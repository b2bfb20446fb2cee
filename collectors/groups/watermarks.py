"""End offsets read one partition at a time, for those the Admin API's list_offsets refused.

librdkafka's Admin ``list_offsets`` sends the leader epoch of its metadata with each
partition. After broker deaths, a broker can go on serving a stale epoch in its metadata;
the leader then answers FENCED_LEADER_EPOCH for that partition at every poll, also to a
new client, and the group's lag on it went silently missing for as long as that lasted.
A consumer's watermark query sends no epoch (the leader answers with what it has), one
request per partition: a fallback for the few refused partitions, not the main path.
"""
from __future__ import annotations

import logging
import time
from typing import Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from collectors.client_logs import LibrdkafkaLog
from collectors.groups.config import GroupsConfig
from collectors.groups.states import Partition

log = logging.getLogger("kmon.collectors.groups")


def refused(failures: Mapping[Partition, BaseException]) -> list[Partition]:
    """Pure: the partitions worth asking again, one by one: those a broker answered with an
    error. A partition whose request timed out (its leader away) would only time out again."""
    return sorted(tp for tp, error in failures.items() if not isinstance(error, TimeoutError))


class WatermarkReader:
    """A consumer that never joins a group, made at its first use; close() when done."""

    def __init__(self, config: GroupsConfig) -> None:
        self._config = config
        self._consumer: Consumer | None = None

    def end_offsets(self, partitions: Iterable[Partition], budget_s: float) -> dict[Partition, int]:
        """The end offsets of ``partitions`` that could be read within ``budget_s`` seconds
        in all (each call waits at most the rest of it)."""
        deadline = time.monotonic() + budget_s
        out: dict[Partition, int] = {}
        for topic, partition in partitions:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                _, high = self._client().get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=left, cached=False)
            except KafkaException as e:
                log.debug("end offset of %s[%d]: %s", topic, partition, e)
                continue
            if high is not None and high >= 0:
                out[(topic, partition)] = high
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self._config.client(**{
                # never subscribes nor commits: the id only names the client's requests
                "group.id": f"kmon-groups-collector-{self._config.cluster}",
                "enable.auto.commit": False,
                "logger": LibrdkafkaLog(log),
            }))
        return self._consumer

