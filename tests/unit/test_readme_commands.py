"""Every command line of the README's Commands block exists as written: `kmon <words> --help`
runs, as a user would type it, and lists each flag the README shows for it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def readme_commands(text: str) -> dict[tuple[str, ...], set[str]]:
    """Pure: the Commands block's commands (their sub-command words) and the flags shown for each,
    continuation lines included."""
    block = text.split("## Commands", 1)[1].split("```", 2)[1]
    commands: dict[tuple[str, ...], set[str]] = {}
    words: tuple[str, ...] = ()
    for line in block.splitlines():
        if line.startswith("kmon "):
            tokens = line.split()[1:]
            words = tuple(t for t in _leading_words(tokens))
            commands.setdefault(words, set())
        if words:
            commands[words] |= set(FLAG.findall(line))
    return commands


def _leading_words(tokens: list[str]) -> list[str]:
    out = []
    for t in tokens:
        if not re.fullmatch(r"[a-z]+", t):
            break
        out.append(t)
    return out


COMMANDS = readme_commands((ROOT / "README.md").read_text())


def _kmon() -> list[str]:
    """The `kmon` script of this environment, as the README's user runs it."""
    script = Path(sys.executable).with_name("kmon")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def test_the_block_names_the_commands_users_run() -> None:
    assert {("run",), ("stack", "up"), ("stack", "down"), ("collect", "zk"), ("stream",), ("history",)} <= set(COMMANDS)
    assert all(words for words in COMMANDS)


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_each_command_runs_with_help_and_has_every_flag_the_readme_shows(words: tuple[str, ...]) -> None:
    done = subprocess.run([*_kmon(), *words, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: kmon {' '.join(words)}")
    offered = set(FLAG.findall(done.stdout))
    assert COMMANDS[words] - offered == set(), f"the README shows flags `kmon {' '.join(words)}` does not have"


def test_flags_on_continuation_lines_belong_to_their_command() -> None:
    text = "## Commands\n```\nkmon a b [--x N]\n            [--y] what it does\nkmon c --z\n```\n"
    assert readme_commands(text) == {("a", "b"): {"--x", "--y"}, ("c",): {"--z"}}
