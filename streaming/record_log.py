"""The driver's durable copy of every entity record, beside Spark's checkpoint.

Spark's state store holds each record, but a stateful operator only emits the keys that
changed in a batch; after a restart the driver would know nothing until every entity
changed again. So each batch's changed records are appended here as a delta file named
by batch id, and a full file replaces the deltas once they hold as many rows as the last
full file (so rewriting everything costs no more than what was appended: a 1-row batch on
a 100k-partition cluster stays a 1-row write) or once there are ``max_deltas`` of them
(bounding the files a restart reads). A replayed batch rewrites its delta with the same
content: records are absolute (cumulative counters), so nothing counts twice.

The full file is made from the files, not from memory: the last full file's lines, with the
deltas' later records over them. So the driver keeps no copy of every record as stored
(~0.7 KB a partition, bench/NOTES.md); the views hold the records themselves.
"""
from __future__ import annotations

import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from kmon.codec import parse_json, to_json
from kmon.events import MalformedEvent
from streaming.fold.entity import EntityRecord, RecordJson, cluster_of, record_from_json, record_to_json

log = logging.getLogger("kmon.stream")

_FILE = re.compile(r"^(full|delta)-(\d+)\.jsonl$")
COUNTERS_FILE = "counters.json"   # the stream's self counters through a batch (streaming/views/stats.py)


@dataclass(frozen=True)
class Loaded:
    records: dict[str, EntityRecord]
    # cluster -> stored records that no longer decode (corrupt, or let in by a laxer kmon):
    # each is logged, left out and written out of the files, so one cannot stop the app from
    # starting and is counted once
    dropped: Mapping[str, int] = field(default_factory=dict)


class RecordLog:
    def __init__(self, directory: Path, max_deltas: int = 1000):
        self.dir = directory
        self.max_deltas = max_deltas
        self.dir.mkdir(parents=True, exist_ok=True)
        self._deltas = 0       # delta files since the latest full file
        self._delta_rows = 0   # and the rows in them
        self._full_rows = 0    # the rows of the latest full file

    def load(self, keeps: Callable[[str], bool] = lambda key: True) -> Loaded:
        """Latest full file plus the deltas after it. A line that does not decode leaves the
        key's earlier record in place, if any: its last good state. ``keeps``: whether a key's
        record is kept (a checkpoint reused with another --cluster-share). Where a line was
        dropped or a record not kept, the files are rewritten as what was loaded."""
        files = self._since_full()
        records: dict[str, EntityRecord] = {}
        dropped: Counter[str] = Counter()
        self._deltas = self._delta_rows = self._full_rows = 0
        for kind, _, path in files:
            lines = path.read_text(errors="replace").splitlines()
            if kind == "delta":
                self._deltas += 1
                self._delta_rows += len(lines)
            else:
                self._full_rows = len(lines)
            for number, line in enumerate(lines, start=1):
                key = "unknown"
                try:
                    key, record_json = _line(line)
                    if record_json is None:
                        records.pop(key, None)
                    else:
                        records[key] = record_from_json(record_json)
                except MalformedEvent as e:
                    dropped[cluster_of(key)] += 1
                    log.error("%s:%d: dropped the stored record of key %r: %s", path, number, key, e)
        left = [key for key in records if not keeps(key)]
        for key in left:
            del records[key]
        if dropped or left:   # rare: the records written again as loaded
            self._replace_all(files[-1][1], _lines((key, record_to_json(r)) for key, r in records.items()))
        return Loaded(records, dict(dropped))

    def append(self, batch_id: int, changed: Mapping[str, RecordJson | None]) -> None:
        """Persist batch ``batch_id``'s changes as the executor sent them (None = removed)."""
        if not changed:
            return
        self._deltas += 1
        self._delta_rows += len(changed)
        if self._delta_rows < self._full_rows and self._deltas < self.max_deltas:
            self._write(f"delta-{batch_id}.jsonl", _lines(changed.items()))
            return
        files = self._since_full()
        # the deltas' and this batch's lines, the latest of each key (None: removed)
        later: dict[str, str | None] = {}
        for kind, _, path in files:
            if kind == "delta":
                for line in path.read_text().splitlines():
                    later[_key_of(line)] = None if line.endswith(_REMOVED) else line
        later.update((key, None if record_json is None else _text(key, record_json))
                     for key, record_json in changed.items())
        full = files[0][2] if files and files[0][0] == "full" else None
        self._replace_all(batch_id, _merged(full, later))

    def _since_full(self) -> list[tuple[str, int, Path]]:
        """The latest full file, then the deltas after it, in batch order."""
        files = sorted(self._files(), key=lambda f: (f[1], f[0] == "delta"))
        fulls = [f for f in files if f[0] == "full"]
        start = fulls[-1][1] if fulls else -1
        return [f for f in files if f[1] > start or (f[1] == start and f[0] == "full")]

    def _replace_all(self, batch_id: int, lines: Iterable[str]) -> None:
        """A full file of ``lines`` as of ``batch_id``, and the files it replaces gone."""
        self._full_rows = self._write(f"full-{batch_id}.jsonl", lines)
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

    def _write(self, name: str, lines: Iterable[str]) -> int:
        """Writes the file whole or not at all; returns its lines."""
        tmp = self.dir / (name + ".tmp")
        written = 0
        with open(tmp, "w") as out:
            for line in lines:
                out.write(line + "\n")
                written += 1
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(self.dir / name)
        return written

    def _files(self) -> list[tuple[str, int, Path]]:
        out = []
        for path in self.dir.iterdir():
            m = _FILE.match(path.name)
            if m:
                out.append((m.group(1), int(m.group(2)), path))
        return out


def _lines(items: Iterable[tuple[str, RecordJson | None]]) -> Iterable[str]:
    return (_text(key, record_json) for key, record_json in items)


def _text(key: str, record_json: RecordJson | None) -> str:
    return to_json({"key": key, "record": record_json})


_KEY_START, _KEY_END, _REMOVED = '{"key":"', '","record":', ',"record":null}'


def _key_of(line: str) -> str:
    """The key of a line _text() wrote, without parsing its record: JSON escapes every quote inside
    a string, so the first '","record":' ends the key (one with an escape is parsed whole)."""
    end = line.find(_KEY_END)
    if line.startswith(_KEY_START) and end > 0 and "\\" not in (key := line[len(_KEY_START):end]):
        return key
    return _line(line)[0]


def _merged(full: Path | None, later: Mapping[str, str | None]) -> Iterator[str]:
    """The lines of the full file ``full`` with ``later``'s lines over them (None: removed)."""
    if full is not None:
        with open(full, errors="replace") as lines:
            for number, line in enumerate(lines, start=1):
                line = line.rstrip("\n")
                try:
                    key = _key_of(line)
                except MalformedEvent as e:   # loaded whole at the start: changed on disk since
                    log.error("%s:%d: left a line out of the next full file: %s", full, number, e)
                    continue
                if key not in later:
                    yield line
    yield from (line for line in later.values() if line is not None)


def _line(line: str) -> tuple[str, RecordJson | None]:
    """(key, the record as stored or None for a removal) of one line."""
    doc = parse_json(line)
    if type(doc) is not dict or type(doc.get("key")) is not str or type(doc.get("record")) not in (str, type(None)):
        raise MalformedEvent(f"not a record log line: {line[:80]!r}")
    return doc["key"], doc["record"]
