"""Where a command's CPU goes, by process kind: the test suite (`make test`, the default) run while every
process on the machine is sampled from /proc every few seconds, its CPU counted by what its command line
names (bench/support/parts.py). A process's last sample counts: up
to one interval of a process that ends is lost, so the figures are a lower bound. The stacks' processes run
in sessions of their own, which `time` does not count."""
from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from bench.support.parts import kind

TICK = os.sysconf("SC_CLK_TCK")


def run(argv: list[str], every_s: float, progress: Callable[[str], None]) -> list[dict]:
    progress(f"running {' '.join(argv)}, sampling every {every_s:g} s")
    before = {key: seconds for key, seconds in _processes()}   # what ran already: only its CPU from now counts
    seen: dict[tuple[str, str], tuple[str, float]] = {}        # (pid, start time) -> kind, CPU seconds since
    first, started = _machine(), time.monotonic()
    proc = subprocess.Popen(argv)
    while True:
        for key, seconds in _processes():
            if key not in seen:
                try:
                    cmdline = Path(f"/proc/{key[0]}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:   # ended meanwhile
                    cmdline = ""
                seen[key] = (kind(cmdline) if cmdline else "kernel threads", 0.0)
            seen[key] = (seen[key][0], seconds - before.get(key, 0.0))
        if proc.poll() is not None:
            break
        time.sleep(every_s)
    last, wall = _machine(), time.monotonic() - started
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for name, seconds in seen.values():
        if seconds > 0:
            cpu[name] += seconds
            count[name] += 1
    busy = 1 - (last[1] - first[1]) / max(1, last[0] - first[0])
    progress(f"exit {proc.returncode} after {wall:.0f} s; the machine busy {busy:.0%} of it")
    return [{"kind": name, "processes": count[name], "cpu_s": round(seconds, 1)} for name, seconds in cpu.most_common()]


def _processes() -> list[tuple[tuple[str, str], float]]:
    """(pid, start time) and CPU seconds of every process now."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:   # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out.append(((pid, fields[19]), (int(fields[11]) + int(fields[12])) / TICK))
    return out


def _machine() -> tuple[int, int]:
    """All and idle (idle, iowait) jiffies of the machine so far."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return sum(values), values[3] + values[4]
