"""The stateful step Spark runs per entity key (on executors).

Spark groups the events topic by message key (``<cluster>/<entity>``) and calls
:func:`step` with the key's new rows and its state: the EntityRecord as JSON. The step
folds the rows in Kafka offset order with :func:`streaming.records.apply_event` and
returns one row describing the key after the batch, plus what it saw, for the
self-metrics. Malformed values are counted and their first reason is returned so the
driver can log it with its offset; they never fail the query.
"""
from __future__ import annotations

import json
from typing import Iterator

import pandas as pd

from kmon.events import MalformedEvent, decode
from streaming.records import Applied, EntityRecord, apply_event, record_from_json, record_to_json

# The Kafka columns the step needs; value is null for tombstones.
INPUT_COLUMNS = ("key", "value", "partition", "offset")
STATE_SCHEMA = "record string"
# One JSON column: building a pandas frame per key is the step's main cost, and it
# grows with the column count. The result's fields are those fold() returns.
OUTPUT_SCHEMA = "key string, result string"


def cluster_of(key: str) -> str:
    """The cluster part of a message key; 'unknown' when the key is not kmon's."""
    cluster, sep, _ = key.partition("/")
    return cluster if sep and cluster else "unknown"


def fold(key: str, record: EntityRecord | None, rows: list[tuple[int, int, str | None]]) -> dict[str, object]:
    """Pure: fold one key's (partition, offset, value) rows, in any order, into its record;
    returns the output row."""
    events: dict[str, int] = {}
    malformed, reason, bad_offset, bad_source = 0, None, None, None
    newest = None
    for _, offset, value in sorted(rows, key=lambda r: (r[0], r[1])):
        if value is None:  # tombstone after a delete event: compaction's business, not ours
            continue
        try:
            event = decode(value)
        except MalformedEvent as e:
            malformed += 1
            reason, bad_offset, bad_source = reason or str(e), bad_offset or int(offset), "unknown"
            continue
        if f"{event.cluster}/{event.entity}" != key:
            malformed += 1
            reason = reason or f"event for {event.cluster}/{event.entity} under key {key}"
            bad_offset, bad_source = bad_offset or int(offset), event.source
            continue
        record, applied = apply_event(record, event)
        if applied is Applied.MALFORMED:
            malformed += 1
            reason = reason or f"{event.kind}/{event.op} event does not fit the entity's record"
            bad_offset, bad_source = bad_offset or int(offset), event.source
            continue
        events[f"{event.source}|{event.kind}"] = events.get(f"{event.source}|{event.kind}", 0) + 1
        newest = max(newest or 0, event.observed_ms)
    return {
        "key": key,
        "record": record_to_json(record) if record is not None else None,
        "removed": record is None,
        "cluster": record.cluster if record is not None else cluster_of(key),
        "events": events,
        "malformed": malformed,
        "malformed_source": bad_source,
        "malformed_reason": reason,
        "malformed_offset": bad_offset,
        "newest_observed_ms": newest,
        "rows": len(rows),
    }


def step(key: tuple[str], frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    """applyInPandasWithState function (update mode, no timeout)."""
    record = None
    if state.exists:
        try:
            record = record_from_json(state.get[0])
        except (MalformedEvent, ValueError, KeyError):
            record = None  # a state from an incompatible version: rebuilt from the next events
    rows: list[tuple[int, int, str | None]] = []
    for frame in frames:  # plain lists: pandas per-row work costs more than the fold itself
        rows.extend(zip(frame["partition"].tolist(), frame["offset"].tolist(), frame["value"].tolist()))
    out = fold(key[0], record, rows)
    if out["record"] is None:
        state.remove()
    else:
        state.update((out["record"],))
    yield pd.DataFrame({"key": [out["key"]], "result": [json.dumps(out)]})
