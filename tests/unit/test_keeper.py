"""`kmon run` keeps its own parts alive (stack/keeper.py), on real processes: a part that
dies unasked is started again after its pause, with one line saying how it ended; the monitored
cluster's brokers and ZooKeeper stay as a user's fault left them."""
from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Iterator

import pytest

from kmon.restarts import FIRST_PAUSE_S
from stack.keeper import Keeper, kept, request_start
from stack.local import LocalStack
from stack.state import Component, StackState
from stack.process import pid_alive
from tests.unit.fakes import Clock

SLEEPER = "import sys, time; time.sleep(60)"



def _part(tmp_path: Path, name: str, code: str = SLEEPER) -> Component:
    marker = f"kmon-keeper-test-{name}"   # in the command line, so stop() knows its own process
    return Component(name, 0, [sys.executable, "-c", code, marker], str(tmp_path / f"{name}.log"), marker)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    stack = LocalStack(tmp_path, toolchain=None, die_with_parent=True)  # type: ignore[arg-type]
    stack.state = StackState(dir=tmp_path, chroot="", brokers=1, fast=True, stream_port=0, collector_ports={},
                             components={n: _part(tmp_path, n) for n in ("stream", "broker-1", "zookeeper")})
    try:
        for name in stack.state.components:
            stack.respawn(name)
        yield stack
    finally:
        stack.down(timeout=5)


def test_what_run_keeps_alive_is_its_own_parts_not_the_monitored_cluster() -> None:
    assert all(kept(n) for n in ("stream", "collector-zk", "collector-groups", "prometheus", "alertmanager",
                                 "events"))
    assert not any(kept(n) for n in ("zookeeper", "broker-1", "broker-12"))


def test_a_killed_part_is_started_again_after_its_pause_and_says_how_it_ended(
        stack: LocalStack, caplog: pytest.LogCaptureFixture) -> None:
    assert stack.state
    clock = Clock()
    keeper = Keeper(stack, clock)
    stream, broker, zookeeper = (stack.state.components[n] for n in ("stream", "broker-1", "zookeeper"))
    keeper.check()
    killed = stream.pid
    for c in (stream, broker, zookeeper):
        stack.kill(c.name, signal.SIGKILL)
    with caplog.at_level(logging.INFO, logger="kmon.run"):
        clock.now += 5
        assert keeper.check() == []   # seen dead; its pause has not passed
        clock.now += FIRST_PAUSE_S
        assert keeper.check() == ["stream"]
    assert stream.pid != killed and stream.alive()
    assert not broker.alive() and not zookeeper.alive()
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == (f"stream (pid {killed}) was killed by SIGKILL after 5 s, not asked to stop; starting it "
                       f"again in {FIRST_PAUSE_S:g} s (log: {stream.log})")
    assert said[1] == f"stream started again (pid {stream.pid})"
    assert not any("broker" in s or "zookeeper" in s for s in said)


def test_a_part_that_keeps_dying_young_waits_longer_each_time(stack: LocalStack, tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    assert stack.state
    clock = Clock()
    keeper = Keeper(stack, clock)
    crashing = stack.state.components["collector-zk"] = _part(tmp_path, "collector-zk", "raise SystemExit(3)")
    stack.respawn("collector-zk")
    pauses = []
    with caplog.at_level(logging.INFO, logger="kmon.run"):
        for _ in range(4):
            while crashing.alive():   # it exits at once with status 3
                pass
            caplog.clear()
            keeper.check()
            [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("collector-zk (pid")]
            assert "exited with status 3" in line
            pauses.append(float(line.split("starting it again in ")[1].split(" s")[0]))
            clock.now += pauses[-1]
            assert keeper.check() == ["collector-zk"]
    assert pauses == [FIRST_PAUSE_S, 2 * FIRST_PAUSE_S, 4 * FIRST_PAUSE_S, 8 * FIRST_PAUSE_S]


def test_a_part_stopped_by_the_stack_is_not_restarted_once_gone_from_it(stack: LocalStack) -> None:
    assert stack.state
    keeper = Keeper(stack, Clock())
    pid = stack.state.components["stream"].pid
    stack.remove("stream")
    assert keeper.check() == [] and not pid_alive(pid)


def test_a_start_the_user_asked_for_is_carried_out_once(stack: LocalStack, caplog: pytest.LogCaptureFixture) -> None:
    """`kmon stack start zookeeper` under `kmon run`: a part the keeper does not restart by itself
    is started when asked, and the request is gone once carried out."""
    assert stack.state
    keeper = Keeper(stack, Clock())
    zookeeper = stack.state.components["zookeeper"]
    stack.kill("zookeeper", signal.SIGKILL)
    assert keeper.check() == []   # not kept: the user's to fault
    request_start(stack.dir, "zookeeper")
    request_start(stack.dir, "stream")   # running: said, nothing done
    with caplog.at_level(logging.INFO, logger="kmon.run"):
        assert keeper.check() == ["zookeeper"]
    assert zookeeper.alive() and keeper.check() == []
    assert "stream: asked to start it, but it is running" in caplog.text
    assert not any((stack.dir / "requests").iterdir())
