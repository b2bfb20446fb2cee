"""What every bench needs: waiting, percentiles, a process's memory, a /metrics sum."""
from __future__ import annotations

import os
import time
import urllib.request
from typing import Callable

from prometheus_client.parser import text_string_to_metric_families


def wait(done: Callable[[], bool], timeout: float, what: str, interval: float = 0.05,
         retry_on: tuple[type[Exception], ...] = ()) -> float:
    """Seconds until ``done()``; TimeoutError names ``what`` after ``timeout``. An exception of
    ``retry_on`` raised by ``done`` counts as not yet (a cluster in the middle of a failover), and
    the last one is named if time runs out."""
    started = time.perf_counter()
    last: Exception | None = None
    while True:
        try:
            if done():
                return time.perf_counter() - started
        except retry_on as e:
            last = e
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"{what} not done after {timeout}s" + (f" (last: {last!r})" if last else ""))
        time.sleep(interval)


def percentile(xs: list[float], q: float) -> float:
    """Nearest-rank percentile (with few samples, p99 is the maximum)."""
    ordered = sorted(xs)
    return ordered[max(0, min(len(ordered), int(round(q * len(ordered)))) - 1)]


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of ``pid`` in MB; field "VmHWM" gives its peak."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"/proc/{pid}/status has no {field}")


def descendants(pid: int) -> list[int]:
    """Processes under ``pid`` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except OSError:   # gone meanwhile
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def command(pid: int) -> str:
    return open(f"/proc/{pid}/cmdline").read().replace("\0", " ")


def _samples(port: int, name: str, labels: dict[str, str]) -> list[float]:
    """Values of the samples of ``name`` on 127.0.0.1:port/metrics whose labels include ``labels``."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
    return [s.value for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name == name and labels.items() <= s.labels.items()]


def metric_sum(port: int, name: str, **labels: str) -> float:
    return sum(_samples(port, name, labels))


def metric_count(port: int, name: str, **labels: str) -> int:
    """How many series of ``name`` there are."""
    return len(_samples(port, name, labels))


def cpu_seconds(pid: int, reaped: bool = False) -> float:
    """User + system CPU time ``pid`` has used so far; ``reaped`` adds that of its children
    that exited and that it waited for."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    used = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return used / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and the processes under it (`kmon collect` runs its collector in a child),
    those that exited included: a short-lived child (Spark's Python workers) passes its time on
    to the parent that reaps it, so the sum never drops when one ends."""
    total = 0.0
    for p in [pid, *descendants(pid)]:
        try:
            total += cpu_seconds(p, reaped=True)
        except OSError:   # ended since the listing: its parent has its time now
            continue
    return total


def tree_rss_mb(pid: int, field: str = "VmRSS") -> float:
    total = 0.0
    for p in [pid, *descendants(pid)]:
        try:
            total += rss_mb(p, field)
        except (OSError, ValueError):   # ended since the listing, or a zombie (no memory left)
            continue
    return total
