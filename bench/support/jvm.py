"""A running JVM's heap: what it has committed, from the performance counters it publishes in
hsperfdata (what jstat reads), and how much of it is resident, from the kernel's map of its memory.

Read from files, not by starting jstat or jcmd: a soak samples every 10 s, and a JVM started for each
sample would cost the 2-core machine more than what it measures. Only where the heap lies is asked of
jcmd, once per JVM: a reservation does not move.

Committed is not resident: G1 commits regions and the kernel maps their pages only when first written,
so a JVM's resident memory grows toward its committed heap for as long as the collector keeps
reaching regions it has not used yet (in the stream app, ~130 of 390 MB committed still untouched
a minute after start).
"""
from __future__ import annotations

import getpass
import re
import struct
import subprocess
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


_HEAP_SPAN = re.compile(r"^ \S.* heap +total .*\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)", re.MULTILINE)
_MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) ", re.MULTILINE)


def heap_span(jcmd: str, pid: int) -> tuple[int, int] | None:
    """The addresses ``pid`` reserved for its heap (the end excluded); None if it is no JVM that answers."""
    try:
        said = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_heap_span(said)


def parse_heap_span(said: str) -> tuple[int, int] | None:
    """Pure: the heap's reservation from what `jcmd GC.heap_info` says."""
    m = _HEAP_SPAN.search(said)
    return (int(m.group(1), 16), int(m.group(2), 16)) if m else None


def heap_resident_mb(pid: int, span: tuple[int, int]) -> float | None:
    """How much of ``pid``'s heap is resident, in MB; None if it just ended."""
    try:
        return resident_within(Path(f"/proc/{pid}/smaps").read_text(), span)
    except OSError:
        return None


def resident_within(smaps: str, span: tuple[int, int]) -> float:
    """Pure: the resident MB of the mappings in ``smaps`` (the kernel's /proc/PID/smaps) that lie within ``span``."""
    kb, inside = 0, False
    for line in smaps.splitlines():
        if m := _MAPPING.match(line):
            inside = span[0] <= int(m.group(1), 16) and int(m.group(2), 16) <= span[1]
        elif inside and line.startswith("Rss:"):
            kb += int(line.split()[1])
    return kb / 1024


def jcmd_beside(java: str) -> str:
    """The JDK's jcmd beside its ``java`` (Debian's /usr/bin/java is a link into the JDK)."""
    jcmd = Path(java).resolve().parent / "jcmd"
    return str(jcmd) if jcmd.exists() else "jcmd"
