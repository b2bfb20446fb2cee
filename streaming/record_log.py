"""The driver's durable copy of every entity record, beside Spark's checkpoint.

Spark's state store holds each record, but a stateful operator only emits the keys that
changed in a batch; after a restart the driver would know nothing until every entity
changed again. So each batch's changed records are appended here as a delta file named
by batch id, and a full file replaces the deltas once they hold as many rows as it would
(so rewriting everything costs no more than what was appended: a 1-row batch on a
100k-partition cluster stays a 1-row write) or once there are ``max_deltas`` of them
(bounding the files a restart reads). A replayed batch rewrites its delta with the same
content: records are absolute (cumulative counters), so nothing counts twice.
"""
from __future__ import annotations

import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from kmon.codec import parse_json, to_json
from kmon.events import MalformedEvent
from streaming.fold.entity import EntityRecord, RecordJson, cluster_of, record_from_json

log = logging.getLogger("kmon.stream")

_FILE = re.compile(r"^(full|delta)-(\d+)\.jsonl$")
COUNTERS_FILE = "counters.json"   # the stream's self counters through a batch (streaming/views/stats.py)


@dataclass(frozen=True)
class Loaded:
    records: dict[str, EntityRecord]
    stored: dict[str, RecordJson]   # the same records as stored, for the next full file
    # cluster -> stored records that no longer decode (corrupt, or let in by a laxer kmon):
    # each is logged and left out, so one cannot stop the app from starting
    dropped: Mapping[str, int] = field(default_factory=dict)


class RecordLog:
    def __init__(self, directory: Path, max_deltas: int = 1000):
        self.dir = directory
        self.max_deltas = max_deltas
        self.dir.mkdir(parents=True, exist_ok=True)
        self._deltas = 0       # delta files since the latest full file
        self._delta_rows = 0   # and the rows in them

    def load(self) -> Loaded:
        """Latest full file plus the deltas after it. A line that does not decode leaves the
        key's earlier record in place, if any: its last good state."""
        files = sorted(self._files(), key=lambda f: (f[1], f[0] == "delta"))
        fulls = [f for f in files if f[0] == "full"]
        start = fulls[-1][1] if fulls else -1
        records: dict[str, EntityRecord] = {}
        stored: dict[str, RecordJson] = {}
        dropped: Counter[str] = Counter()
        self._deltas = self._delta_rows = 0
        for kind, batch, path in files:
            if batch < start or (batch == start and kind == "delta"):
                continue
            lines = path.read_text(errors="replace").splitlines()
            if kind == "delta":
                self._deltas += 1
                self._delta_rows += len(lines)
            for number, line in enumerate(lines, start=1):
                key = "unknown"
                try:
                    key, record_json = _line(line)
                    if record_json is None:
                        records.pop(key, None)
                        stored.pop(key, None)
                    else:
                        records[key] = record_from_json(record_json)
                        stored[key] = record_json
                except MalformedEvent as e:
                    dropped[cluster_of(key)] += 1
                    log.error("%s:%d: dropped the stored record of key %r: %s", path, number, key, e)
        return Loaded(records, stored, dict(dropped))

    def append(self, batch_id: int, changed: Mapping[str, RecordJson | None],
               current: Mapping[str, RecordJson]) -> None:
        """Persist batch ``batch_id``'s changes as the executor sent them (None = removed);
        ``current`` is every record after them, in the same form."""
        if not changed:
            return
        self._deltas += 1
        self._delta_rows += len(changed)
        if self._delta_rows < len(current) and self._deltas < self.max_deltas:
            self._write(f"delta-{batch_id}.jsonl", _lines(changed.items()))
            return
        self._write(f"full-{batch_id}.jsonl", _lines(current.items()))
        for kind, batch, path in self._files():
            if batch < batch_id or (batch == batch_id and kind == "delta"):
                path.unlink(missing_ok=True)
        self._deltas = self._delta_rows = 0

    def save_counters(self, batch_id: int, counters: Mapping[str, Any]) -> None:
        """The self counters as of batch ``batch_id``, replacing the earlier ones."""
        self._write(COUNTERS_FILE, [to_json({"batch_id": batch_id, "counters": counters})])

    def load_counters(self) -> tuple[int, Any] | None:
        """(batch id, counters) as last saved; None if never saved, or unreadable (logged: the
        counters then start again from 0, which Prometheus takes as a reset)."""
        path = self.dir / COUNTERS_FILE
        try:
            doc = parse_json(path.read_bytes())
            if type(doc) is not dict or type(doc.get("batch_id")) is not int:
                raise MalformedEvent("no batch_id")
            return doc["batch_id"], doc.get("counters")
        except FileNotFoundError:
            return None
        except (OSError, MalformedEvent) as e:
            log.error("%s: the stream's self counters could not be read (%s): they start again from 0", path, e)
            return None

    def _write(self, name: str, lines: Iterable[str]) -> None:
        tmp = self.dir / (name + ".tmp")
        with open(tmp, "w") as out:
            for line in lines:
                out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(self.dir / name)

    def _files(self) -> list[tuple[str, int, Path]]:
        out = []
        for path in self.dir.iterdir():
            m = _FILE.match(path.name)
            if m:
                out.append((m.group(1), int(m.group(2)), path))
        return out


def _lines(items: Iterable[tuple[str, RecordJson | None]]) -> Iterable[str]:
    return (to_json({"key": key, "record": record_json}) for key, record_json in items)


def _line(line: str) -> tuple[str, RecordJson | None]:
    """(key, the record as stored or None for a removal) of one line."""
    doc = parse_json(line)
    if type(doc) is not dict or type(doc.get("key")) is not str or type(doc.get("record")) not in (str, type(None)):
        raise MalformedEvent(f"not a record log line: {line[:80]!r}")
    return doc["key"], doc["record"]
