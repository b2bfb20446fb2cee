"""Where the collector's output goes: events to a sink (collectors.runner.EventSink), counts to
the collectors' telemetry."""
from __future__ import annotations

import time

from collectors.protocol import EventSink
from collectors.telemetry import Telemetry
from kmon.events import Event, GroupState, entity_key

SOURCE = "groups"


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
