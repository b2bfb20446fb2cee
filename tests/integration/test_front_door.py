"""The README's main command, run as a user runs it: from the checkout, in a subprocess, exactly
as the README writes it. It once crashed on every fresh clone for three days while every other
test passed, because nothing ran it.

One `make run`: read the addresses it prints, see the cluster on /metrics, create a topic, kill
a broker, SIGKILL the stream app (as the OOM killer would) and see `kmon run` start it again with
no counter lower, bring the broker back with `kmon stack start`, Ctrl-C the process group and find
nothing left running. Then the same command again in the same checkout: the topic is there, the
counters went on, `kmon history` tells it; then `kmon run` itself SIGKILLed, and the command once
more: resumed again.

The stack goes to a directory of the test's own through KMON_DIR (the `--dir` flag's variable),
so a developer's own `make run` in this checkout is left alone.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from stack.state import StackState
from stack.owner import holder
from stack.process import cmdline, pid_alive
from tests.integration.user_runs import Run, addresses
from tests.support import eventually, metrics

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
TOPIC = "front-door"
CLUSTER = "local"   # kmon run's default --cluster


def readme_main_command() -> list[str]:
    """The first command of the README's "Two commands" block: the one that runs kmon."""
    block = (ROOT / "README.md").read_text().split("## Two commands", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    first = next(line for line in block.splitlines() if line.strip())
    return shlex.split(first.split("#", 1)[0])


def counters(port: str) -> dict[tuple[str, frozenset], float]:
    return {k: v for k, v in metrics(int(port)).items() if k[0].endswith("_total")}


def views_value(port: str, name: str, **labels: str) -> float | None:
    return metrics(int(port)).get((name, frozenset({"cluster": CLUSTER, **labels}.items())))


def none_lower(before: dict, now: dict) -> list[str]:
    """Counters of ``before`` missing from ``now`` or lower there."""
    return [f"{k[0]}{dict(k[1])}: {v} -> {now.get(k)}" for k, v in before.items() if now.get(k, -1) < v]


def nothing_left(directory: Path, pids: list[tuple[int, str]]) -> None:
    left = [f"pid {pid}" for pid, marker in pids if pid_alive(pid) and marker in cmdline(pid)]
    assert not left, f"still running after the stop: {left}"
    assert holder(directory) is None


def stack_pids(directory: Path) -> list[tuple[int, str]]:
    state = StackState.load(directory)
    assert state
    return [(c.pid, c.marker) for c in state.components.values()]


def test_the_readme_main_command_runs_twice_in_one_checkout_and_keeps_its_parts_alive(
        tmp_path: Path, runs: list[Run]) -> None:
    argv = readme_main_command()
    assert argv[0] in ("make", "kmon", ".venv/bin/kmon"), argv
    directory = tmp_path / "stack"
    env = {**os.environ, "KMON_DIR": str(directory)}

    # ---- the first run
    first = Run(argv, env, tmp_path / "run-1.log")
    runs.append(first)
    at = addresses(first)
    eventually(lambda: views_value(at["exporter"], "kmon_brokers") == 3, 180, "three brokers on /metrics")
    admin = AdminClient({"bootstrap.servers": at["bootstrap"]})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
    eventually(lambda: views_value(at["exporter"], "kmon_partitions", topic=TOPIC) == 3, 60, "the topic on /metrics")

    state = StackState.load(directory)
    assert state
    os.kill(state.components["broker-3"].pid, signal.SIGKILL)
    eventually(lambda: views_value(at["exporter"], "kmon_isr_shrinks_total", topic=TOPIC, broker="3") == 3, 90,
               "broker 3 out of the topic's three ISRs")
    eventually(lambda: views_value(at["exporter"], "kmon_under_replicated_partitions", topic=TOPIC) == 3, 30,
               "the topic's partitions under-replicated")
    before = counters(at["exporter"])
    assert before[("kmon_isr_shrinks_total", frozenset({"cluster": CLUSTER, "topic": TOPIC, "broker": "3"}.items()))]
    # the address the run printed for "what is wrong" says it too
    with urllib.request.urlopen(at["health"], timeout=30) as r:
        [health] = json.loads(r.read())["clusters"]
    assert health["brokers"]["down"] == [3] and health["partitions"]["under_replicated"] >= 3
    assert sorted(p["partition"] for p in health["problems"] if p.get("topic") == TOPIC) == [0, 1, 2]

    stream = state.components["stream"]
    os.kill(stream.pid, signal.SIGKILL)
    first.line(rf"stream \(pid {stream.pid}\) was killed by SIGKILL after \d+ s, not asked to stop; "
               r"starting it again in [\d.]+ s", 30)
    first.line(r"stream started again \(pid \d+\)", 60)
    eventually(lambda: views_value(at["exporter"], "kmon_brokers") == 2, 180, "the views back after the restart")
    assert none_lower(before, counters(at["exporter"])) == []

    # the killed broker brought back as a user would, from another terminal
    kmon = Path(sys.executable).with_name("kmon")   # the venv's script, which the README calls kmon
    started = subprocess.run([str(kmon), "stack", "start", "broker-3"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=180)
    assert started.returncode == 0 and started.stdout.startswith("broker-3 started"), started.stdout + started.stderr
    eventually(lambda: views_value(at["exporter"], "kmon_isr_expands_total", topic=TOPIC, broker="3") == 3
               and views_value(at["exporter"], "kmon_under_replicated_partitions", topic=TOPIC) == 0, 120,
               "broker 3 back in the topic's three ISRs")
    before = counters(at["exporter"])

    pids = stack_pids(directory)
    first.stop(signal.SIGINT)   # Ctrl-C
    # GNU make reports a run stopped by a signal as its own failure (2, or the signal itself)
    # whatever its child returns; kmon's own clean stop is this line, printed before it exits 0
    assert "stopped everything kmon run started" in first.said(), first.said()[-3000:]
    assert "Traceback" not in first.said()
    nothing_left(directory, pids)

    # ---- the same command again, in the same checkout: resumed
    second = Run(argv, env, tmp_path / "run-2.log")
    runs.append(second)
    again = addresses(second)
    second.line(r"resuming the stack in ", 5)
    assert again["exporter"] == at["exporter"] and again["prometheus"] == at["prometheus"]   # the same addresses
    eventually(lambda: views_value(again["exporter"], "kmon_partitions", topic=TOPIC) == 3, 180,
               "the topic of the first run on /metrics")
    eventually(lambda: views_value(again["exporter"], "kmon_brokers") == 3, 120, "the three brokers")
    assert none_lower(before, counters(again["exporter"])) == []

    def told() -> Counter[tuple[str, int]]:
        """What `kmon history` (the command the run printed) says happened to the topic, per kind and broker."""
        history = subprocess.run([*shlex.split(again["history"]), "--topic", TOPIC, "--json"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=60)
        assert history.returncode == 0, history.stderr
        return Counter((row["kind"], row.get("broker")) for row in map(json.loads, history.stdout.splitlines()))

    def agrees() -> bool:
        # the resync after the restart may also tell changes made while the monitor was stopped
        rows = told()
        return all(rows[(kind, 3)] >= 3 and rows[(kind, 3)] == views_value(
            again["exporter"], f"kmon_{kind}s_total", topic=TOPIC, broker="3") for kind in ("isr_shrink", "isr_expand"))
    eventually(agrees, 60, "kmon history tells broker 3's shrinks and expands, as many as the counters")

    # ---- kmon run itself SIGKILLed (the OOM killer): its processes die with it, and the next run
    # waits for the killed brokers' ZooKeeper sessions before starting them again
    pids = stack_pids(directory)
    owner = holder(directory)
    assert owner and owner.command == "kmon run"
    os.kill(owner.pid, signal.SIGKILL)
    second.proc.wait(60)
    eventually(lambda: nothing_left(directory, pids) is None, 30, "every process of the killed run gone")
    third = Run(argv, env, tmp_path / "run-3.log")
    runs.append(third)
    third_at = addresses(third)
    eventually(lambda: views_value(third_at["exporter"], "kmon_brokers") == 3
               and views_value(third_at["exporter"], "kmon_partitions", topic=TOPIC) == 3, 180,
               "the cluster and the topic after a SIGKILLed run")
    assert none_lower(before, counters(third_at["exporter"])) == []

    pids = stack_pids(directory)
    started = time.monotonic()
    third.stop(signal.SIGTERM)   # as a service manager stops it
    assert "stopped everything kmon run started" in third.said(), third.said()[-3000:]
    assert not any("Traceback" in run.said() for run in runs)
    nothing_left(directory, pids)
    assert time.monotonic() - started < 90
