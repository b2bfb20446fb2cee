"""One stream app per checkpoint (streaming/checkpoint_lock.py), with real processes and real locks:
a JVM left by a killed app is played by a process that holds the JVM lock as Java's FileChannel.lock
does (a POSIX record lock) and writes its pid, under a command line that names java."""
from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streaming.checkpoint_lock import JVM_LOCK_FILE, CheckpointBusy, CheckpointLock

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0); os.write(fd, f"{os.getpid()}\\n".encode())
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def holding(path: Path, seconds: float, name: str) -> subprocess.Popen:
    """A process named ``name`` (its argv[0]) holding the lock on ``path`` for ``seconds``."""
    proc = subprocess.Popen(["bash", "-c", f'exec -a {name} "$0" -c "$1" "$2" "$3"', sys.executable, HOLD,
                             str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_app_on_a_checkpoint_is_refused_naming_the_first(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                              "from pathlib import Path\n"
                              "from streaming.checkpoint_lock import CheckpointLock\n"
                              "CheckpointLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)",
                              str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout and other.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointBusy, match=rf"checkpoint {tmp_path} is in use by another kmon stream "
                                                 rf"\(pid {other.pid}\)"):
            CheckpointLock(tmp_path).acquire()
    finally:
        other.kill()
        other.wait()
    lock = CheckpointLock(tmp_path)   # the kernel dropped the dead one's lock
    lock.acquire()
    lock.release()


def test_the_next_app_waits_for_the_previous_jvm_to_exit(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kmon")
    jvm = holding(tmp_path / JVM_LOCK_FILE, 1.5, "java-of-a-killed-app")
    started = time.monotonic()
    lock = CheckpointLock(tmp_path, grace_s=30)
    lock.acquire()
    assert jvm.wait(5) == 0   # it exited on its own, not killed
    assert time.monotonic() - started >= 1.0
    assert f"waiting for Spark's JVM of the previous stream app (pid {jvm.pid}) to exit" in caplog.text
    lock.release()


def test_a_previous_jvm_that_does_not_exit_is_ended_after_the_grace(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    jvm = holding(tmp_path / JVM_LOCK_FILE, 60, "java-of-a-killed-app")
    try:
        CheckpointLock(tmp_path, grace_s=1).acquire()
        assert jvm.wait(5) == -9
        assert f"(pid {jvm.pid}) still holds the checkpoint 1 s after its driver died: ending it" in caplog.text
    finally:
        jvm.kill()
        jvm.wait()


def test_a_holder_that_is_not_a_jvm_is_named_not_killed(tmp_path: Path) -> None:
    other = holding(tmp_path / JVM_LOCK_FILE, 60, "something-else")
    try:
        with pytest.raises(CheckpointBusy, match=rf"still locked by pid {other.pid}, which is not a stream app's"):
            CheckpointLock(tmp_path, grace_s=0.5).acquire()
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
