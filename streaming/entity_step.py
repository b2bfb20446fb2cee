"""The stateful step Spark runs per entity key (on executors).

Spark groups the events topic by message key (``<cluster>/<entity>``) and calls
:func:`step` with the key's new rows and its state: the EntityRecord as JSON. The step
folds the rows in Kafka offset order with :func:`streaming.records.apply_event` and
returns one row describing the key after the batch, plus what it saw, for the
self-metrics. Malformed values, and a stored record that no longer decodes, are counted
and the first reason is returned so the driver can log it with its partition and offset;
they never fail the query.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Iterator

import pandas as pd

from kmon.events import MalformedEvent, decode
from streaming.records import (UNKNOWN_SOURCE, Applied, apply_event, cluster_of, record_from_json,
                               record_to_json)

STATE_SCHEMA = "record string"
# One JSON column: building a pandas frame per key is the step's main cost, and it
# grows with the column count. The result's fields are those fold() returns.
OUTPUT_SCHEMA = "key string, result string"


def fold(key: str, state: str | None, rows: list[tuple[int, int, str | None]]) -> dict[str, object]:
    """Pure: fold one key's (partition, offset, value) rows, in any order, into its record,
    which the state store holds as ``state`` (record_to_json; None for a new key); returns the
    output row. A bad event is skipped, so the record keeps its last good state."""
    record, dropped_state = None, None
    if state is not None:
        try:
            record = record_from_json(state)
        except MalformedEvent as e:   # corrupt, or let in by a laxer kmon: rebuilt from the next events
            dropped_state = str(e)
    events: dict[str, int] = {}
    malformed: list[tuple[int, int, str, str]] = []   # (partition, offset, source, why) per bad event
    newest = None
    for partition, offset, value in sorted(rows, key=lambda r: (r[0], r[1])):
        if value is None:  # tombstone after a delete event: compaction's business, not ours
            continue
        try:
            event = decode(value)
        except MalformedEvent as e:
            malformed.append((int(partition), int(offset), UNKNOWN_SOURCE, str(e)))
            continue
        if f"{event.cluster}/{event.entity}" != key:
            malformed.append((int(partition), int(offset), event.source,
                              f"event for {event.cluster}/{event.entity} under key {key}"))
            continue
        record, applied = apply_event(record, event)
        if applied is Applied.MALFORMED:
            malformed.append((int(partition), int(offset), event.source,
                              f"{event.kind}/{event.op} event does not fit the entity's record"))
            continue
        events[f"{event.source}|{event.kind}"] = events.get(f"{event.source}|{event.kind}", 0) + 1
        newest = max(newest or 0, event.observed_ms)
    first = malformed[0] if malformed else (None, None, None, None)
    return {
        "key": key,
        "record": record_to_json(record) if record is not None else None,
        "removed": record is None,
        "cluster": record.cluster if record is not None else cluster_of(key),
        "events": events,
        "malformed": dict(Counter(source for _, _, source, _ in malformed)),   # source -> bad events
        "malformed_partition": first[0],
        "malformed_offset": first[1],
        "malformed_reason": first[3],
        "dropped_state": dropped_state,   # why the stored record was dropped, if it was
        "newest_observed_ms": newest,
        "rows": len(rows),
    }


def step(key: tuple[str], frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    """applyInPandasWithState function (update mode, no timeout)."""
    rows: list[tuple[int, int, str | None]] = []
    for frame in frames:  # plain lists: pandas per-row work costs more than the fold itself
        rows.extend(zip(frame["partition"].tolist(), frame["offset"].tolist(), frame["value"].tolist()))
    out = fold(key[0], state.get[0] if state.exists else None, rows)
    if out["record"] is None:
        state.remove()
    else:
        state.update((out["record"],))
    yield pd.DataFrame({"key": [out["key"]], "result": [json.dumps(out)]})
