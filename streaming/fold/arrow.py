"""The transitions a bucket's step makes, as Arrow: the executors build the columns (a Transition
is a tuple: rows to columns in one step) and send them in a binary column; the driver handles
a batch's rows without a Python object per row, and the history files have the same columns."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, get_type_hints

from kmon.history import COLUMNS, Transition

if TYPE_CHECKING:
    import pyarrow as pa

_HINTS = get_type_hints(Transition)
# column -> whether it is an int (an int64 in the files; Parquet readers need no guessing); the
# cluster is the directory's
INT_COLUMNS: dict[str, bool] = {c: int in getattr(_HINTS[c], "__args__", (_HINTS[c],)) for c in COLUMNS if c != "cluster"}
# pyarrow is imported where a table is made or read: the driver's modules import this one, and
# most kmon commands never touch a table


def arrow_schema(with_cluster: bool = False):
    import pyarrow as pa
    return pa.schema([(c, pa.int64() if INT_COLUMNS.get(c) else pa.string()) for c in COLUMNS if with_cluster or c != "cluster"])


def table(rows: Iterable[Transition]) -> pa.Table:
    """Transitions as the columns HistoryLog.append takes: the executors make them (Transition is
    a tuple: rows to columns in one step), and the driver handles a batch's rows without a
    Python object per row (a broker failure at 100k partitions makes ~460k)."""
    import pyarrow as pa
    schema = arrow_schema(with_cluster=True)
    columns = list(zip(*rows)) or [()] * len(schema)
    return pa.table([pa.array(values, f.type) for values, f in zip(columns, schema)], schema=schema)


def to_ipc(rows: pa.Table) -> bytes:
    """A table as Arrow's stream format, to travel in a binary column."""
    import pyarrow as pa
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    """Inverse of to_ipc; raises ValueError when ``data`` is not a table of transitions."""
    import pyarrow as pa
    try:
        rows = pa.ipc.open_stream(data).read_all()
    except pa.ArrowException as e:
        raise ValueError(f"not an Arrow stream of transitions: {e}") from None
    if rows.schema != arrow_schema(with_cluster=True):
        raise ValueError(f"not the columns of transitions: {rows.schema.names}")
    return rows
