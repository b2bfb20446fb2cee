"""Starting, watching and stopping one local server process."""
from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Mapping, TypeVar

from kmon import signals

log = logging.getLogger("kmon.stack")
T = TypeVar("T")

# Picked ports start here: below, system services; from the kernel's ephemeral range on, any
# socket's automatic port.
FIRST_PICKED_PORT = 20000
# "I/N": pick only every Nth port of the range, from its Ith, so that N processes picking at once
# (the test suite's parallel workers, and whatever each starts) never pick the same port, even one
# whose server is down or not yet bound.
PORT_SLICE_ENV = "KMON_PORT_SLICE"


def free_port(ephemeral: tuple[int, int] | None = None, avoid: Collection[int] = ()) -> int:
    """A free port for a server of the local stack, outside the kernel's ephemeral range: a
    broker killed and started again must find its port free, and while it is down, clients
    still connect to it. An ephemeral port there was seen taken by Spark's one-shot Arrow
    socket, which a reconnecting Kafka client then broke, and the stream's sink waited forever."""
    low, high = ephemeral or ephemeral_ports()
    below, above = range(FIRST_PICKED_PORT, low), range(high + 1, 65536)
    ports = port_slice(below if len(below) >= len(above) else above)
    rng = random.SystemRandom()
    for _ in range(200 if len(ports) > 1000 else 0):   # a narrow range: any port the kernel gives
        if (port := rng.choice(ports)) in avoid:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
                return port
        except OSError:   # taken: another
            continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_slice(ports: range, env: Mapping[str, str] = os.environ) -> range:
    """``ports``, cut to the slice ``KMON_PORT_SLICE`` names, if any."""
    if not (given := env.get(PORT_SLICE_ENV)):
        return ports
    try:
        index, count = map(int, given.split("/"))
        if not 0 <= index < count:
            raise ValueError
    except ValueError:
        raise ValueError(f"{PORT_SLICE_ENV}={given!r}: expected I/N with 0 <= I < N, e.g. 0/4") from None
    return ports[index::count]


class PortPicker:
    """Ports for servers started together: each free when picked and none picked twice, since
    none is bound before its process starts (two picks of one stack's start could return the
    same port, and the server started second exited with "Address already in use")."""

    def __init__(self, reserved: Collection[int] = ()) -> None:
        self._picked: set[int] = set(reserved)   # ``reserved``: ports servers started beside these will bind

    def pick(self, earlier: int = 0) -> int:
        """``earlier`` (a server's port before) if it is free and not picked, else a new free one."""
        port = earlier if earlier and earlier not in self._picked and port_free(earlier) else free_port(
            avoid=self._picked)
        self._picked.add(port)
        return port


def port_free(port: int) -> bool:
    """Nothing listens on ``port`` of the loopback address (nor holds it bound)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # a port in TIME_WAIT is free to a server
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_ports(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's range of automatic ports (Linux's default where it does not say)."""
    try:
        low, high = map(int, path.read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.2,
               alive: Callable[[], bool] | None = None) -> T:
    """Poll ``check`` until it returns something true, and return that; fail naming ``what`` on
    timeout or when ``alive`` says the process died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if found := check():
                return found
        except Exception:  # not ready yet: a refused connection, a missing znode...
            pass
        if alive is not None and not alive():
            raise RuntimeError(f"{what}: the process exited before it was ready")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout:.0f}s")
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A dead child of ours is a zombie that still "exists". It is looked at, not reaped, so
    # that exit_status can still say how it ended (subprocess reaps it at the next spawn).
    try:
        return _peek(pid) is None
    except ChildProcessError:
        return _state(pid) not in ("Z", "X", None)


def _peek(pid: int) -> os.waitid_result | None:
    """How a child of this process ended, without reaping it; None while it runs."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)


def exit_status(pid: int) -> str:
    """How a dead process ended, in words: ``exited with status 1``, ``killed by SIGKILL``."""
    try:
        done = _peek(pid)
    except ChildProcessError:   # not our child, or already reaped
        return "ended (exit status unknown)"
    if done is None:
        return "is still running"
    return describe_status(done.si_code, done.si_status)


def describe_status(code: int, status: int) -> str:
    """Pure: a waitid result's (si_code, si_status) in words."""
    if code == os.CLD_EXITED:
        return f"exited with status {status}"
    try:
        name = signal.Signals(status).name
    except ValueError:
        name = f"signal {status}"
    return f"was killed by {name}" + (" (core dumped)" if code == os.CLD_DUMPED else "")


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Spawned:
    pid: int
    log: Path


def spawn(argv: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None,
          die_with_parent: bool = False) -> Spawned:
    """Start detached (own session) so Ctrl-C in a shell does not reach it; output to ``log``.

    ``die_with_parent``: for processes owned by a foreground command or a test run, so that
    even a SIGKILLed owner leaves nothing behind (`kmon stack up` leaves it off: its stack
    outlives the command by design).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        p = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True,
                             env={**os.environ, **(env or {})},
                             preexec_fn=signals.die_with_parent if die_with_parent else None)
    # kmon reaps its children itself (reap: the stack, when it starts a part again), after the
    # keeper has read how they ended (exit_status): left to subprocess, a child that ended before
    # its Popen was dropped, or before any later spawn, was reaped with its status unread ("exit
    # status unknown" for a part that crashed at once)
    p._child_created = False
    return Spawned(p.pid, log)


def reap(pid: int) -> None:
    """Collect a dead child of ours once how it ended was read; nothing if it runs or is not ours."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(pid: int, marker: str, timeout: float = 20.0, sig: int = signal.SIGTERM) -> bool:
    """Stop ``pid`` if it is still the process we started (its cmdline contains ``marker``).

    SIGTERM first (brokers shut down cleanly), SIGKILL after ``timeout``. Returns whether
    a process was stopped.
    """
    return bool(stop_all([(pid, marker)], timeout, sig))


def stop_all(targets: list[tuple[int, str]], timeout: float = 20.0, sig: int = signal.SIGTERM) -> set[int]:
    """Stop several processes at once, as :func:`stop` does one (each ``(pid, marker)``): all are
    signalled before any is waited for. Returns the pids stopped."""
    ours = {pid for pid, marker in targets if pid_alive(pid) and marker in cmdline(pid)}
    for pid in ours:
        os.kill(pid, sig)
    deadline, killed = time.monotonic() + timeout, False
    while running := [pid for pid in ours if pid_alive(pid)]:
        if time.monotonic() > deadline:
            if killed:   # not even SIGKILL ended it (a process stuck in the kernel): not waited for forever
                log.warning("pids %s still there 10 s after SIGKILL; not waiting for them", running)
                break
            for pid in running:
                with contextlib.suppress(ProcessLookupError):   # it ended meanwhile
                    os.kill(pid, signal.SIGKILL)
            deadline, killed = time.monotonic() + 10, True
        time.sleep(0.1)
    return ours
