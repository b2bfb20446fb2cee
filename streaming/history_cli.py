"""``kmon history``: what changed, when, in order, from the history the stream app writes."""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, TextIO

from kmon import flags
from kmon.history import TRANSITION_KINDS, Transition, order_key
from kmon.signals import stop_on_signals
from streaming.history_log import EARLIEST_MS, LATEST_MS, HistoryFile, files, read
from streaming.paths import default_checkpoint, history_dir

log = logging.getLogger("kmon.history")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# kinds whose old/new are one broker id each: --broker also finds the broker that lost the role
_BROKER_VALUED = frozenset({"leader_election", "unclean_leader_election", "controller_change"})


def add_history_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "history", help="what changed, when, in order: the transitions the views counted",
        description="Print the transition history kmon stream writes (ISR shrinks and expands, leader and "
                    "unclean elections, controller changes, brokers and topics coming and going, "
                    "reassignments, consumer-group states and rebalances), oldest first. The history is "
                    "Parquet, partitioned by cluster and day: Spark SQL, pandas or DuckDB read it too.",
        epilog="kinds: " + ", ".join(TRANSITION_KINDS))
    flags.flag(p, "--dir", default=history_dir(default_checkpoint()), type=Path,
                help="the history directory (kmon stream's --history-dir)")
    flags.flag(p, "--since", default="1h", metavar="DURATION",
                help="how far back: 90s, 15m, 1h, 2d, 1w (ignored with --from)")
    flags.flag(p, "--from", dest="from_", metavar="TIME",
                help="from this time: ISO 8601 (2026-11-23T14:05, UTC unless it names a zone) or epoch seconds")
    flags.flag(p, "--to", metavar="TIME", help="up to this time (same forms as --from)")
    flags.flag(p, "--cluster", help="only this cluster")
    flags.flag(p, "--topic", help="only this topic")
    flags.flag(p, "--broker", metavar="ID", help="only transitions about this broker (joined, left, won or lost a role)")
    flags.flag(p, "--group", help="only this consumer group")
    flags.flag(p, "--kind", metavar="KIND[,KIND...]", help="only these kinds (listed below)")
    flags.switch(p, "--json", help="one JSON object per line instead of a table")
    flags.switch(p, "--follow", help="keep printing new transitions as they are written, until SIGTERM/Ctrl-C")
    flags.flag(p, "--poll-interval", default=1.0, type=flags.positive_float, metavar="SECONDS",
                help="with --follow: how often to look for new ones")
    p.set_defaults(handler=cmd_history)


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


