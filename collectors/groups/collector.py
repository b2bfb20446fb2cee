"""The consumer-group collector: two threads sharing a GroupBook.

* the Admin API poller (live state, end-offset samples, lag) — admin_poll.py
* the ``__consumer_offsets`` reader (every generation, committed offsets) — offsets_reader.py

and a third that probes the bootstrap addresses, for the log line that says when the cluster
is out of reach (kmon.reachability).

In-process use::

    collector = GroupsCollector(GroupsConfig(bootstrap_servers="host:9092", cluster="prod"), sink, Telemetry("prod"))
    collector.start()
    ...
    collector.stop()   # both loops end, the consumer is closed; the sink stays open
"""
from __future__ import annotations

import functools
import logging
import threading
from typing import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from collectors.client_logs import LibrdkafkaLog, refusals
from collectors.groups.admin_poll import AdminPoller
from collectors.groups.book import GroupBook, ModernStates
from collectors.groups.config import GroupsConfig, NameFilter
from collectors.groups.offsets_reader import OffsetsReader
from collectors.groups.outputs import Emitter
from collectors.groups.record_times import RecordTimes
from collectors.groups.topic_names import TopicNames
from collectors.protocol import EventSink
from collectors.telemetry import Telemetry
from kmon.reachability import MONITORED_BOOTSTRAP, Reachability, keep_probing, tcp_probe

__all__ = ["GroupsCollector", "GroupsConfig", "NameFilter"]

log = logging.getLogger("kmon.collector.groups")


class GroupsCollector:
    def __init__(self, config: GroupsConfig, sink: EventSink, telemetry: Telemetry) -> None:
        self.config = config
        self.telemetry = telemetry
        emitter = Emitter(config.cluster, sink, self.telemetry)
        book = GroupBook()
        # librdkafka reconnects silently and a failed poll may be one broker's: a probe of the
        # bootstrap addresses tells whether the cluster is out of reach
        self.reachability = Reachability(MONITORED_BOOTSTRAP, config.bootstrap_servers,
                                         f"polling again every {config.poll_interval_s:g} s", log)
        error_cb = refusals(self.reachability)
        self._admin = AdminClient(config.admin_client(logger=LibrdkafkaLog(log), error_cb=error_cb))
        modern = ModernStates(emitter)
        self._reader = OffsetsReader(config, book, emitter, modern, TopicNames(self._admin, config.request_timeout_s),
                                     error_cb) if config.read_offsets_topic else None
        # set once __consumer_offsets has been read to its end (None: no reader)
        offsets_read = self._reader.caught_up if self._reader else None
        self.caught_up: Callable[[], bool] = offsets_read.is_set if offsets_read else lambda: False
        record_times = RecordTimes(config, error_cb) if config.lag_from_records else None
        self._poller = AdminPoller(config, self._admin, book, emitter, modern, offsets_read, record_times)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._probe_loop = functools.partial(keep_probing, self.reachability,
                                             functools.partial(tcp_probe, config.bootstrap_servers))

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("collector already started")
        loops = [("reach", self._probe_loop), ("admin", self._poller.run)] + (
            [("offsets", self._reader.run)] if self._reader else [])
        for name, loop in loops:
            thread = threading.Thread(target=loop, args=(self._stop,), daemon=True,
                                      name=f"kmon-groups-{name}-{self.config.cluster}")
            thread.start()
            self._threads.append(thread)
        log.info("collecting consumer groups of %s from %s", self.config.cluster, self.config.bootstrap_servers)

    def health(self) -> str | None:
        """None while both loops run, else why not (a telemetry health check)."""
        dead = [t.name for t in self._threads if not t.is_alive()]
        return f"stopped: {', '.join(dead)}" if dead else None

    def cluster_id(self) -> str | None:
        """The monitored cluster's id, None while it cannot be asked."""
        try:
            return self._admin.list_topics(timeout=self.config.request_timeout_s).cluster_id
        except KafkaException:
            return None

    def request_resync(self, reason: str) -> None:
        """Re-emit every group's state at the next poll (the publisher's resync handler)."""
        log.info("resync requested (%s): every group is re-emitted at the next poll", reason)
        self._poller.request_resync()

    def stop(self, timeout: float | None = None) -> None:
        """End both loops and wait for them; the poller gives up the Admin API requests in flight
        (gather.Stopped)."""
        self._stop.set()
        wait = timeout if timeout is not None else 3 * self.config.request_timeout_s + 5
        for thread in self._threads:
            thread.join(wait)
            if thread.is_alive():
                log.warning("%s did not stop within %.0fs", thread.name, wait)
