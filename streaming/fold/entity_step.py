"""The stateful step Spark runs per state bucket (on executors).

Spark groups the events topic by bucket, a hash of the message key (``<cluster>/<entity>``)
modulo :data:`BUCKETS`, and calls :func:`step` with the bucket's new rows and its state: the
records of the bucket's entities, as one JSON object of message key -> EntityRecord JSON. A
group per entity cost pyspark's Arrow/pandas conversions and a state round trip per key and
batch, which held a backlog drain back (bench/NOTES.md); a bucket pays that once for hundreds
of keys.

Within a bucket each key's rows are folded in Kafka offset order by :func:`fold` with
:func:`streaming.fold.entity.apply_event`, which returns one row describing the key after the batch,
plus what it saw, for the self-metrics, and the transitions it counted, for the history
(streaming/fold/history.py). Malformed values, and a stored record that no longer decodes, are
counted and the first reason is returned so the driver can log it with its partition and
offset; they never fail the query. The step outputs each key's record, and for the whole
bucket what its rows saw (:func:`summarise`) and its transitions, so the driver reads a
bucket's counts, not each key's.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Iterable, Iterator

from kmon.codec import decode, parse_json, to_json
from kmon.events import MalformedEvent
from kmon.history import Transition
from streaming.fold.arrow import table, to_ipc
from streaming.fold.entity import (UNKNOWN_SOURCE, Applied, apply_event, cluster_of, record_from_json,
                               record_to_json)

# Fixed once a checkpoint holds state: a key must stay in its bucket. 256 keeps a bucket's
# state near 250 KB at 100k partitions (what a 1-event batch rewrites) and 2.5 MB at 1M.
BUCKETS = 256
STATE_SCHEMA = "records string"
# A key's record travels in its own column, as the state holds it (None: gone); the bucket's
# summary (JSON) and its transitions (one Arrow stream, history_log.to_ipc) on its first row.
OUTPUT_SCHEMA = "key string, record string, summary string, history binary"


def fold(key: str, stored: str | None, rows: list[tuple[int, int, str | None]]) -> dict[str, object]:
    """Pure: fold one key's (partition, offset, value) rows, in any order, into its record,
    which its bucket's state holds as ``stored`` (record_to_json; None for a new key); returns
    the output row. A bad event is skipped, so the record keeps its last good state."""
    record, dropped_state = None, None
    if stored is not None:
        try:
            record = record_from_json(stored)
        except MalformedEvent as e:   # corrupt, or let in by a laxer kmon: rebuilt from the next events
            dropped_state = str(e)
    events: dict[str, int] = {}
    malformed: list[tuple[int, int, str, str]] = []   # (partition, offset, source, why) per bad event
    newest = None
    history: list[Transition] = []   # in the key's order
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
        record, applied, told = apply_event(record, event)
        history.extend(told)
        if applied is Applied.MALFORMED:
            malformed.append((int(partition), int(offset), event.source,
                              f"{event.kind}/{event.op} event does not fit the entity's record"))
            continue
        seen = f"{event.source}|{event.kind}"
        events[seen] = events.get(seen, 0) + 1
        newest = max(newest or 0, event.observed_ms)
    first = malformed[0] if malformed else (None, None, None, None)
    return {
        "key": key,
        "record": record_to_json(record) if record is not None else None,
        "cluster": record.cluster if record is not None else cluster_of(key),
        "events": events,
        "malformed": dict(Counter(source for _, _, source, _ in malformed)) if malformed else {},   # source -> bad events
        "malformed_partition": first[0],
        "malformed_offset": first[1],
        "malformed_reason": first[3],
        "dropped_state": dropped_state,   # why the stored record was dropped, if it was
        "newest_observed_ms": newest,
        "rows": len(rows),
        "transitions": history,
    }


def fold_bucket(state: str | None, rows: list[tuple[str, int, int, str | None]]) -> tuple[str | None, list[dict]]:
    """Pure: fold one bucket's (key, partition, offset, value) rows into its state (None: no
    records); returns the new state (None when it holds no record) and fold()'s row per key.
    A state that no longer parses is dropped, counted under each key it would have held, and
    rebuilt from the keys' next events (the driver's record log still has them)."""
    records, dropped = _records(state)
    by_key: defaultdict[str, list[tuple[int, int, str | None]]] = defaultdict(list)
    for key, partition, offset, value in rows:
        by_key[key].append((partition, offset, value))
    out = []
    for key, key_rows in by_key.items():
        row = fold(key, records.get(key), key_rows)
        if dropped is not None and row["dropped_state"] is None:
            row["dropped_state"] = dropped
        if row["record"] is None:
            records.pop(key, None)
        else:
            records[key] = row["record"]
        out.append(row)
    return (to_json(records) if records else None), out


def summarise(rows: Iterable[dict]) -> dict:
    """Pure: what fold()'s rows saw, as the driver counts it: rows read per cluster; events per
    cluster, source and kind; malformed events per cluster and source; the newest observed
    time per cluster and source; and the rows with something to log (malformed events, a
    dropped stored record)."""
    input_rows: dict[str, int] = {}
    events: dict[str, dict[str, dict[str, int]]] = {}
    malformed: dict[str, dict[str, int]] = {}
    newest: dict[str, dict[str, int]] = {}
    problems = []
    for row in rows:
        cluster = row["cluster"]
        input_rows[cluster] = input_rows.get(cluster, 0) + row["rows"]
        for source_kind, n in row["events"].items():
            source, kind = source_kind.split("|", 1)
            kinds = events.setdefault(cluster, {}).setdefault(source, {})
            kinds[kind] = kinds.get(kind, 0) + n
            if row["newest_observed_ms"] is not None:
                by_source = newest.setdefault(cluster, {})
                by_source[source] = max(row["newest_observed_ms"], by_source.get(source, 0))
        for source, n in row["malformed"].items():
            sources = malformed.setdefault(cluster, {})
            sources[source] = sources.get(source, 0) + n
        if row["malformed"] or row["dropped_state"] is not None:
            problems.append({k: row[k] for k in _PROBLEM_FIELDS})
    return {"input_rows": input_rows, "events": events, "malformed": malformed, "newest_observed_ms": newest,
            "problems": problems}


_PROBLEM_FIELDS = ("key", "cluster", "malformed", "malformed_partition", "malformed_offset", "malformed_reason",
                   "dropped_state")


def _records(state: str | None) -> tuple[dict[str, str], str | None]:
    if state is None:
        return {}, None
    try:
        records = parse_json(state)
    except MalformedEvent as e:
        return {}, f"the state of its bucket: {e}"
    if type(records) is not dict or not all(type(k) is str and type(v) is str for k, v in records.items()):
        return {}, "the state of its bucket is not a map of key -> record"
    return records, None


if TYPE_CHECKING:
    import pandas as pd


def step(bucket: tuple[int], frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    """applyInPandasWithState function (update mode, no timeout)."""
    import pandas as pd   # here: only the executors need it, not every kmon command (130 MB, 0.8 s)
    rows: list[tuple[str, int, int, str | None]] = []
    for frame in frames:  # plain lists: pandas per-row work costs more than the fold itself
        rows.extend(zip(frame["key"].tolist(), frame["partition"].tolist(), frame["offset"].tolist(),
                        frame["value"].tolist()))
    new_state, out = fold_bucket(state.get[0] if state.exists else None, rows)
    if new_state is None:
        state.remove()
    else:
        state.update((new_state,))
    history = table(t for row in out for t in row["transitions"])
    rest = [None] * (len(out) - 1)
    yield pd.DataFrame({"key": [row["key"] for row in out], "record": [row["record"] for row in out],
                        "summary": [to_json(summarise(out))] + rest,
                        "history": [to_ipc(history) if history.num_rows else None] + rest})
