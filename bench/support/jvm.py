"""A running JVM's heap, from the performance counters it publishes in hsperfdata (what jstat reads).

Read from the file, not by starting jstat: a soak samples every 10 s, and a JVM started for each
sample would cost the 2-core machine more than what it measures.
"""
from __future__ import annotations

import getpass
import struct
import tempfile
from pathlib import Path

_MAGIC = 0xCAFEC0C0
_LONG = ord("J")


def perf_counters(data: bytes) -> dict[str, int]:
    """The scalar long counters of an hsperfdata file (its header, then entries of name and value)."""
    if len(data) < 32 or struct.unpack_from(">I", data, 0)[0] != _MAGIC:
        raise ValueError("not an hsperfdata file")
    order = "<" if data[4] == 1 else ">"
    _used, _overflow, _modified, offset, count = struct.unpack_from(order + "iiqii", data, 8)
    out: dict[str, int] = {}
    for _ in range(count):
        length, name_at, vector, kind, _flags, _units, _variability, value_at = struct.unpack_from(
            order + "iiibbbbi", data, offset)
        if length <= 0:
            raise ValueError("an hsperfdata entry of no length")
        name = data[offset + name_at:data.index(b"\0", offset + name_at)].decode("ascii", "replace")
        if vector == 0 and kind == _LONG:
            out[name] = struct.unpack_from(order + "q", data, offset + value_at)[0]
        offset += length
    return out


def heap_committed_mb(pid: int, directory: Path | None = None) -> float | None:
    """The heap ``pid`` has committed (young and old generations), in MB; None if it is no JVM
    publishing counters (or it just ended)."""
    where = directory or Path(tempfile.gettempdir()) / f"hsperfdata_{getpass.getuser()}"
    try:
        counters = perf_counters((where / str(pid)).read_bytes())
    except (OSError, ValueError, struct.error):
        return None
    young, old = counters.get("sun.gc.generation.0.capacity"), counters.get("sun.gc.generation.1.capacity")
    return None if young is None or old is None else (young + old) / 2**20
