"""``kmon history``'s inputs: its flags, and the Parquet files it reads.

* ``flags``: the command's flags with mutated values, parsed and run as ``kmon history`` does
  (cli.main's parser, then the handler) on a directory with one good file: exit 0, or exit 2
  with one line that says what is wrong (argparse's usage and error, or one ``kmon history:``
  line); never an exception, and never a value that fails later (--poll-interval is waited on).
* ``files``: history files of any bytes (corrupt, truncated, empty, another schema, other
  types, nulls, times past any calendar) beside a good one: every bad file is skipped with a
  warning, the good file's rows are all printed, exit 0.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import json
import logging
import math
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cli.main import build_parser
from kmon.history import Transition
from streaming.fold.arrow import table
from streaming.history_log import HistoryLog
from tests.fuzz.cases import Case
from tests.fuzz.engine import Target

pa.set_cpu_count(1)       # one core: the machine is shared
pa.set_io_thread_count(1)
_DAY_MS = 1_700_000_000_000   # 2023-11-14, the good file's day
GOOD = [Transition(_DAY_MS + i, "c1", "isr_shrink", "partition:orders:0", topic="orders", partition=0, broker=i,
                   old="1,2,3", new="1,2", position=i) for i in range(3)]
_PARSER = build_parser()


def _history_dir(root: Path) -> Path:
    """A history with the good file, as the stream writes it."""
    HistoryLog(root, "w", retention_days=100_000, clock=lambda: _DAY_MS / 1000).append(1, [table(GOOD)])
    return root


def _run(argv: list[str]) -> tuple[int, str, str]:
    """``kmon <argv>`` as cli.main runs it, but an exception is the caller's: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _warnings_to(err):
        try:
            args = _PARSER.parse_args(argv)
        except SystemExit as e:   # argparse's usage and error
            return int(e.code or 0), out.getvalue(), err.getvalue()
        _check_poll_interval(args)
        return args.handler(args), out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _warnings_to(stream: io.StringIO):
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("kmon.history")
    logger.addHandler(handler)
    previous = logging.root.manager.disable
    logging.disable(logging.NOTSET)   # the engine silences logs; these are part of the property
    try:
        yield
    finally:
        logging.disable(previous)
        logger.removeHandler(handler)


def _check_poll_interval(args: argparse.Namespace) -> None:
    """--follow waits this long between looks: threading.Event.wait takes only a finite time."""
    assert math.isfinite(args.poll_interval), f"--poll-interval {args.poll_interval} was accepted"


# ------------------------------------------------------------------ flags

_FLAGS = ("--since", "--from", "--to", "--cluster", "--topic", "--broker", "--group", "--kind", "--poll-interval")
_SEED_FLAGS = [[(b"--since", b"1h")], [(b"--since", b"2d"), (b"--kind", b"isr_shrink,leader_election")],
               [(b"--from", b"2023-11-14T00:00"), (b"--to", b"1700000010")], [(b"--from", b"1700000000.5")],
               [(b"--broker", b"1"), (b"--cluster", b"c1"), (b"--topic", b"orders"), (b"--group", b"g")],
               [(b"--poll-interval", b"0.5"), (b"--since", b"90s")], [(b"--to", b"2023-11-15T00:00:00+02:00")]]
_root = Path(tempfile.mkdtemp(prefix="kmon-fuzz-history-"))
atexit.register(shutil.rmtree, _root, True)
_FLAGS_DIR = _history_dir(_root / "flags")


def _flag(name: bytes | None) -> str:
    text = (name or b"").decode("utf-8", "replace")
    return text if text in _FLAGS else _FLAGS[sum(name or b"") % len(_FLAGS)]


def check_flags(case: Case) -> None:
    argv = ["history", "--dir", str(_FLAGS_DIR), "--json"]
    for name, value in case:
        argv += [_flag(name), (value or b"").decode("utf-8", "replace").replace("\0", "")]
    code, _, err = _run(argv)
    assert code in (0, 2), (code, err)
    if code == 2:
        lines = err.strip().splitlines()
        said = lines[-1] if lines else ""
        assert said.startswith("kmon history: ") and (len(lines) == 1 or "error:" in said), err


# ------------------------------------------------------------------ files

def _parquet(columns: dict[str, pa.Array]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def _file_seeds() -> list[Case]:
    good = (_history_dir(Path(tempfile.mkdtemp(dir=_root))) / "cluster=c1").rglob("*.parquet")
    valid = next(good).read_bytes()
    rows = {c: pa.array([getattr(t, c) for t in GOOD]) for c in Transition._fields if c != "cluster"}
    shapes = {
        "time as text": {**rows, "time_ms": pa.array(["1", "2", "3"])},
        "null time": {**rows, "time_ms": pa.array([None, 1, 2], pa.int64())},
        "no entity": {c: v for c, v in rows.items() if c != "entity"},
        "an extra column": {**rows, "extra": pa.array([1, 2, 3])},
        "no rows": {c: v.slice(0, 0) for c, v in rows.items()},
        "time past any calendar": {**rows, "time_ms": pa.array([2**62, 1, -2**62])},
        "a list": {**rows, "broker": pa.array([[1], [2], []])},
        "float time": {**rows, "time_ms": pa.array([1.5, float("nan"), 2.0])},
    }
    files = [valid, b"", valid[: len(valid) // 2], b"PAR1"] + [_parquet(c) for c in shapes.values()]
    return [((f,),) for f in files] + [tuple((f,) for f in files[:4])]


_FILES_DIR = _history_dir(_root / "files")
_DAY = _FILES_DIR / "cluster=c1" / "date=2023-11-14"


def check_files(case: Case) -> None:
    written = [_DAY / f"x-{i}.parquet" for i in range(len(case))]
    try:
        for path, (data,) in zip(written, case):
            path.write_bytes(data or b"")
        code, out, err = _run(["history", "--dir", str(_FILES_DIR), "--from", "0", "--json"])
    finally:
        for path in written:
            path.unlink()
    assert code == 0, (code, err)
    shown = [json.loads(line) for line in out.splitlines()]
    assert all(any(row.items() >= {"time_ms": t.time_ms, "broker": t.broker}.items() for row in shown)
               for t in GOOD), out
    assert len(err.splitlines()) <= len(case), err   # at most one line per file


TARGETS = (
    Target("flags", 2, lambda: [tuple(m) for m in _SEED_FLAGS], check_flags, max_messages=8),
    Target("files", 1, _file_seeds, check_files, max_messages=6, smoke_cases=1000),
)
