"""One collector process: the collector, its events publisher and its /metrics + /healthz.

Both collectors (ZooKeeper, consumer groups) run through :func:`running`, in
``kmon collect``, in ``kmon run`` and in tests.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from collectors.publisher import Publisher, PublisherConfig
from collectors.telemetry import Telemetry
from kmon.reachability import Reachability


class Collector(Protocol):
    reachability: Reachability   # of the monitored cluster's address

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def health(self) -> str | None: ...
    def request_resync(self, reason: str) -> None: ...


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
    try:
        yield Running(collector, publisher, telemetry, port)
    finally:
        collector.stop()
        publisher.close()
        telemetry.close()
