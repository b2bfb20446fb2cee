"""One collector process: the collector, its events publisher and its /metrics + /healthz.

Every collector is a :class:`Collector` that publishes to an :class:`EventSink` and counts into
its Telemetry; a new source is one folder under collectors/ whose collector plugs in here. Both
today (ZooKeeper, consumer groups) run through :func:`running`, in ``kmon collect``, in
``kmon run`` and in tests (which may give an in-memory sink instead of the publisher).
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass
from operator import attrgetter
from typing import Callable, Iterator, Protocol, Sequence

from collectors.publisher import Publisher, PublisherConfig
from collectors.telemetry import Telemetry
from kmon.events import Event
from kmon.reachability import Reachability

log = logging.getLogger("kmon.collector")
PLACEMENT_CHECK_S = 2.0   # how often to ask for the two cluster ids until both are known
_KIND = attrgetter("kind")


class EventSink(Protocol):
    """Where a collector's events go: the publisher, or a test's list."""
    def publish(self, event: Event) -> None: ...


class Collector(Protocol):
    """What every collector is: started, stopped, asked for its health, told to send its whole
    state again (after the publisher dropped events), asked which cluster it watches."""
    reachability: Reachability   # of the monitored cluster's address

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def health(self) -> str | None: ...
    def request_resync(self, reason: str) -> None: ...
    def cluster_id(self) -> str | None: ...   # the monitored cluster's, None while unknown


def publish_all(sink: EventSink, telemetry: Telemetry, source: str, events: Sequence[Event]) -> None:
    """Publish a collector's events in order and count them (kmon_collector_events_total once per
    kind and call: a labelled lookup per event cost a tenth of a large snapshot)."""
    for event in events:
        sink.publish(event)
    for kind, n in Counter(map(_KIND, events)).items():   # counted by C code, not a dict update per event
        telemetry.metric("kmon_collector_events_total", source=source, kind=kind).inc(n)
    if events:
        telemetry.metric("kmon_collector_last_event_timestamp_seconds", source=source).set(time.time())


@dataclass(frozen=True)
class Running:
    collector: Collector
    publisher: Publisher
    telemetry: Telemetry
    metrics_port: int | None   # where /metrics and /healthz are served (None: not served)


@contextlib.contextmanager
def running(cluster: str, make: Callable[[Publisher, Telemetry], Collector], events: PublisherConfig,
            metrics_port: int | None = 0) -> Iterator[Running]:
    """Start the collector ``make`` builds; on exit stop it, flush the events, close the HTTP server."""
    telemetry = Telemetry(cluster)
    publisher = Publisher(events, telemetry)
    collector = make(publisher, telemetry)
    # events the publisher had to drop are recovered by re-sending the current state
    publisher.set_resync_handler(collector.request_resync)
    telemetry.add_health_check(collector.health)
    telemetry.add_health_check(publisher.health)
    port = None if metrics_port is None else telemetry.serve(metrics_port)
    publisher.start()
    collector.start()
    stopped = threading.Event()
    check = threading.Thread(target=check_events_placement, args=(collector, publisher, telemetry, stopped),
                             name="kmon-events-placement", daemon=True)
    check.start()
    try:
        yield Running(collector, publisher, telemetry, port)
    finally:
        stopped.set()
        collector.stop()
        publisher.close()
        telemetry.close()


def check_events_placement(collector: Collector, publisher: Publisher, telemetry: Telemetry,
                           stopped: threading.Event) -> None:
    """Once both cluster ids are known: say (once, and as a gauge) when the events travel on the
    monitored cluster itself, where every failure kmon reports also delays its own events."""
    while not stopped.wait(PLACEMENT_CHECK_S):
        monitored, events = collector.cluster_id(), publisher.cluster_id
        if monitored is None or events is None:
            continue
        shared = monitored == events
        telemetry.metric("kmon_collector_events_on_monitored_cluster").set(int(shared))
        if shared:
            log.warning("the events bootstrap %s is the monitored cluster itself (cluster id %s): when its "
                        "brokers, controller or ZooKeeper fail, kmon's events wait for the same failover they "
                        "report, or stop; give kmon an events cluster of its own (README: Where kmon's events "
                        "live)", publisher.config.bootstrap_servers, monitored)
        else:
            log.info("events go to cluster %s, not the monitored cluster %s", events, monitored)
        return