def parse_duration(text: str) -> float:
    """Seconds in '90s', '15m', '1h', '2d', '1w'; ValueError naming the text."""
    m = _DURATION.match(text.strip())
    if not m:
        raise ValueError(f"--since {text!r} is not a duration like 90s, 15m, 1h, 2d or 1w")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def parse_time(flag: str, text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 time (UTC unless it has an offset) or of
    epoch seconds; ValueError naming the flag and the text."""
    text = text.strip()
    try:
        if re.fullmatch(r"\d+(\.\d+)?", text):
            ms = float(text) * 1000
        else:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            ms = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp() * 1000
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not a time: use ISO 8601 (2026-11-23T14:05:00, "
                         "UTC unless it has an offset) or epoch seconds") from None
    if not EARLIEST_MS <= ms <= LATEST_MS:   # no day to look in (an offset can push year 1 or 9999 out)
        raise ValueError(f"{flag} {text!r} is past the years 1 to 9999")
    return int(ms)


def _printable(text: str) -> str:
    """The text, quoted and escaped when it holds what would break the line (a line feed, a CR)."""
    return text if text.isprintable() else repr(text)


def query_of(args: argparse.Namespace, now_ms: int) -> Query:
    """The flags as a Query; ValueError with the line to print for a bad one."""
    kinds = None
    if args.kind:
        kinds = frozenset(k.strip() for k in args.kind.split(",") if k.strip())
        unknown = sorted(kinds - TRANSITION_KINDS.keys())
        if unknown or not kinds:
            named = ", ".join(map(_printable, unknown)) or "(none given)"
            raise ValueError(f"--kind {args.kind!r}: unknown kind {named}; kinds: {', '.join(TRANSITION_KINDS)}")
    broker = None
    if args.broker is not None:
        if not re.fullmatch(r"-?\d+", args.broker.strip()):
            raise ValueError(f"--broker {args.broker!r} is not a broker id (an integer)")
        broker = int(args.broker)
    if args.from_:
        since = parse_time("--from", args.from_)
    else:
        back_ms = parse_duration(args.since) * 1000
        if not back_ms <= now_ms - EARLIEST_MS:
            raise ValueError(f"--since {args.since!r} reaches past the year 1")
        since = now_ms - int(back_ms)
    until = parse_time("--to", args.to) if args.to else None
    if args.follow and until is not None:
        raise ValueError("--follow and --to exclude each other: a range with an end has nothing new to follow")
    if until is not None and until < since:
        raise ValueError(f"--to {args.to!r} is before the start of the range")
    return Query(since, until, args.cluster, args.topic, broker, args.group, kinds)


def cmd_history(args: argparse.Namespace) -> int:
    try:
        return _history(args)
    except BrokenPipeError:   # `kmon history | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
        return 0


def _history(args: argparse.Namespace) -> int:
    try:
        query = query_of(args, int(time.time() * 1000))
    except ValueError as e:
        print(f"kmon history: {e}", file=sys.stderr)
        return 2
    directory: Path = args.dir
    if not directory.is_dir():
        print(f"kmon history: no history at {directory} (kmon stream writes it to its --history-dir, "
              "by default <checkpoint>/history)", file=sys.stderr)
        return 2
    if not files(directory):
        print(f"kmon history: {directory} holds no history yet: kmon stream writes a file once it sees "
              "a transition", file=sys.stderr)
        return 2
    out = JsonLines(sys.stdout) if args.json else Table(sys.stdout)
    read_files: set[Path] = set()
    shown: set[Transition] = set()
    rows = _new_rows(directory, query, read_files, shown)
    out.write(rows)
    if not args.follow:
        if not rows:
            print("kmon history: no transition matches", file=sys.stderr)
        return 0
    stopped = threading.Event()
    stop_on_signals(stopped)
    while not stopped.wait(args.poll_interval):
        out.write(_new_rows(directory, query, read_files, shown))
    return 0


def _new_rows(directory: Path, query: Query, read_files: set[Path], shown: set[Transition]) -> list[Transition]:
    """The matching rows not shown yet, in order. A file Spark rewrote when it ran a batch
    again holds the same rows, and two stream apps on one history (each with its own
    checkpoint) write the same rows to their own files: each row is shown once."""
    rows: set[Transition] = set()
    for f in files(directory, query.since_ms, query.until_ms):
        if f.path in read_files or (query.cluster is not None and f.cluster != query.cluster):
            continue
        read_files.add(f.path)
        rows.update(t for t in _read_or_warn(f) if query.matches(t) and t not in shown)
    shown |= rows
    return sorted(rows, key=order_key)


def _read_or_warn(f: HistoryFile) -> Iterable[Transition]:
    try:
        return list(read(f))
    except ValueError as e:
        log.warning("skipped %s", e)
        return []


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonLines:
    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, rows: list[Transition]) -> None:
        for t in rows:
            self.stream.write(json.dumps({"time": iso(t.time_ms), **t._asdict()}) + "\n")
        self.stream.flush()


def where(t: Transition) -> str:
    if t.topic is not None:
        return t.topic if t.partition is None else f"{t.topic}:{t.partition}"
    if t.group is not None:
        return f"group {t.group}"
    if t.kind == "controller_change":
        return "controller"
    return f"broker {t.broker}" if t.broker is not None else t.entity


class Table:
    """Aligned columns; with --follow later rows keep the widths (wider values push theirs)."""
    HEADER = ("TIME (UTC)", "CLUSTER", "KIND", "WHERE", "BROKER", "CHANGE", "EPOCH/GEN", "DETAIL")

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.widths: list[int] | None = None

    def write(self, rows: list[Transition]) -> None:
        cells = [self._cells(t) for t in rows]
        if self.widths is None:
            if not cells:
                return
            self.widths = [max(len(c[i]) for c in [self.HEADER, *cells]) for i in range(len(self.HEADER))]
            self._line(self.HEADER)
        for c in cells:
            self._line(c)
        self.stream.flush()

    def _line(self, cells: tuple[str, ...]) -> None:
        assert self.widths is not None
        line = "  ".join(c.ljust(w) for c, w in zip(cells[:-1], self.widths)) + "  " + cells[-1]
        self.stream.write(line.rstrip() + "\n")

    @staticmethod
    def _cells(t: Transition) -> tuple[str, ...]:
        change = f"{t.old if t.old not in (None, '') else '-'} -> {t.new if t.new not in (None, '') else '-'}" \
            if t.old is not None or t.new is not None else ""
        step = t.generation if t.generation is not None else t.epoch
        return (iso(t.time_ms), t.cluster, t.kind, where(t), "" if t.broker is None else str(t.broker), change,
                "" if step is None else str(step), t.detail or "")
