"""The events producer shared by all collectors: never blocks the caller, never loses state for good.

``publish(event)`` appends to a bounded in-process buffer; a background thread feeds it to
an idempotent ``acks=all`` producer whose messages never time out (librdkafka retries them
in order, so per-entity order holds even across an outage). When the events cluster is
unreachable the buffer fills; once full, the oldest events are dropped and counted, and
the first delivery after that asks the collector to resync: its snapshot re-emits the
current state of every entity, so nothing is lost for good.

``publish`` never waits on an unreachable cluster. It waits for room only while the
cluster is taking events (a delivery within ``stall_s``), i.e. when a burst such as a
snapshot is larger than the buffer: dropping then would only trigger another snapshot
just as large, for ever.

While no broker of the events cluster answers, :attr:`Publisher.reachability` says so in one
line of its own (kmon.reachability), with the reason librdkafka gave, instead of a line per
error; ``kmon collect --startup-timeout`` gives up on it like on the monitored cluster.

The events topic is created if missing: compacted, so a fresh consumer reads the current
state of every entity, with time-based guarantees for the history (see :class:`TopicSettings`).
"""
from __future__ import annotations

import collections
import functools
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from collectors.client_logs import LibrdkafkaLog
from collectors.telemetry import Telemetry
from kmon.codec import encode
from kmon.events import EVENTS_TOPIC, Event
from kmon.reachability import EVENTS_BOOTSTRAP, PROBE_S, Reachability

log = logging.getLogger("kmon.collector.publisher")

_DAY_MS = 24 * 3600 * 1000
# a request that failed with one of these found no broker of the events cluster to answer it
_OUT_OF_REACH = (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._RESOLVE)


@dataclass(frozen=True)
class TopicSettings:
    """How the events topic is created when it does not exist yet."""
    partitions: int = 6            # per-entity order only needs the key; a few partitions spread the load
    # Compaction keeps the latest state of every entity for ever (a fresh consumer gets the whole
    # cluster); these make it time-retained for the history a consumer may still need:
    min_compaction_lag_ms: int = _DAY_MS          # every transition stays a day, so a stream restarted
    #                                               within a day replays (and counts) each one
    delete_retention_ms: int = 7 * _DAY_MS        # tombstones stay a week: a consumer away for less
    #                                               than that still sees the deletion
    segment_ms: int = _DAY_MS                     # compaction only cleans closed segments

    def new_topic(self, name: str, live_brokers: int) -> NewTopic:
        rf = min(3, live_brokers)
        return NewTopic(name, self.partitions, rf, config={
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": str(self.min_compaction_lag_ms),
            "delete.retention.ms": str(self.delete_retention_ms),
            "segment.ms": str(self.segment_ms),
            # with acks=all, one broker down must not stop the collectors (RF 3 -> 2 in sync)
            "min.insync.replicas": str(max(1, rf - 1)),
        })


@dataclass(frozen=True)
class PublisherConfig:
    bootstrap_servers: str
    topic: str = EVENTS_TOPIC
    buffer_size: int = 100_000     # events held while the events cluster is unreachable
    max_in_flight: int = 10_000    # handed to the producer but not yet acknowledged
    unhealthy_after_s: float = 60  # /healthz fails when an event has waited longer than this
    stall_s: float = 5             # no delivery for this long: the cluster is away, a full buffer drops
    topic_settings: TopicSettings = field(default_factory=TopicSettings)
    client: Mapping[str, str] = field(default_factory=dict)   # librdkafka security settings (TLS, SASL)


