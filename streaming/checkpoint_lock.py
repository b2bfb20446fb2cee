"""One stream app per checkpoint, its Spark JVM included.

Two queries on one checkpoint commit batches beside each other, and Spark fails the second ("Multiple
streaming queries are concurrently using ..."). That happens without a second `kmon stream` too: pyspark's
JVM exits when its Python's pipe closes, running its shutdown hooks, so a stream app SIGKILLed (the OOM
killer, a stall) leaves a JVM that may still commit a batch for a few seconds, while `kmon run` or the
service manager starts the next app. So two locks, in the checkpoint directory:

* the app's Python holds an ``flock`` on LOCK_FILE for its lifetime (a second live app is refused);
* its Spark JVM holds a POSIX record lock (Java's ``FileChannel.lock``) on JVM_LOCK_FILE, with its pid
  in the file; the next app waits for that JVM to exit, and ends it after ``grace_s``: it has no
  driver any more. The kernel drops both locks when their process dies, however it dies.
"""
from __future__ import annotations

import fcntl
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any


LOCK_FILE = ".kmon-stream.lock"
JVM_LOCK_FILE = ".kmon-stream-jvm.lock"
# a system property of the JVM pins its lock: an unreachable FileChannel is closed by a cleaner,
# and its close drops the lock
PINNED_AS = "kmon.checkpoint.lock"

log = logging.getLogger("kmon.stream")


class CheckpointBusy(RuntimeError):
    pass


class CheckpointLock:
    def __init__(self, checkpoint: Path, grace_s: float = 10.0):
        self.checkpoint = checkpoint
        self.grace_s = grace_s
        self._fd: int | None = None

    def acquire(self) -> None:
        """This process's lock, then the JVM lock free: raises CheckpointBusy naming another live app."""
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.checkpoint / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_by = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise CheckpointBusy(f"checkpoint {self.checkpoint} is in use by another kmon stream (pid {held_by})") \
                from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        try:
            self._await_previous_jvm()
        except BaseException:
            self.release()
            raise

    def _await_previous_jvm(self) -> None:
        path = self.checkpoint / JVM_LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            deadline, said, killed = time.monotonic() + self.grace_s, False, False
            while not _try_lockf(fd):
                pid = _pid_in(fd)
                if not said:
                    log.info("waiting for Spark's JVM of the previous stream app (pid %s) to exit: it may "
                             "still commit a batch to the checkpoint", pid or "?")
                    said = True
                if time.monotonic() > deadline:
                    if killed or not (pid and _is_java(pid)):
                        raise CheckpointBusy(f"{path} is still locked by pid {pid or '?'}, which is not a "
                                             "stream app's Spark JVM kmon can end")
                    log.warning("Spark's JVM of the previous stream app (pid %d) still holds the checkpoint "
                                "%.0f s after its driver died: ending it", pid, self.grace_s)
                    os.kill(pid, signal.SIGKILL)
                    killed, deadline = True, time.monotonic() + self.grace_s
                time.sleep(0.2)
        finally:
            os.close(fd)   # drops the test lock: the new JVM takes it (hold_in_jvm)

    def hold_in_jvm(self, jvm: Any) -> None:
        """The Spark JVM (py4j's view of it) takes the JVM lock for as long as it runs."""
        path = self.checkpoint / JVM_LOCK_FILE
        channel = jvm.java.io.RandomAccessFile(str(path), "rw").getChannel()
        lock = channel.tryLock()
        if lock is None:   # only a JVM started outside kmon's order could hold it now
            raise CheckpointBusy(f"checkpoint {self.checkpoint} is held by another Spark JVM ({path})")
        jvm.java.lang.System.getProperties().put(PINNED_AS, lock)
        path.write_text(f"{jvm.java.lang.ProcessHandle.current().pid()}\n")

    def release_in_jvm(self, jvm: Any) -> None:
        """The JVM lock given back by a JVM that goes on (a stopped session in a process that lives on)."""
        lock = jvm.java.lang.System.getProperties().remove(PINNED_AS)
        if lock is not None:
            lock.channel().close()

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _try_lockf(fd: int) -> bool:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _pid_in(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _is_java(pid: int) -> bool:
    """Still a JVM (not a pid reused since)."""
    try:
        return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
