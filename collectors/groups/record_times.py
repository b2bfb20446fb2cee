"""Lag in seconds from the records themselves: the time of the oldest record a group has not read.

The offset samples of lag.py say when the end offset passed a committed offset, to within a sampling
interval, and only while the offset lies inside their table: a consumer far behind, or records produced
before kmon started, are extrapolated. The record at the committed offset carries its own timestamp
(CreateTime, or LogAppendTime where the topic says so), right however producers burst or pause.

Reading it needs READ on the topic. A topic whose records cannot be read (not authorized, no leader,
no answer in time) keeps the interpolation and is asked again after ``RETRY_S``; so does one written
without timestamps (message format v0). Each (topic, partition, offset) is read once: a group that
does not move costs nothing more; the committed offsets of a lag interval are read together, every
partition from its lowest one on, in one Fetch per broker.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Callable, Iterable, Mapping

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition

from collectors.client_logs import LibrdkafkaLog
from collectors.groups.config import GroupsConfig

log = logging.getLogger("kmon.collector.groups")

Wanted = tuple[str, int, int]   # topic, partition, committed offset
RETRY_S = 120.0                 # a topic whose records could not be read is asked again after this
KNOWN_LIMIT = 200_000           # (topic, partition, offset) -> time kept, least recently used out
CONSUME_BATCH = 500
SEEK_GAP = 100                  # records read through to the next wanted offset rather than seeking to it


class RecordTimes:
    """Times (seconds since the epoch) of the first record at or after given offsets, read with a
    consumer of its own that never joins a group nor commits. Used by the Admin API poller's thread only."""

    def __init__(self, config: GroupsConfig, error_cb: Callable[[KafkaError], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._error_cb = error_cb
        self._clock = clock
        self._consumer: Consumer | None = None
        self._known: OrderedDict[Wanted, float] = OrderedDict()
        self._unreadable: dict[str, float] = {}   # topic -> when to ask again
        self._told: set[str] = set()              # topics whose refusal the log said

    def times(self, wanted: Iterable[Wanted], stop: threading.Event) -> dict[Wanted, float]:
        """The record time of each wanted offset that could be read; the others are left out (those not
        reached within the request timeout are read at a later call)."""
        now = self._clock()
        self._unreadable = {t: until for t, until in self._unreadable.items() if until > now}
        wanted = sorted(set(wanted))
        unknown = [w for w in wanted if w not in self._known and w[0] not in self._unreadable]
        if unknown and not stop.is_set():
            self._read(unknown, stop, now + self._config.request_timeout_s)
        found = {}
        for w in wanted:
            if w in self._known:
                self._known.move_to_end(w)
                found[w] = self._known[w]
        return found

    def unreadable(self) -> set[str]:
        """The topics whose records could not be read lately (their lag in seconds is interpolated)."""
        return set(self._unreadable)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _read(self, wanted: list[Wanted], stop: threading.Event, deadline: float) -> None:
        """Each partition read from its lowest wanted offset on; a record at offset m is the first at or
        after every wanted offset up to m. Where the next wanted offset lies far ahead, the partition
        seeks to it instead of reading everything between (many groups on a partition, far apart)."""
        consumer = self._client()
        pending: dict[tuple[str, int], list[int]] = {}
        for t, p, o in wanted:   # sorted: each partition's offsets ascending
            pending.setdefault((t, p), []).append(o)
        starts = {k: offsets[0] for k, offsets in pending.items()}
        answered: set[tuple[str, int]] = set()
        refused: set[str] = set()
        assigned = [TopicPartition(t, p, offsets[0]) for (t, p), offsets in pending.items()]
        consumer.assign(assigned)
        consumer.resume(assigned)   # a partition paused at an earlier call stays paused through its unassignment
        try:
            while pending and not stop.is_set() and (left := deadline - self._clock()) > 0:
                for message in consumer.consume(CONSUME_BATCH, timeout=min(0.5, left)):
                    if (topic := self._take(consumer, message, pending, starts, answered)) is not None:
                        refused.add(topic)
                        pending = {k: o for k, o in pending.items() if k[0] != topic}
        except KafkaException as e:   # the client itself failed: the interpolation stays
            log.debug("reading record times: %s", e)
        finally:
            consumer.unassign()
        if stop.is_set():
            return
        if told := refused - self._told:   # said once a topic; then every retry quietly
            self._told |= told
            log.warning("kmon may not read the records of %s (TOPIC_AUTHORIZATION_FAILED: no READ on it): lag "
                        "in seconds interpolated from end-offset samples, asking again in %g s",
                        ", ".join(sorted(told)), RETRY_S)
        # a partition that gave nothing in the whole request timeout (no leader, no answer): asked again later;
        # one that was still reading when time ran out goes on at the next call
        silent = [k for k in pending if k not in answered]
        if late := sorted({t for t, _ in silent} - refused):
            log.info("the records of %s could not be read in time (%d partitions): lag in seconds interpolated "
                     "from end-offset samples, asking again in %g s", ", ".join(late), len(silent), RETRY_S)
        until = self._clock() + RETRY_S
        self._unreadable.update((t, until) for t in (*refused, *late))

    def _take(self, consumer: Consumer, message, pending: dict[tuple[str, int], list[int]],
              starts: Mapping[tuple[str, int], int], answered: set[tuple[str, int]]) -> str | None:
        """Takes the message's record time for the wanted offsets it answers; returns the topic it says kmon
        may not read."""
        error, key = message.error(), (message.topic(), message.partition())
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                pending.pop(key, None)   # nothing at or after them any more (truncated): none to read
            elif error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and key[0] is not None:
                return key[0]
            else:
                log.debug("reading a record of %s[%s]: %s", *key, error)
            return None
        offsets = pending.get(key)
        if not offsets:
            return None
        # an offset below the log start is reset to the earliest record: the oldest unread one left; a record
        # before the first offset asked for comes only after a reset from beyond the end (truncated)
        if message.offset() < starts[key]:
            del pending[key]
            return None
        if message.offset() < offsets[0]:   # read through to the next wanted offset
            return None
        answered.add(key)
        kind, ms = message.timestamp()
        while offsets and offsets[0] <= message.offset():
            if kind != TIMESTAMP_NOT_AVAILABLE and ms >= 0:
                self._known[(key[0], key[1], offsets[0])] = ms / 1000
            offsets.pop(0)
        while len(self._known) > KNOWN_LIMIT:
            self._known.popitem(last=False)
        if not offsets:
            del pending[key]
            consumer.pause([TopicPartition(*key)])
        elif offsets[0] > message.offset() + SEEK_GAP:
            consumer.seek(TopicPartition(key[0], key[1], offsets[0]))
        return None

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self._config.client(**{
                # never joins nor commits: the id only names the client's requests
                "group.id": f"kmon-record-times-{self._config.cluster}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                # a few records are wanted of each partition: small fetches, little prefetched (a partition is
                # paused once read), no wait at the end. (queued.min.messages=1 left most partitions unfetched.)
                "max.partition.fetch.bytes": 65536,
                "queued.max.messages.kbytes": 1024,
                "fetch.wait.max.ms": 10,
                "logger": LibrdkafkaLog(log),
                **({"error_cb": self._error_cb} if self._error_cb else {}),
            }))
        return self._consumer


def wanted_offsets(committed: Mapping[str, Mapping[tuple[str, int], int]],
                   end_offsets: Mapping[tuple[str, int], int]) -> set[Wanted]:
    """Pure: the committed offsets with records after them (lag in messages), whose record times are wanted."""
    return {(t, p, offset) for offsets in committed.values() for (t, p), offset in offsets.items()
            if (end := end_offsets.get((t, p))) is not None and 0 <= offset < end}
