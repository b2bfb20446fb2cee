"""One driver per stack directory: the `kmon run` (or the test) that owns its processes.

Two `kmon run` in one directory would start two monitors that count every transition twice
(Burrow's #785). The owner holds an exclusive ``flock`` on ``<dir>/owner.lock`` for as long as it
drives the stack; the kernel drops it when the owner dies, however it dies, so a stale lock
never blocks the next start. The file names the owner for the error line of the one refused.
"""
from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = "owner.lock"


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str   # what the owner runs, e.g. "kmon run"


class Busy(RuntimeError):
    def __init__(self, holder: Holder | None):
        super().__init__(f"held by {holder.command} (pid {holder.pid})" if holder else "held")
        self.holder = holder


class OwnerLock:
    def __init__(self, directory: Path):
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, command: str) -> None:
        """Take the lock or raise Busy naming who has it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Busy(holder(self.path.parent)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {command}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)   # closing the last descriptor drops the flock
            self._fd = None


def holder(directory: Path) -> Holder | None:
    """Who owns the stack in ``directory`` now, if anyone (a lock nobody holds is no owner)."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return parse(os.read(fd, 4096).decode(errors="replace"))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def parse(text: str) -> Holder | None:
    """Pure: the lock file's ``<pid> <command>`` line."""
    pid, _, command = text.strip().partition(" ")
    return Holder(int(pid), command or "kmon") if pid.isdigit() else None
