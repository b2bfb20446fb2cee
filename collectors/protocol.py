"""What every collector is, and where its events go: the one small protocol of collectors/ (as
Burrow's core/protocol), which collectors.runner runs and each collector folder implements."""
from __future__ import annotations

import time
from collections import Counter
from operator import attrgetter
from typing import Protocol, Sequence

from collectors.telemetry import Telemetry
from kmon.events import Event
from kmon.reachability import Reachability


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
    kind and call: a labelled lookup per event shows in a large snapshot's cost, bench/NOTES.md)."""
    for event in events:
        sink.publish(event)
    for kind, n in Counter(map(_KIND, events)).items():
        telemetry.metric("kmon_collector_events_total", source=source, kind=kind).inc(n)
    if events:
        telemetry.metric("kmon_collector_last_event_timestamp_seconds", source=source).set(time.time())