class Publisher:
    def __init__(self, config: PublisherConfig, telemetry: Telemetry) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._progress = threading.Condition(self._lock)   # the buffer shrank or a delivery came back
        self._last_delivery = time.monotonic()   # a start counts as progress: the first snapshot may wait
        self._wake = threading.Event()
        self._closing = threading.Event()
        # (key, value or None for a tombstone, monotonic time it was published)
        self._buffer: collections.deque[tuple[bytes, bytes | None, float]] = collections.deque()
        self._in_flight: dict[int, float] = {}    # sequence -> publish time, oldest first
        self._sequence = itertools.count()
        self._overflowed = False
        self._fatal: KafkaError | None = None
        self._last_error: str | None = None
        self._on_resync: Callable[[str], None] | None = None
        self.cluster_id: str | None = None   # of the events cluster, once reached
        self._thread = threading.Thread(target=self._run, name="kmon-publisher", daemon=True)
        self._errors = telemetry.metric("kmon_collector_producer_errors_total")
        self._dropped = telemetry.metric("kmon_collector_dropped_events_total")
        telemetry.metric("kmon_collector_buffered_events").set_function(lambda: self.buffered)
        self._error_log = _Throttled(log, 30.0)
        self.reachability = Reachability(
            EVENTS_BOOTSTRAP, config.bootstrap_servers,
            f"retrying; up to {config.buffer_size} events are kept meanwhile", log)

    # ------------------------------------------------------------------ caller side
    def set_resync_handler(self, handler: Callable[[str], None]) -> None:
        """``handler("buffer_overflow")`` is called (from the publisher thread) once events were
        dropped and the events cluster accepts deliveries again."""
        self._on_resync = handler

    def start(self) -> None:
        self._thread.start()

    def publish(self, event: Event) -> None:
        """Queue one event (and its tombstone for a delete); waits only for room while the events
        cluster is taking events, never on an unreachable one."""
        key = event.message_key.encode()
        now = time.monotonic()
        messages = [(key, encode(event), now)] + ([(key, None, now)] if event.op == "delete" else [])
        with self._progress:
            if self._closing.is_set():
                raise RuntimeError("publish() after close()")
            for message in messages:
                self._progress.wait_for(self._room_or_stalled, self.config.stall_s)
                if len(self._buffer) >= self.config.buffer_size:
                    self._buffer.popleft()
                    self._dropped.inc()
                    if not self._overflowed:
                        log.warning("event buffer full (%d): dropping the oldest events; "
                                    "a resync follows once the events cluster is back", self.config.buffer_size)
                    self._overflowed = True
                self._buffer.append(message)
                self._wake.set()

    def _room_or_stalled(self) -> bool:
        return (len(self._buffer) < self.config.buffer_size or self._closing.is_set()
                or time.monotonic() - self._last_delivery > self.config.stall_s)

    @property
    def buffered(self) -> int:
        """Events not yet acknowledged by the events cluster."""
        return len(self._buffer) + len(self._in_flight)

    def health(self) -> str | None:
        with self._lock:
            waiting = self.buffered
            if self._in_flight:    # handed over in publish order: the first is the oldest
                oldest = next(iter(self._in_flight.values()))
            elif self._buffer:
                oldest = self._buffer[0][2]
            else:
                return None
        waited = time.monotonic() - oldest
        if waited <= self.config.unhealthy_after_s:
            return None
        return (f"events not delivered to {self.config.bootstrap_servers} for {waited:.0f}s "
                f"({waiting} waiting; last error: {self._last_error or 'none reported'})")

    def flush(self, timeout: float) -> int:
        """Wait until every queued event is acknowledged or ``timeout`` passes; returns how many are left."""
        with self._progress:
            self._progress.wait_for(lambda: not self.buffered, timeout)
            return self.buffered

    def close(self, timeout: float = 10.0) -> None:
        left = self.flush(timeout)
        with self._progress:
            self._closing.set()
            self._progress.notify_all()   # a publish() waiting for room gives up
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if left:
            log.error("closing with %d events not delivered to %s", left, self.config.bootstrap_servers)

    # ------------------------------------------------------------------ publisher thread
    def _run(self) -> None:
        if not self._ensure_topic():
            return
        producer = self._producer()
        next_probe = 0.0
        while not self._closing.is_set():
            self._wake.clear()
            if self._fatal is not None:
                producer = self._replace(producer)
            self._feed(producer)
            producer.poll(0)  # serves delivery reports and errors
            if self.reachability.out_of_reach and time.monotonic() >= next_probe:
                self._probe(producer)
                next_probe = time.monotonic() + PROBE_S
            if self._in_flight:   # returns at the first delivery report: what waits for room goes at once
                producer.poll(0.05)
            else:                 # new events wake us at once
                self._wake.wait(1.0)
        producer.flush(1)

    def _producer(self) -> Producer:
        return Producer({
            "bootstrap.servers": self.config.bootstrap_servers,
            **self.config.client,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": 0,   # never give up: librdkafka retries in order, we report the wait
            "queue.buffering.max.messages": self.config.max_in_flight,
            "compression.type": "lz4",
            "error_cb": self._error,
            "logger": LibrdkafkaLog(log),
        })

    def _probe(self, producer: Producer) -> None:
        """Only a delivery says the events cluster is back, and there may be nothing to deliver:
        a metadata request says it too."""
        try:
            producer.list_topics(timeout=PROBE_S)
        except KafkaException:
            return   # the error callback has the better reason
        self.reachability.reached()

    def _replace(self, producer: Producer) -> Producer:
        """An idempotent producer that hit a fatal error is unusable: start a new one and resync."""
        log.error("events producer failed fatally (%s); starting a new one and resyncing", self._fatal)
        self._fatal = None
        with self._lock:
            lost = len(self._in_flight)
            self._in_flight.clear()
        self._dropped.inc(lost)
        self._overflowed = True   # the next delivery triggers the resync
        return self._producer()

    def _feed(self, producer: Producer) -> None:
        while True:
            with self._lock:
                if not self._buffer or len(self._in_flight) >= self.config.max_in_flight:
                    return
                key, value, published = self._buffer.popleft()
                seq = next(self._sequence)
                self._in_flight[seq] = published
                self._progress.notify_all()
            try:
                producer.produce(self.config.topic, key=key, value=value,
                                 on_delivery=functools.partial(self._delivered, seq))
            except BufferError:   # librdkafka's queue is full after all: retry after its reports
                with self._lock:
                    del self._in_flight[seq]
                    self._buffer.appendleft((key, value, published))
                producer.poll(0.1)
                return

    def _delivered(self, seq: int, err: KafkaError | None, _msg: Message) -> None:
        resync = False
        with self._progress:
            self._in_flight.pop(seq, None)
            if err is None:
                self._last_delivery = time.monotonic()
                resync, self._overflowed = self._overflowed, False
            self._progress.notify_all()
        if err is not None:   # messages never time out, so this is permanent (e.g. too large)
            self._errors.inc()
            self._dropped.inc()
            self._last_error = str(err)
            self._error_log.log(logging.ERROR, "event not delivered to %s: %s", self.config.topic, err)
            return
        self.reachability.reached()
        if resync and self._on_resync is not None:
            log.info("events cluster accepts deliveries again after dropped events: resyncing")
            self._on_resync("buffer_overflow")

    def _error(self, err: KafkaError) -> None:
        self._errors.inc()
        self._last_error = str(err)
        if err.fatal():
            self._fatal = err
        if err.code() == KafkaError._AUTHENTICATION:
            self.reachability.refused(err.str())
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            if not self.reachability.out_of_reach:   # the next errors say why better than "1/1 brokers are down"
                self.reachability.failed(err.str())
        elif self.reachability.out_of_reach:   # its own line will say it
            self.reachability.explain(err.str())
        else:
            self._error_log.log(logging.WARNING, "events bootstrap %s: %s (%d events waiting; the producer "
                                "retries)", self.config.bootstrap_servers, err, self.buffered)

    def _reason(self, err: KafkaError) -> None:
        """The topic check's error callback: why the events bootstrap does not answer."""
        if err.code() == KafkaError._AUTHENTICATION:
            self.reachability.refused(err.str())
        elif err.code() != KafkaError._ALL_BROKERS_DOWN:
            self.reachability.explain(err.str())

    def _ensure_topic(self) -> bool:
        """Create the events topic if missing, retrying until it works or close() is called."""
        admin = AdminClient({"bootstrap.servers": self.config.bootstrap_servers, **self.config.client,
                             "logger": LibrdkafkaLog(log),
                             "error_cb": self._reason})
        while not self._closing.is_set():
            try:
                metadata = admin.list_topics(timeout=PROBE_S)
                self.reachability.reached()
                self.cluster_id = metadata.cluster_id
                if self.config.topic in metadata.topics:
                    return True
                spec = self.config.topic_settings.new_topic(self.config.topic, len(metadata.brokers))
                admin.create_topics([spec])[self.config.topic].result(timeout=30)
                log.info("created the events topic %s: %d partitions, RF %d, compacted", self.config.topic,
                         spec.num_partitions, spec.replication_factor)
                return True
            except KafkaException as e:
                error = e.args[0]
                if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    return True
                self._errors.inc()
                self._last_error = str(error)
                if error.code() in _OUT_OF_REACH:
                    self.reachability.failed(error.str())
                    admin.poll(0)   # serves the error callback: the reason, e.g. "Connection refused"
                else:
                    self._error_log.log(logging.WARNING, "cannot create or check the events topic %s on the "
                                        "events bootstrap %s: %s (retrying every %g s; %d events waiting)",
                                        self.config.topic, self.config.bootstrap_servers, error, PROBE_S,
                                        self.buffered)
            self._closing.wait(PROBE_S)
        return False


class _Throttled:
    """Logs at most once per ``interval`` seconds and says how many messages it held back."""

    def __init__(self, logger: logging.Logger, interval: float) -> None:
        self._logger = logger
        self._interval = interval
        self._last = -interval
        self._held = 0

    def log(self, level: int, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last < self._interval:
            self._held += 1
            return
        suffix = f" ({self._held} similar messages in the last {now - self._last:.0f}s)" if self._held else ""
        self._logger.log(level, msg + suffix, *args)
        self._last, self._held = now, 0

