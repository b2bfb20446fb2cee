"""``kmon history``: what changed, when, in order, from the history the stream app writes."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from kmon import flags
from kmon.history import TRANSITION_KINDS, Transition, order_key
from kmon.signals import stop_on_signals
from streaming import history_query
from streaming.history_log import files
from streaming.history_query import Asked, Query, iso, read_or_warn, row_json
from streaming.paths import default_checkpoint, history_dir

log = logging.getLogger("kmon.history")

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


def query_of(args: argparse.Namespace, now_ms: int) -> Query:
    """The flags as a Query; ValueError with the line to print for a bad one."""
    if args.follow and args.to:
        raise ValueError("--follow and --to exclude each other: a range with an end has nothing new to follow")
    return history_query.query_of(Asked(args.since, args.from_, args.to, args.cluster, args.topic, args.broker,
                                        args.group, args.kind), now_ms)


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
        rows.update(t for t in read_or_warn(f) if query.matches(t) and t not in shown)
    shown |= rows
    return sorted(rows, key=order_key)


class JsonLines:
    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, rows: list[Transition]) -> None:
        for t in rows:
            self.stream.write(json.dumps(row_json(t)) + "\n")
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
