"""The resync bracket, the same for every collector that sends its whole picture again (at its start,
after a session or a connection was lost, when its buffer overflowed): a begin marker; every entity it
holds, then the deletions of entities it sent before and no longer holds, each part in the one order
of kmon.events.snapshot_order; an end marker that counts the entities once the picture is whole. The
stream reads the bracket as the whole truth at that point (streaming/fold/entity.py). Pure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

from kmon.events import Event, SnapshotMarker, snapshot_order

K = TypeVar("K")
# a collector's marker event: (kind, marker, observed_ms) -> the event in that collector's envelope
Envelope = Callable[[str, SnapshotMarker, int], Event]


@dataclass(frozen=True)
class Resync:
    snapshot_id: str
    reason: str          # start | reconnect | expired | buffer_overflow
    begun_ms: int        # when the collector began to read the picture it sends

    def begin(self, envelope: Envelope) -> Event:
        return envelope("snapshot_begin", SnapshotMarker(self.snapshot_id, self.reason), self.begun_ms)

    def body(self, entities: Iterable[K], order: Callable[[K], Any], event: Callable[[K], Event | None]) -> list[Event]:
        """Each entity's event (None: nothing to say of it), in ``order``: the states, then the deletions."""
        events = [e for entity in sorted(entities, key=order) if (e := event(entity)) is not None]
        return [e for e in events if e.op != "delete"] + [e for e in events if e.op == "delete"]

    def end(self, envelope: Envelope, entities: int, now_ms: int) -> Event:
        return envelope("snapshot_end", SnapshotMarker(self.snapshot_id, self.reason, entities, self.begun_ms), now_ms)


def entity_order(entity: str) -> tuple[int, tuple[str, ...]]:
    """snapshot_order of an entity key (``partition:orders:3``; topic names hold no ``:``)."""
    kind, _, parts = entity.partition(":")
    return snapshot_order(kind, parts.split(":") if parts else ())
