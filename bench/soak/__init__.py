"""`python -m bench soak`: an hour of mixed faults on a local cluster under load, then kmon's history
and views held up against an independent oracle (bench/oracle: the cluster's own durable record).

The stack runs fast failure detection (as `kmon run --fast`), ZooKeeper mode or KRaft, with nothing
purged from what the oracle reads: ZooKeeper keeps its transaction log (no autopurge), the KRaft nodes
keep their whole metadata log. kmon runs as `kmon run` starts it (its collectors, the stream app), a
steady load produces and consumes (load.py), and every 20 to 40 s a seeded fault (chaos.py) hits a
broker, the controller, ZooKeeper, a kmon part, kmon's events node, topics, reassignments, elections or
the groups. Then everything is brought back, left to settle, and judged (verdict.py): every oracle
transition in kmon's history once (or, in ZooKeeper mode, one of the updates ZooKeeper coalesced into
one notification, as many as kmon says it skipped), nothing more; each counter equal to its rows; the
views equal to the cluster's state; memory flat; no kmon process restarted but by the soak; no
traceback in any log.
"""
from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.soak.chaos import LOAD_TOPICS, Chaos
from bench.soak.memory import MemorySampler
from bench.soak.verdict import Verdict, judge
from bench.support.load import Load
from cli.monitor import MonitorOptions, start_monitor
from kmon.toolchain import find_toolchain
from stack import configs
from stack.local import LocalStack
from stack.state import StackRequest
from tests.support import create_topic

CLUSTER = "soak"
FAULT_EVERY_S = (20.0, 40.0)
# nothing the oracle reads is cleaned away: the fast profile's metadata log retention is 5 s
KRAFT_KEEP_ALL = {"metadata.max.retention.ms": str(7 * 24 * 3600 * 1000), "metadata.log.segment.ms": "3600000"}


@dataclass(frozen=True)
class SoakRequest:
    minutes: float
    kraft: bool = False
    seed: int = 1
    workdir: Path | None = None
    fault_every_s: tuple[float, float] = FAULT_EVERY_S   # the pause between two faults, drawn between these


def run(req: SoakRequest, progress: Callable[[str], None]) -> Verdict:
    toolchain = find_toolchain()
    workdir = req.workdir or Path(f"/tmp/kmon-soak-{'kraft' if req.kraft else 'zk'}-{req.seed}")
    stack = LocalStack(workdir / "stack", toolchain, die_with_parent=True)
    fast = configs.KraftProfile.fast()
    kraft_profile = dataclasses.replace(fast, extra_props={**fast.extra_props, **KRAFT_KEEP_ALL})
    progress(f"stack in {stack.dir} ({'KRaft' if req.kraft else 'ZooKeeper mode'}), seed {req.seed}")
    stack.up(StackRequest(brokers=3, fast=True, prometheus=False, kraft=req.kraft,
                          kraft_profile=kraft_profile if req.kraft else None), fresh=True)
    try:
        # every partition's leader and ISR exported, for the verdict to compare with the cluster's
        start_monitor(stack, MonitorOptions(cluster=CLUSTER, trigger_seconds=0.5, groups_poll_seconds=5,
                                            partition_detail="all"))
        for topic in LOAD_TOPICS:
            create_topic(stack, topic, partitions=6, rf=3)
        assert stack.state
        groups = {"soak-classic": "classic", **({"soak-consumer": "consumer"} if req.kraft else {})}
        load = Load(stack.state.bootstrap_servers, groups, LOAD_TOPICS)
        load.start()
        memory = MemorySampler(stack, record=workdir / "memory.jsonl")
        memory.start()
        chaos = Chaos(stack, load, random.Random(req.seed), progress)
        unexpected: list[str] = []
        began = time.time()
        boundary = _position(stack)
        progress(f"faults for {req.minutes:g} min from position {boundary}")
        while time.time() - began < req.minutes * 60:
            before = _kmon_pids(stack)
            chaos.one()
            unexpected += _unexpected(stack, before, chaos.restarted)
            time.sleep(chaos.rng.uniform(*req.fault_every_s))
        unexpected += _unexpected(stack, _kmon_pids(stack), set())
        load.stop()
        memory.stop()
        progress(f"faults done ({sum(chaos.injected.values())}); settling")
        return judge(stack, CLUSTER, req.minutes, boundary, chaos, memory, unexpected, progress)
    finally:
        stack.down(timeout=10)


def _kmon_pids(stack: LocalStack) -> dict[str, int]:
    assert stack.state
    return {n: c.pid for n, c in stack.state.components.items() if n.startswith(("collector-", "stream"))}


def _unexpected(stack: LocalStack, before: dict[str, int], restarted: set[str]) -> list[str]:
    """kmon's parts that died, or came back with another pid, but not by the fault's hand; each is
    started again so the soak goes on (and is said in the verdict)."""
    out = []
    for name, pid in _kmon_pids(stack).items():
        c = stack.component(name)
        if not c.alive():
            out.append(f"{name} (pid {pid}) died")
            stack.start(name, timeout=180)
        elif pid != before.get(name) and name not in restarted:
            out.append(f"{name} restarted (pid {before.get(name)} -> {pid})")
    return out


def _position(stack: LocalStack) -> int:
    """The source's position now: ZooKeeper's last zxid, or the metadata log's high watermark."""
    assert stack.state
    if stack.state.kraft:
        from tests.support import quorum
        return quorum(stack).high_watermark
    from stack.probes import four_letter
    said = four_letter(stack.component("zookeeper").port, "srvr")
    return int(next(line for line in said.splitlines() if line.startswith("Zxid:")).split()[1], 16)
