"""Asking the history: the filters `kmon history` and the stream app's API share (:class:`Query`,
parsed once from either's words by :func:`query_of`), the rows they both print (:func:`row_json`),
and a reader that reads each history file once while it stays the same (:class:`HistoryReader`)."""
from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from kmon.history import TRANSITION_KINDS, Transition, order_key
from streaming.history_log import EARLIEST_MS, LATEST_MS, HistoryFile, files, read

log = logging.getLogger("kmon.history")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# kinds whose old/new are one broker id each: a broker filter also finds the broker that lost the role
_BROKER_VALUED = frozenset({"leader_election", "unclean_leader_election", "controller_change"})


@dataclass(frozen=True)
class Query:
    since_ms: int | None
    until_ms: int | None
    cluster: str | None = None
    topic: str | None = None
    broker: int | None = None
    group: str | None = None
    kinds: frozenset[str] | None = None

    def matches(self, t: Transition) -> bool:
        return ((self.since_ms is None or t.time_ms >= self.since_ms)
                and (self.until_ms is None or t.time_ms <= self.until_ms)
                and (self.cluster is None or t.cluster == self.cluster)
                and (self.topic is None or t.topic == self.topic)
                and (self.group is None or t.group == self.group)
                and (self.kinds is None or t.kind in self.kinds)
                and (self.broker is None or t.broker == self.broker
                     or (t.kind in _BROKER_VALUED and t.old == str(self.broker))))


@dataclass(frozen=True)
class Asked:
    """The filters as given, in words: a flag's value or a query parameter's, None where not given."""
    since: str = "1h"
    from_: str | None = None
    to: str | None = None
    cluster: str | None = None
    topic: str | None = None
    broker: str | None = None
    group: str | None = None
    kind: str | None = None


def parse_duration(name: str, text: str) -> float:
    """Seconds in '90s', '15m', '1h', '2d', '1w'; ValueError naming ``name`` and the text."""
    m = _DURATION.match(text.strip())
    if not m:
        raise ValueError(f"{name} {text!r} is not a duration like 90s, 15m, 1h, 2d or 1w")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def parse_time(name: str, text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 time (UTC unless it has an offset) or of
    epoch seconds; ValueError naming ``name`` and the text."""
    text = text.strip()
    try:
        if re.fullmatch(r"\d+(\.\d+)?", text):
            ms = float(text) * 1000
        else:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            ms = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp() * 1000
    except ValueError:
        raise ValueError(f"{name} {text!r} is not a time: use ISO 8601 (2026-11-23T14:05:00, "
                         "UTC unless it has an offset) or epoch seconds") from None
    if not EARLIEST_MS <= ms <= LATEST_MS:   # no day to look in (an offset can push year 1 or 9999 out)
        raise ValueError(f"{name} {text!r} is past the years 1 to 9999")
    return int(ms)


def printable(text: str) -> str:
    """The text, quoted and escaped when it holds what would break the line (a line feed, a CR)."""
    return text if text.isprintable() else repr(text)


def query_of(asked: Asked, now_ms: int, prefix: str = "--") -> Query:
    """The filters as a Query; ValueError with the line to tell for a bad one, naming it as the
    asker wrote it (``prefix``: "--" for a flag, "" for a query parameter)."""
    kinds = None
    if asked.kind is not None:
        kinds = frozenset(k.strip() for k in asked.kind.split(",") if k.strip())
        unknown = sorted(kinds - TRANSITION_KINDS.keys())
        if unknown or not kinds:
            named = ", ".join(map(printable, unknown)) or "(none given)"
            raise ValueError(f"{prefix}kind {asked.kind!r}: unknown kind {named}; kinds: {', '.join(TRANSITION_KINDS)}")
    broker = None
    if asked.broker is not None:
        if not re.fullmatch(r"-?\d+", asked.broker.strip()):
            raise ValueError(f"{prefix}broker {asked.broker!r} is not a broker id (an integer)")
        broker = int(asked.broker)
    if asked.from_:
        since = parse_time(f"{prefix}from", asked.from_)
    else:
        back_ms = parse_duration(f"{prefix}since", asked.since) * 1000
        if not back_ms <= now_ms - EARLIEST_MS:
            raise ValueError(f"{prefix}since {asked.since!r} reaches past the year 1")
        since = now_ms - int(back_ms)
    until = parse_time(f"{prefix}to", asked.to) if asked.to else None
    if until is not None and until < since:
        raise ValueError(f"{prefix}to {asked.to!r} is before the start of the range")
    return Query(since, until, asked.cluster, asked.topic, broker, asked.group, kinds)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def row_json(t: Transition) -> dict[str, Any]:
    """A row as `kmon history --json` prints it and the API returns it."""
    return {"time": iso(t.time_ms), **t._asdict()}


def read_or_warn(f: HistoryFile) -> list[Transition]:
    try:
        return list(read(f))
    except ValueError as e:
        log.warning("skipped %s", e)
        return []


class HistoryReader:
    """The history's rows by query, each file parsed once while it is unchanged (a file Spark
    rewrites when it runs a batch again is read again), up to ``max_rows`` rows kept, the files
    asked for least recently dropped first. Thread-safe: the API's requests share one."""

    def __init__(self, directory: Path, max_rows: int = 500_000):
        self.dir = directory
        self._max_rows = max_rows
        self._lock = threading.Lock()
        self._parsed: OrderedDict[Path, tuple[int, list[Transition]]] = OrderedDict()   # path -> (mtime, rows)
        self._held = 0

    def rows(self, query: Query) -> list[Transition]:
        """Every matching row once, in order. A file Spark rewrote when it ran a batch again holds
        the same rows, and two stream apps on one history (each with its own checkpoint) write the
        same rows to their own files."""
        found: set[Transition] = set()
        for f in self._files(query):
            found.update(t for t in self._read(f) if query.matches(t))
        return sorted(found, key=order_key)

    def recent(self, cluster: str, entity: str, n: int) -> list[Transition]:
        """The entity's last ``n`` transitions in order, read back a day at a time."""
        by_day: defaultdict[date, list[HistoryFile]] = defaultdict(list)
        for f in files(self.dir):
            if f.cluster == cluster:
                by_day[f.day].append(f)
        found: set[Transition] = set()
        for day in sorted(by_day, reverse=True):
            for f in by_day[day]:
                found.update(t for t in self._read(f) if t.entity == entity)
            if len(found) >= n:
                break
        return sorted(found, key=order_key)[-n:] if n else []

    def _files(self, query: Query) -> Iterable[HistoryFile]:
        return [f for f in files(self.dir, query.since_ms, query.until_ms)
                if query.cluster is None or f.cluster == query.cluster]

    def _read(self, f: HistoryFile) -> list[Transition]:
        with self._lock:
            hit = self._parsed.get(f.path)
            if hit is not None and hit[0] == f.mtime_ns:
                self._parsed.move_to_end(f.path)
                return hit[1]
        rows = read_or_warn(f)
        with self._lock:
            old = self._parsed.pop(f.path, None)
            self._held -= len(old[1]) if old else 0
            self._parsed[f.path] = (f.mtime_ns, rows)
            self._held += len(rows)
            while self._held > self._max_rows and len(self._parsed) > 1:
                _, (_, dropped) = self._parsed.popitem(last=False)
                self._held -= len(dropped)
        return rows
