"""One driver per stack directory (stack/owner.py): a second `kmon run` is refused by name,
and the lock of an owner that died, however it died, blocks nothing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stack.owner import Busy, Holder, OwnerLock, holder, parse


def test_a_second_owner_is_refused_naming_the_first_until_it_lets_go(tmp_path: Path) -> None:
    first, second = OwnerLock(tmp_path), OwnerLock(tmp_path)
    first.acquire("kmon run")
    with pytest.raises(Busy) as refused:
        second.acquire("kmon stack up")
    assert refused.value.holder == Holder(os.getpid(), "kmon run")
    assert holder(tmp_path) == Holder(os.getpid(), "kmon run")
    first.release()
    assert holder(tmp_path) is None
    second.acquire("kmon stack up")
    assert holder(tmp_path) == Holder(os.getpid(), "kmon stack up")
    second.release()


def test_the_lock_of_a_killed_owner_is_free(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom pathlib import Path\nfrom stack.owner import OwnerLock\n"
        f"OwnerLock(Path({str(tmp_path)!r})).acquire('kmon run')\nprint('held', flush=True)\ntime.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout and owner.stdout.readline().strip() == "held"
        assert holder(tmp_path) == Holder(owner.pid, "kmon run")
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
    assert holder(tmp_path) is None
    OwnerLock(tmp_path).acquire("kmon run")


def test_no_lock_file_is_no_owner(tmp_path: Path) -> None:
    assert holder(tmp_path / "never-started") is None


@pytest.mark.parametrize("text, expected", [
    ("123 kmon run\n", Holder(123, "kmon run")),
    ("123", Holder(123, "kmon")),
    ("", None),
    ("garbage here", None),
])
def test_the_lock_file_line(text: str, expected: Holder | None) -> None:
    assert parse(text) == expected
