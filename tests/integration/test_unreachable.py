"""Addresses that do not answer: each long-running command says which, in one kmon line, within
seconds; with --startup-timeout it exits 1 with that line; never a traceback.

The real commands run as processes against 127.0.0.1 ports where nothing listens (or, for the
monitored cluster's bootstrap, a bare TCP listener). No cluster, and no Spark: `kmon stream`
waits for the events bootstrap before it starts Spark.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.support import eventually

pytestmark = pytest.mark.integration

# a collector exits once its clients give up their calls in flight (the Admin API's 10 s)
EXIT_BOUND_S = 30


def dead_address() -> str:
    """127.0.0.1:<port> with nothing listening (a free port, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def listening() -> Iterator[str]:
    """An address that accepts TCP connections and says nothing: reachable, though no Kafka."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"


def command(kind: str, monitored: str, events: str, tmp_path: Path) -> list[str]:
    collect = ["--cluster", "c", "--events-bootstrap-servers", events, "--metrics-port", "0"]
    return {
        "zk": ["collect", "zk", "--zookeeper", monitored, *collect],
        "groups": ["collect", "groups", "--bootstrap-servers", monitored, *collect],
        "stream": ["stream", "--bootstrap-servers", events, "--checkpoint", str(tmp_path / "checkpoint"),
                   "--metrics-port", "0"],
    }[kind]


def start(argv: list[str], tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    stderr = tmp_path / "stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMON_")}
    with stderr.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", *argv], env=env,
                                stdout=subprocess.DEVNULL, stderr=out)
    return proc, stderr


@pytest.mark.parametrize("kind, role, which", [
    ("zk", "monitored ZooKeeper", "monitored"),
    ("groups", "monitored bootstrap", "monitored"),
    ("groups", "events bootstrap", "events"),
    ("stream", "events bootstrap", "events"),
])
def test_startup_timeout_exits_1_naming_role_and_address(kind: str, role: str, which: str, listening: str,
                                                         tmp_path: Path) -> None:
    dead = dead_address()
    # the monitored cluster is checked first: to hear of the events bootstrap, it must answer
    monitored = dead if which == "monitored" else listening
    proc, stderr = start([*command(kind, monitored, dead, tmp_path), "--startup-timeout", "3"], tmp_path)
    started = time.monotonic()
    try:
        assert proc.wait(timeout=EXIT_BOUND_S) == 1
    finally:
        proc.kill()
    text = stderr.read_text()
    assert time.monotonic() - started < EXIT_BOUND_S
    gave_up = [line for line in text.splitlines() if "within the startup timeout" in line]
    assert len(gave_up) == 1, text
    assert " ERROR kmon." in gave_up[0]
    assert f"cannot reach the {role} {dead} within the startup timeout of 3 s (" in gave_up[0]
    assert "Traceback" not in text
    assert "starting Spark" not in text


@pytest.mark.parametrize("kind, roles", [
    ("zk", ["monitored ZooKeeper", "events bootstrap"]),
    ("groups", ["monitored bootstrap", "events bootstrap"]),
    ("stream", ["events bootstrap"]),
])
def test_without_startup_timeout_it_says_so_keeps_running_and_stops_on_sigterm(kind: str, roles: list[str],
                                                                              tmp_path: Path) -> None:
    dead = dead_address()
    proc, stderr = start(command(kind, dead, dead, tmp_path), tmp_path)
    try:
        for role in roles:
            # said once the address has failed for a few seconds; the bound is for a loaded machine, where
            # the supervisor and its child each took seconds to start (15 s once was not enough)
            eventually(lambda: f"cannot reach the {role} {dead} for " in stderr.read_text(), 60,
                       f"the {role} line")
        time.sleep(2)
        assert proc.poll() is None, "a service keeps retrying"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=EXIT_BOUND_S) == 0
    finally:
        proc.kill()
    text = stderr.read_text()
    for role in roles:
        unreachable = [line for line in text.splitlines() if f"cannot reach the {role}" in line]
        assert len(unreachable) == 1, text   # throttled: not a line per retry
        assert "WARNING" in unreachable[0]
    assert "received SIGTERM" in text and "Traceback" not in text
    # the clients' own lines (a line per attempt) stay at debug: their reason is in kmon's line
    assert all("cannot reach the" in line for line in text.splitlines() if "Connection dropped" in line)
    assert "|FAIL|" not in text
