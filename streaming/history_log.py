"""The transition history on disk: Parquet files any Parquet reader can query.

Layout (Hive partitioning, as Spark SQL, pandas/pyarrow and DuckDB discover it)::

    <dir>/cluster=<cluster>/date=<YYYY-MM-DD>/<writer>-<batch id>.parquet

one file per micro-batch that had transitions of that cluster on that (UTC) day, its rows
in order (kmon.history.ORDER); the cluster and the date are the directories', not
columns in the files. ``writer`` names the checkpoint whose batch ids these are: a batch
that Spark runs again after a restart rewrites its own file with the same rows, so a
transition is written once; a new checkpoint starts its batch ids again under a new name.
Whole days older than the retention are deleted.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
import urllib.parse
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from kmon.history import ORDER, Transition
from streaming.fold.arrow import INT_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("kmon.history")
# pyarrow is imported where a file is written or read: every kmon command imports this module
# (through kmon stream's flags), and most of them never touch a file

def writer_id(checkpoint: Path) -> str:
    """The name of a checkpoint's batch-id sequence, made once and kept in it."""
    path = checkpoint / "history-writer"
    if not path.exists():
        checkpoint.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(uuid.uuid4().hex[:12] + "\n")
        os.replace(tmp, path)
    return path.read_text().strip()


DAY_MS = 86_400_000
# the times a day can be named for, and printed: datetime's years 1 to 9999, in ms since the epoch
EARLIEST_MS = int(datetime(1, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
LATEST_MS = int(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=timezone.utc).timestamp() * 1000)
# columns every row has (Transition's fields without a default)
_REQUIRED = ("time_ms", "kind", "entity")


def _day(ms: int) -> date:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).date()


def _cluster_dir(directory: Path, cluster: str) -> Path:
    return directory / f"cluster={urllib.parse.quote(cluster, safe='')}"


@dataclass(frozen=True)
class Written:
    rows: dict[str, int]   # cluster -> rows written
    lost: dict[str, int]   # cluster -> rows that could not be written (logged)


class HistoryLog:
    def __init__(self, directory: Path, writer: str, retention_days: int,
                 clock: Callable[[], float] = time.time):
        self.dir = directory
        self._writer = writer
        self._retention = timedelta(days=retention_days)
        self._clock = clock
        self._pruned: date | None = None
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prune()

    def append(self, batch_id: int, tables: Iterable[pa.Table]) -> Written:
        """Write one batch's transitions, tables of :func:`table`; a file that cannot be written
        costs its rows only (counted and logged), never the views."""
        import pyarrow as pa
        import pyarrow.compute as pc
        written: defaultdict[str, int] = defaultdict(int)
        lost: defaultdict[str, int] = defaultdict(int)
        tables = [t for t in tables if t.num_rows]
        rows = pa.concat_tables(tables) if tables else None
        if rows is not None:   # one file per cluster and UTC day (whole days since the epoch)
            rows = rows.append_column("day", pc.divide(rows["time_ms"], DAY_MS))
            for key in rows.group_by(["cluster", "day"]).aggregate([]).to_pylist():
                cluster, day = key["cluster"], _day(key["day"] * DAY_MS)
                part = rows.filter((pc.field("cluster") == cluster) & (pc.field("day") == key["day"]))
                path = _cluster_dir(self.dir, cluster) / f"date={day.isoformat()}" / f"{self._writer}-{batch_id:012d}.parquet"
                try:
                    _write(path, part)
                    written[cluster] += part.num_rows
                except OSError as e:
                    lost[cluster] += part.num_rows
                    log.error("could not write %d transition(s) of %s to the history at %s: %s", part.num_rows,
                              cluster, path, e)
        if _day(int(self._clock() * 1000)) != self._pruned:
            self.prune()
        return Written(dict(written), dict(lost))

    def prune(self) -> None:
        """Delete the days that ended before the retention began."""
        today = _day(int(self._clock() * 1000))
        oldest = today - self._retention
        for day_dir in self.dir.glob("cluster=*/date=*"):
            day = _parse_day(day_dir.name.removeprefix("date="))
            if day is not None and day < oldest:
                shutil.rmtree(day_dir, ignore_errors=True)
                log.info("history: deleted %s (older than %d days)", day_dir, self._retention.days)
        self._pruned = today


def _write(path: Path, rows: pa.Table) -> None:
    """The rows in order (kmon.history.ORDER); raises OSError, also for what pyarrow raises."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        rows = rows.select(list(INT_COLUMNS))
        order = pc.sort_indices(rows, [(c, "ascending") for c in ORDER], null_placement="at_start")
        pq.write_table(rows.take(order), tmp)
    except pa.ArrowException as e:
        raise OSError(str(e)) from e
    os.replace(tmp, path)   # a reader never sees half a file


def _parse_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


# ---------------------------------------------------------------- reading

@dataclass(frozen=True)
class HistoryFile:
    path: Path
    cluster: str
    day: date
    mtime_ns: int


def files(directory: Path, since_ms: int | None = None, until_ms: int | None = None) -> list[HistoryFile]:
    """The history's files of the days that overlap [since, until]."""
    first = _day(since_ms) if since_ms is not None else None
    last = _day(until_ms) if until_ms is not None else None
    out = []
    for cluster_dir in directory.glob("cluster=*"):
        cluster = urllib.parse.unquote(cluster_dir.name.removeprefix("cluster="))
        for day_dir in cluster_dir.glob("date=*"):
            day = _parse_day(day_dir.name.removeprefix("date="))
            if day is None or (first and day < first) or (last and day > last):
                continue
            for path in day_dir.glob("*.parquet"):
                try:
                    out.append(HistoryFile(path, cluster, day, path.stat().st_mtime_ns))
                except FileNotFoundError:   # pruned meanwhile
                    continue
    return out


def read(file: HistoryFile) -> Iterator[Transition]:
    """The rows of one file; raises ValueError naming it (one line) when it is not a history file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:   # not pq.read_table: it imports pyarrow.dataset, and pandas with it, at each `kmon history`
        table = pq.ParquetFile(file.path).read()
    except (OSError, pa.ArrowException) as e:
        raise ValueError(f"{file.path}: not a readable Parquet file ({' '.join(str(e).split())})") from None
    problem = _not_history(table)
    if problem:
        raise ValueError(f"{file.path}: not a kmon history file ({problem})")
    for row in table.select(list(INT_COLUMNS)).to_pylist():
        yield Transition(cluster=file.cluster, **row)


def _not_history(table: pa.Table) -> str | None:
    """What makes a table no history file: the columns, their types and values as _write writes them
    (another writer's rows would break the sort, the filters or the printing of a time)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    missing = [c for c in INT_COLUMNS if c not in table.column_names]
    if missing:
        return f"no column {', '.join(missing)}"
    for column, is_int in INT_COLUMNS.items():
        kind = table.schema.field(column).type
        if kind != (pa.int64() if is_int else pa.string()):
            return f"column {column} holds {kind}"
    nulls = [c for c in _REQUIRED if table[c].null_count]
    if nulls:
        return f"null {', '.join(nulls)}"
    times = pc.min_max(table["time_ms"])
    if table.num_rows and not EARLIEST_MS <= times["min"].as_py() <= times["max"].as_py() <= LATEST_MS:
        return "a time past the years 1 to 9999"
    return None
