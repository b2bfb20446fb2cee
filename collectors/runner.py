"""One collector process: the collector, its events publisher and its /metrics + /healthz, and
for the collectors that follow broker registrations, the probes of those brokers.

Every collector is a :class:`collectors.protocol.Collector` that publishes to an
:class:`collectors.protocol.EventSink` and counts into its Telemetry; a new source is one folder
under collectors/ whose collector plugs in here. They run through :func:`running`, in ``kmon
collect``, in ``kmon run`` and in tests (which may give an in-memory sink instead of the publisher).
"""
from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

from collectors.broker_probe import BrokerProbe
from collectors.protocol import Collector, EventSink
from collectors.publisher import Publisher, PublisherConfig
from collectors.telemetry import Telemetry
from kmon.web_config import WebConfig

log = logging.getLogger("kmon.collector")
PLACEMENT_CHECK_S = 2.0   # how often to ask for the two cluster ids until both are known


@dataclass(frozen=True)
class Running:
    collector: Collector
    publisher: Publisher
    telemetry: Telemetry
    metrics_port: int | None   # where /metrics and /healthz are served (None: not served)


@contextlib.contextmanager
def running(cluster: str, make: Callable[[EventSink, Telemetry], Collector], events: PublisherConfig,
            metrics_port: int | None = 0, probe_brokers: bool = False, web: WebConfig | None = None) -> Iterator[Running]:
    """Start the collector ``make`` builds; on exit stop it, flush the events, close the HTTP server.
    ``probe_brokers``: the collector emits the brokers' registrations; probe each (broker_probe.py);
    ``web``: the HTTP server's TLS and basic auth."""
    telemetry = Telemetry(cluster)
    publisher = Publisher(events, telemetry)
    probe = BrokerProbe(telemetry) if probe_brokers else None
    collector = make(probe.watching(publisher) if probe else publisher, telemetry)
    # events the publisher had to drop are recovered by re-sending the current state
    publisher.set_resync_handler(collector.request_resync)
    telemetry.add_health_check(collector.health)
    telemetry.add_health_check(publisher.health)
    started: list[Callable[[], object]] = []   # how to stop each part started, in the order started
    try:
        port = None if metrics_port is None else telemetry.serve(metrics_port, web=web)
        started.append(telemetry.close)
        publisher.start()
        started.append(publisher.close)
        collector.start()
        started.append(collector.stop)
        if probe:
            probe.start()
            started.append(probe.stop)
        stopped = threading.Event()
        threading.Thread(target=check_events_placement, args=(collector, publisher, telemetry, stopped),
                         name="kmon-events-placement", daemon=True).start()
        started.append(stopped.set)
        yield Running(collector, publisher, telemetry, port)
    finally:   # what started stops, newest first, even when a later part failed to start
        for stop in reversed(started):
            stop()


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
