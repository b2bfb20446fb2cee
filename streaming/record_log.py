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

import json
import os
import re
from pathlib import Path
from typing import Iterable, Mapping

from streaming.records import EntityRecord, record_from_json, record_to_json

_FILE = re.compile(r"^(full|delta)-(\d+)\.jsonl$")


class RecordLog:
    def __init__(self, directory: Path, max_deltas: int = 1000):
        self.dir = directory
        self.max_deltas = max_deltas
        self.dir.mkdir(parents=True, exist_ok=True)
        self._deltas = 0       # delta files since the latest full file
        self._delta_rows = 0   # and the rows in them

    def load(self) -> dict[str, EntityRecord]:
        """Latest full file plus the deltas after it."""
        files = sorted(self._files(), key=lambda f: (f[1], f[0] == "delta"))
        fulls = [f for f in files if f[0] == "full"]
        start = fulls[-1][1] if fulls else -1
        records: dict[str, EntityRecord] = {}
        self._deltas = self._delta_rows = 0
        for kind, batch, path in files:
            if batch < start or (batch == start and kind == "delta"):
                continue
            lines = path.read_text().splitlines()
            if kind == "delta":
                self._deltas += 1
                self._delta_rows += len(lines)
            for line in lines:
                doc = json.loads(line)
                if doc["record"] is None:
                    records.pop(doc["key"], None)
                else:
                    records[doc["key"]] = record_from_json(doc["record"])
        return records

    def append(self, batch_id: int, changed: Mapping[str, EntityRecord | None],
               current: Mapping[str, EntityRecord]) -> None:
        """Persist batch ``batch_id``'s changes (None = removed); ``current`` is every record after them."""
        if not changed:
            return
        self._deltas += 1
        self._delta_rows += len(changed)
        if self._delta_rows < len(current) and self._deltas < self.max_deltas:
            self._write(f"delta-{batch_id}.jsonl", changed.items())
            return
        self._write(f"full-{batch_id}.jsonl", current.items())
        for kind, batch, path in self._files():
            if batch < batch_id or (batch == batch_id and kind == "delta"):
                path.unlink(missing_ok=True)
        self._deltas = self._delta_rows = 0

    def _write(self, name: str, items: Iterable[tuple[str, EntityRecord | None]]) -> None:
        tmp = self.dir / (name + ".tmp")
        with open(tmp, "w") as out:
            for key, record in items:
                out.write(json.dumps({"key": key,
                                      "record": None if record is None else record_to_json(record)}) + "\n")
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
