"""Where a command's CPU goes, by process kind and, for the test suite (`make test`, the default), by
integration group: the command runs while every process on the machine is sampled from /proc every few
seconds, its CPU counted by what its command line names (bench/support/parts.py). A process's last sample
counts: up to one interval of a process that ends is lost, so the figures are a lower bound. The stacks'
processes run in sessions of their own, which `time` does not count.

By group: each process an xdist worker starts inherits PYTEST_XDIST_WORKER; each sample's CPU of a worker's
processes (and of the worker itself) is charged to the test that worker ran then (bench/support/
pytest_timeline.py, a plugin loaded through PYTEST_ADDOPTS), and the test to its group as tests/conftest.py
groups them: a module of tests/integration, the kraft/ package, or the unit and fuzz tests."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable

from bench.support.parts import kind
from bench.support.pytest_timeline import TIMELINE_ENV

TICK = os.sysconf("SC_CLK_TCK")


def run(argv: list[str], every_s: float, progress: Callable[[str], None]) -> list[dict]:
    progress(f"running {' '.join(argv)}, sampling every {every_s:g} s")
    with tempfile.TemporaryDirectory(prefix="kmon-suite-cpu-") as scratch:
        timeline = Path(scratch) / "timeline"
        # pytest finds the plugin from the checkout it runs in; a PYTHONPATH would reach every process the
        # tests start (the wheel's tests then ran the checkout's code instead of the wheel's)
        env = {**os.environ, TIMELINE_ENV: str(timeline),
               "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} -p bench.support.pytest_timeline".strip()}
        seen, samples = _sample(argv, env, every_s, progress)
        tests = _timeline(Path(scratch))
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for name, _, seconds in seen.values():
        if seconds > 0:
            cpu[name] += seconds
            count[name] += 1
    rows = [{"group": "(all)", "wall_s": "", "kind": name, "processes": count[name], "cpu_s": round(seconds, 1)}
            for name, seconds in cpu.most_common()]
    return rows + _by_group(tests, samples, every_s)


Sample = tuple[float, str, str, float]   # when, worker, kind, CPU seconds since the sample before


def _sample(argv: list[str], env: dict[str, str], every_s: float, progress: Callable[[str], None]
            ) -> tuple[dict[tuple[str, str], tuple[str, str, float]], list[Sample]]:
    before = {key: seconds for key, seconds in _processes()}   # what ran already: only its CPU from now counts
    seen: dict[tuple[str, str], tuple[str, str, float]] = {}   # (pid, start time) -> kind, worker, CPU since
    samples: list[Sample] = []
    first, started = _machine(), time.monotonic()
    proc = subprocess.Popen(argv, env=env)
    while True:
        now = time.time()
        for key, seconds in _processes():
            if key not in seen:
                seen[key] = (*_kind_and_worker(key[0]), 0.0)
            name, worker, counted = seen[key]
            spent = seconds - before.get(key, 0.0)
            if spent > counted:
                samples.append((now, worker or f"pid {key[0]}", name, spent - counted))
            seen[key] = (name, worker, spent)
        if proc.poll() is not None:
            break
        time.sleep(every_s)
    last, wall = _machine(), time.monotonic() - started
    busy = 1 - (last[1] - first[1]) / max(1, last[0] - first[0])
    progress(f"exit {proc.returncode} after {wall:.0f} s; the machine busy {busy:.0%} of it")
    return seen, samples


def _kind_and_worker(pid: str) -> tuple[str, str]:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:   # ended meanwhile
        return "kernel threads", ""
    worker = next((v.split(b"=", 1)[1].decode() for v in environ if v.startswith(b"PYTEST_XDIST_WORKER=")), "")
    return (kind(cmdline) if cmdline else "kernel threads"), worker


def _timeline(directory: Path) -> dict[str, list[tuple[float, float, str]]]:
    """Worker (and the worker's own pid, whose environment does not name it) -> (start, end, nodeid) of each test."""
    tests: defaultdict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for path in directory.glob("timeline.*"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            for who in (row["worker"], f"pid {row['pid']}"):
                tests[who].append((row["start"], row["end"], row["test"]))
    return tests


def group_of(nodeid: str) -> str:
    """As tests/conftest.py groups the tests (bench/ does not import tests/)."""
    path = nodeid.split("::", 1)[0].split("/")
    return "/".join(path[:3]) if path[:2] == ["tests", "integration"] else "unit and fuzz tests"


def _by_group(tests: dict[str, list[tuple[float, float, str]]], samples: list[Sample], every_s: float) -> list[dict]:
    """Each integration group's wall time (its tests' summed) and the CPU charged to it, most first, with its
    three costliest kinds of process."""
    wall: Counter[str] = Counter()
    for who, spans in tests.items():
        if not who.startswith("pid "):
            for start, end, test in spans:
                wall[group_of(test)] += end - start
    cpu: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for when, worker, name, seconds in samples:
        middle = when - every_s / 2   # the sample's CPU was spent in the interval before it
        test = next((t for start, end, t in tests.get(worker, ()) if start <= middle <= end), None)
        if test is not None:
            cpu[group_of(test)][name] += seconds
    return [{"group": group, "wall_s": round(wall[group]), "kind": ", ".join(f"{k} {v:.0f}" for k, v in
                                                                             kinds.most_common(3)),
             "processes": "", "cpu_s": round(sum(kinds.values()), 1)}
            for group, kinds in sorted(cpu.items(), key=lambda g: -sum(g[1].values()))]


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
