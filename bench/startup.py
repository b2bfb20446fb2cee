"""What one monitored local stack costs in CPU, by part: to start (and settle for a while), then idle.
It is the fault scenarios' fixture (three brokers, kmon's events node, both collectors, the stream app
on a 0.5 s trigger, Prometheus and Alertmanager), and the test suite starts about a dozen of them on two
cores, so their CPU is what the suite's time is made of. Each JVM option set given goes to every JVM
the stack starts through JDK_JAVA_OPTIONS, as tests/conftest.py sets it; the sets run one after the
other in one run, to be compared as ratios. With a broker death, a follower broker is then SIGKILLed and the
CPU of the seconds after it counted by part: what kmon spends while a broker is down."""
from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable
from unittest.mock import patch

from bench.support.measure import cpu_seconds, descendants
from bench.support.parts import part
from cli.monitor import MonitorOptions, start_monitor
from kmon.toolchain import find_toolchain
from stack.local import LocalStack
from stack.state import StackRequest
from tests.support import quorum

def cpu_by_part(root: int, skip: int | None = None) -> Counter[str]:
    out: Counter[str] = Counter()
    for pid in descendants(root):
        if pid == skip:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if cmdline:   # not a zombie: an earlier stack's process, stopped and not yet waited for
                out[part(cmdline)] += cpu_seconds(pid)
        except OSError:   # exited meanwhile
            continue
    return out


def run(option_sets: list[str], kraft: bool, settle_s: float, idle_s: float, death_s: float,
        progress: Callable[[str], None]) -> list[dict]:
    rows = []
    for options in option_sets:
        with patch.dict(os.environ, {"JDK_JAVA_OPTIONS": options}), tempfile.TemporaryDirectory(prefix="kmon-bench-startup-") as tmp:
            stack = LocalStack(Path(tmp), find_toolchain(), die_with_parent=True)
            progress(f"JDK_JAVA_OPTIONS={options!r}: starting a monitored {'KRaft' if kraft else 'ZooKeeper'} stack")
            started = time.monotonic()
            try:
                stack.up(StackRequest(fast=True, kraft=kraft))
                start_monitor(stack, MonitorOptions(cluster="bench", trigger_seconds=0.5, groups_poll_seconds=2,
                                                    groups_lag_seconds=2))
                up_s = time.monotonic() - started
                time.sleep(settle_s)
                settled = cpu_by_part(os.getpid())
                progress(f"measuring {idle_s:g} s of idle")
                time.sleep(idle_s)
                idle = cpu_by_part(os.getpid()) - settled
                death = broker_death(stack, death_s, progress) if death_s else None
            finally:
                stack.down(timeout=10)
        rows.append({"JDK_JAVA_OPTIONS": options or "(none)", "up_s": up_s,
                     f"start+{settle_s:g}s_cpu_s": sum(settled.values()),
                     **{f"{p}_cpu_s": settled[p] for p in sorted(settled)},
                     "idle_cpu_cores": sum(idle.values()) / idle_s,
                     **{f"idle_{p}_cores": idle[p] / idle_s for p in sorted(idle)},
                     **({f"death+{death_s:g}s_cpu_s": sum(death.values()),
                         **{f"death_{p}_cpu_s": death[p] for p in ("collectors", "Kafka", "ZooKeeper")}}
                        if death is not None else {})})
    return rows


def broker_death(stack: LocalStack, seconds: float, progress: Callable[[str], None]) -> Counter[str]:
    """The CPU by part in the ``seconds`` after a follower broker is SIGKILLed (under KRaft, a node
    that does not lead the quorum)."""
    assert stack.state
    leader = quorum(stack).leader_id if stack.state.kraft else stack.controller_id()
    victim = next(b for b in stack.broker_ids() if b != leader)
    pid = stack.component(f"broker-{victim}").pid   # its CPU goes with it: left out of both counts
    before = cpu_by_part(os.getpid(), skip=pid)
    stack.kill_broker(victim)
    progress(f"broker {victim} SIGKILLed: measuring {seconds:g} s")
    time.sleep(seconds)
    return cpu_by_part(os.getpid(), skip=pid) - before
