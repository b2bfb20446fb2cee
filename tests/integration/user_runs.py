"""A kmon command run as a user runs it: from the checkout, in a process group of its own, its output
in a file; and what a user reads off the screen. (The ``runs`` fixture stops them at the end of a test.)"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Run:
    """One run of the main command in a process group of its own, its output in a file."""

    def __init__(self, argv: list[str], env: dict[str, str], out: Path):
        self.out = out
        with open(out, "wb") as sink:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def said(self) -> str:
        return self.out.read_text(errors="replace")

    def line(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of ``pattern`` in what the run printed, once it has printed it."""
        deadline = time.monotonic() + timeout
        while not (found := re.search(pattern, self.said(), re.M)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = "running" if self.proc.poll() is None else f"exited with {self.proc.returncode}"
                raise AssertionError(f"{pattern!r} not in the output ({state}):\n{self.said()[-4000:]}")
            time.sleep(0.5)
        return found

    def stop(self, sig: int, timeout: float = 120) -> None:
        """``sig`` to the whole process group, as a terminal's Ctrl-C or a service manager does."""
        os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def addresses(run: Run) -> dict[str, str]:
    """What a user reads off the screen: the exporter, the API's health, the monitored bootstrap, Prometheus,
    history."""
    exporter = run.line(r"kmon exporter\s+http://127\.0\.0\.1:(\d+)/metrics", 300)
    return {"exporter": exporter.group(1),
            "health": run.line(r"^  what is wrong\s+(http://\S+)", 5).group(1),
            "bootstrap": run.line(r"^    bootstrap\s+(\S+)", 5).group(1),
            "prometheus": run.line(r"^  prometheus\s+(http://\S+)", 5).group(1),
            "history": run.line(r"^  what happened\s+(.+)$", 5).group(1)}


