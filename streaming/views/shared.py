"""One object for each value that many of the views' records hold equal.

The driver parses every changed record anew, so each of a cluster's partitions would hold its own
copy of the cluster's name, its kind and source, its topic's name, an ISR that thousands of other
partitions share, and two empty maps: ~0.4 KB a partition, of the ~2.5 KB a partition costs the
driver (bench/NOTES.md, "The stream driver's memory"). The views keep a record as long as its
entity lives, so it is made to share them as it arrives.
"""
from __future__ import annotations

from typing import Any

from kmon.events import PartitionState
from streaming.fold.entity import EntityRecord

_RECORD_FIELDS = ("cluster", "kind", "source", "snapshot_id")
_PARTITION_FIELDS = ("topic", "isr")
# Values of entities long gone (deleted topics, earlier snapshots' ids) would stay forever in a
# service that runs for months: past this many, sharing starts again from nothing.
MAX_VALUES = 100_000


class SharedValues:
    """Hands out the first of equal values it was given. Records are immutable by convention (the
    fold replaces them, the views only read them), so sharing a value between them is safe."""

    def __init__(self, max_values: int = MAX_VALUES) -> None:
        self._values: dict[Any, Any] = {}   # str and tuple values: equal only within their type
        self._empty: dict[Any, Any] = {}
        self._max = max_values

    def __len__(self) -> int:
        """Values held to be shared."""
        return len(self._values)

    def record(self, record: EntityRecord) -> EntityRecord:
        """``record`` with its repeated values replaced by the shared ones (in place: it has just
        been parsed and nothing else holds it yet)."""
        fields = record.__dict__   # a frozen dataclass: its fields are set as the decoder does
        if len(self._values) > self._max:
            self._values.clear()
        values = self._values
        for name in _RECORD_FIELDS:
            value = fields[name]
            if value is not None:
                fields[name] = values.setdefault(value, value)
        if not fields["counters"]:
            fields["counters"] = self._empty
        if not fields["broker_counters"]:
            fields["broker_counters"] = self._empty
        if type(record.state) is PartitionState:
            state = record.state.__dict__
            for name in _PARTITION_FIELDS:
                state[name] = values.setdefault(state[name], state[name])
        return record
