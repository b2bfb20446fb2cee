"""Fixtures: real local stacks (ZooKeeper + Kafka brokers, or KRaft nodes), always torn down."""
from __future__ import annotations

import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from cli.monitor import MonitorOptions, start_monitor
from kmon.toolchain import Toolchain, find_toolchain
from stack.local import LocalStack, StackRequest


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    return find_toolchain()


def pytest_configure(config: pytest.Config) -> None:
    # pytest skips fixture teardown when it is terminated (a CI timeout, `timeout`); as an
    # interrupt it runs it, and the stacks' processes are stopped instead of leaked.
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupt)


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
    stream app on a 0.5 s trigger), as the fault scenarios run it."""
    with running_stack(directory, toolchain, **{"prometheus": True, "events_cluster": True, **request}) as stack:
        start_monitor(stack, MonitorOptions(cluster=cluster, trigger_seconds=0.5, groups_poll_seconds=2,
                                            groups_lag_seconds=2))
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
