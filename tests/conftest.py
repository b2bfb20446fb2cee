"""Fixtures: real local stacks (ZooKeeper + Kafka brokers, or KRaft nodes), always torn down."""
from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from cli.monitor import MonitorOptions, start_monitor
from kmon.toolchain import Toolchain, find_toolchain
from stack.local import LocalStack
from stack.state import StackRequest
from stack.process import PORT_SLICE_ENV


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    return find_toolchain()


def pytest_configure(config: pytest.Config) -> None:
    # pytest skips fixture teardown when it is terminated (a CI timeout, `timeout`); as an
    # interrupt it runs it, and the stacks' processes are stopped instead of leaked.
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupt)
    # each xdist worker and the processes it starts pick ports of their own
    worker, workers = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if worker and workers:
        restarts = int(config.getoption("maxworkerrestart") or 0)
        os.environ.setdefault(PORT_SLICE_ENV, port_slice_of(int(worker.removeprefix("gw")), int(workers), restarts))
    # Every JVM the suite starts (brokers, ZooKeeper, Spark) lives minutes, not hours: C2's compiles
    # never pay back there, and C1 alone starts a monitored stack on a third less CPU (bench/README.md).
    os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def port_slice_of(worker: int, workers: int, restarts: int) -> str:
    """The KMON_PORT_SLICE of xdist worker ``gw<worker>``. Where xdist replaces a crashed worker (not in
    `make test`: --max-worker-restart=0, pyproject), with the next number (``gw2`` of 2 workers) and
    ``restarts`` times at most, each replacement gets a slice of its own too, never one a running
    worker has ("2/2" was refused, and every stack the replacement started failed)."""
    return f"{worker}/{workers + restarts}"


# The integration groups that take longest, longest first (runs of 2026-11-28 and -29): handed out first,
# so that none of them starts last. The durations at the end of a run say when it is stale.
LONGEST_FIRST = ("tests/integration/test_scenarios.py", "tests/integration/kraft",
                 "tests/integration/test_watch_your_own.py", "tests/integration/test_kraft_secure.py",
                 "tests/integration/test_stream.py", "tests/integration/test_front_door.py",
                 "tests/integration/test_kraft_elections.py", "tests/integration/test_zk_collector.py",
                 "tests/integration/test_soak.py", "tests/integration/test_kraft_stack.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The integration groups first, the longest of them in front, then the unit tests, which fill the
    workers' ends (stable: the order within a group is kept)."""
    def rank(item: pytest.Item) -> int:
        group = integration_group(item.nodeid)
        if group is None:
            return len(LONGEST_FIRST) + 1
        return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)
    items.sort(key=rank)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``make test`` runs the suite on xdist workers. The tests of one integration module run on one
    worker, in order, and share its module- and package-scoped stacks (the kraft/ package is one
    group); each unit test is a unit of its own. (xdist's own ``loadgroup`` cannot do it: the group
    it writes into ``item._nodeid`` is not read by pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    class IntegrationGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return integration_group(nodeid) or nodeid

    config.option.loadscopereorder = False   # hand the groups out in the collection's order (above)
    return IntegrationGroups(config, log)


@dataclass
class GroupTime:
    workers: set[str] = field(default_factory=set)
    tests: int = 0
    seconds: float = 0.0


class GroupTimes:
    """Seconds spent per integration group (setup, call and teardown) and per xdist worker, printed at the
    end of a run: which group is the long pole, and whether the two workers ended together."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupTime] = {}
        self.workers: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        worker = getattr(getattr(report, "node", None), "gateway", None)
        worker_id = worker.id if worker is not None else "main"
        self.workers[worker_id] = self.workers.get(worker_id, 0.0) + report.duration
        group = self.groups.setdefault(integration_group(report.nodeid) or "unit and fuzz tests", GroupTime())
        group.workers.add(worker_id)
        group.tests += report.when == "call"
        group.seconds += report.duration

    def pytest_terminal_summary(self, terminalreporter: object) -> None:
        if not self.groups:
            return
        write = terminalreporter.write_line  # type: ignore[attr-defined]
        terminalreporter.section("time by integration group")  # type: ignore[attr-defined]
        for name, group in sorted(self.groups.items(), key=lambda g: -g[1].seconds):
            write(f"{group.seconds:8.1f}s {group.tests:5d} tests  {','.join(sorted(group.workers)):8s} {name}")
        write("  ".join(f"{w}: {s:.0f}s" for w, s in sorted(self.workers.items())))


def pytest_sessionstart(session: pytest.Session) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        session.config.pluginmanager.register(GroupTimes(), "kmon-group-times")


def integration_group(nodeid: str) -> str | None:
    """``tests/integration/kraft`` for the kraft/ package's tests, the module's path for another
    integration test, None for the rest."""
    path = nodeid.split("::", 1)[0].split("/")
    if path[:2] != ["tests", "integration"]:
        return None
    return "/".join(path[:3])


@contextmanager
def running_stack(directory: Path, toolchain: Toolchain, **request: object) -> Iterator[LocalStack]:
    """A fast-failure-detection stack for a fixture's lifetime; no Prometheus and no separate events
    cluster unless asked (tests of one part publish wherever they choose)."""
    stack = LocalStack(directory, toolchain, die_with_parent=True)
    try:
        stack.up(StackRequest(**{"fast": True, "prometheus": False, "events_cluster": False,  # type: ignore[arg-type]
                                 **request}))
        yield stack
    finally:
        stack.down(timeout=10)


@contextmanager
def running_kraft_stack(directory: Path, toolchain: Toolchain, **request: object) -> Iterator[LocalStack]:
    """A fast KRaft stack (Kafka 4: by default 3 nodes, each broker and controller, a 3-voter quorum)
    for a fixture's lifetime, as :func:`running_stack`; ``controllers=N`` for dedicated controllers."""
    with running_stack(directory, toolchain, **{"kraft": True, **request}) as stack:
        yield stack


@contextmanager
def monitored_stack(directory: Path, toolchain: Toolchain, cluster: str, **request: object) -> Iterator[LocalStack]:
    """A stack with its own events cluster and the whole monitor on it (both collectors, the
    stream app on a 0.5 s trigger), as the fault scenarios run it. The groups collector polls every
    2 s and judges a consumer over 20 s of samples (60 s by default)."""
    with running_stack(directory, toolchain, **{"prometheus": True, "events_cluster": True, **request}) as stack:
        start_monitor(stack, MonitorOptions(cluster=cluster, trigger_seconds=0.5, groups_poll_seconds=2,
                                            groups_lag_seconds=2, groups_stall_window_seconds=20))
        yield stack


@pytest.fixture(scope="session")
def session_stack(tmp_path_factory: pytest.TempPathFactory, toolchain: Toolchain) -> Iterator[LocalStack]:
    """Three brokers with fast failure detection, shared by the whole session."""
    with running_stack(tmp_path_factory.mktemp("stack"), toolchain, brokers=3) as stack:
        yield stack


@pytest.fixture(scope="session")
def chroot_stack(tmp_path_factory: pytest.TempPathFactory, toolchain: Toolchain) -> Iterator[LocalStack]:
    """Three brokers whose Kafka tree lives under /kafka in ZooKeeper."""
    with running_stack(tmp_path_factory.mktemp("chroot-stack"), toolchain, brokers=3, chroot="/kafka") as stack:
        yield stack


@pytest.fixture
def stack(session_stack: LocalStack) -> Iterator[LocalStack]:
    """The session stack, with every process running again after the test (even on failure)."""
    yield session_stack
    session_stack.restart_stopped()
