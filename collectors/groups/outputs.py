"""Where the collector's output goes: events to a sink, counts to the collectors' telemetry.

The sink is a one-method protocol, so the collector runs in-process with any publisher
(collectors.publisher.Publisher, a test's in-memory list).
"""
from __future__ import annotations

import time
from typing import Protocol

from collectors.telemetry import Telemetry
from kmon.events import Event, GroupState, entity_key

SOURCE = "groups"


class EventSink(Protocol):
    def publish(self, event: Event) -> None: ...


class Emitter:
    """Builds the group events of one cluster, publishes and counts them (thread-safe
    as long as the sink is: both collector threads share one)."""

    def __init__(self, cluster: str, sink: EventSink, telemetry: Telemetry) -> None:
        self._cluster = cluster
        self._sink = sink
        self.telemetry = telemetry
        self._events = telemetry.metric("kmon_collector_events_total", source=SOURCE, kind="group")
        self._last_event = telemetry.metric("kmon_collector_last_event_timestamp_seconds", source=SOURCE)

    def upsert(self, state: GroupState) -> None:
        self._publish("upsert", state.group, state)

    def delete(self, group: str) -> None:
        self._publish("delete", group, None)

    def _publish(self, op: str, group: str, state: GroupState | None) -> None:
        now = time.time()
        self._sink.publish(Event(cluster=self._cluster, source=SOURCE, kind="group",
                                 entity=entity_key("group", group), op=op,
                                 observed_ms=int(now * 1000), data=state))
        self._events.inc()
        self._last_event.set(now)
