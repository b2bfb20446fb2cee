"""A running JVM's heap and code cache: the heap committed, from the performance counters it publishes
in hsperfdata (what jstat reads), and how much of each is resident, from the kernel's map of its memory.

Read from files, not by starting jstat or jcmd: a soak samples every 10 s, and a JVM started for each
sample would cost the 2-core machine more than what it measures. Only where the heap and the JIT's
code cache lie is asked of jcmd, once per JVM: a reservation does not move.

Committed is not resident: G1 commits regions and the kernel maps their pages only when first written,
so a JVM's resident memory grows toward its committed heap for as long as the collector keeps
reaching regions it has not used yet (in the stream app, ~130 of 390 MB committed still untouched
a minute after start). Its code cache fills the same way as the JIT compiles, for tens of minutes.
"""
from __future__ import annotations

import getpass
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass
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


Span = tuple[int, int]   # addresses, the end excluded
_HEAP_SPAN = re.compile(r"^ \S.* heap +total .*\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)", re.MULTILINE)
_CODE_HEAP_BOUNDS = re.compile(r"^ bounds \[(0x[0-9a-f]+), 0x[0-9a-f]+, (0x[0-9a-f]+)\]", re.MULTILINE)
_MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) ", re.MULTILINE)


@dataclass(frozen=True)
class Reserved:
    """Where a JVM reserved its heap and its JIT's code cache: both sized at its start (the heap up to
    -Xmx, the code cache ReservedCodeCacheSize, 240 MB), and made resident page by page as written."""
    heap: Span | None
    code: Span | None


def reserved(jcmd: str, pid: int) -> Reserved:
    """Asked of jcmd once per JVM (a reservation does not move); a span is None where it did not say."""
    return Reserved(parse_heap_span(_ask(jcmd, pid, "GC.heap_info")),
                    parse_code_span(_ask(jcmd, pid, "Compiler.codecache")))


def _ask(jcmd: str, pid: int, command: str) -> str:
    try:
        return subprocess.run([jcmd, str(pid), command], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def parse_heap_span(said: str) -> Span | None:
    """Pure: the heap's reservation from what `jcmd GC.heap_info` says."""
    m = _HEAP_SPAN.search(said)
    return (int(m.group(1), 16), int(m.group(2), 16)) if m else None


def parse_code_span(said: str) -> Span | None:
    """Pure: the code cache's reservation from what `jcmd Compiler.codecache` says: its code heaps
    (profiled, non-profiled, non-nmethods) divide one reservation, each with its bounds."""
    bounds = [(int(low, 16), int(high, 16)) for low, high in _CODE_HEAP_BOUNDS.findall(said)]
    return (min(low for low, _ in bounds), max(high for _, high in bounds)) if bounds else None


def resident_mb(pid: int, spans: list[Span]) -> list[float] | None:
    """How much of each span of ``pid``'s memory is resident, in MB; None if it just ended."""
    try:
        smaps = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return None
    return [resident_within(smaps, span) for span in spans]


def resident_within(smaps: str, span: Span) -> float:
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
