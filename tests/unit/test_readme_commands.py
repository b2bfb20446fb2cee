"""The README's Commands block and the CLI agree both ways: every command line of the block exists as
written (`kmon <words> --help` runs, as a user would type it, and lists each flag the README shows for
it), and every command and flag of the CLI is in the block."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def readme_commands(text: str) -> dict[tuple[str, ...], set[str]]:
    """Pure: the Commands block's commands (their sub-command words; () for `kmon` itself, `zk|kraft` for
    both) and the flags shown for each, continuation lines included."""
    block = text.split("## Commands", 1)[1].split("```", 2)[1]
    commands: dict[tuple[str, ...], set[str]] = {}
    current: list[tuple[str, ...]] = []
    for line in block.splitlines():
        if line.startswith("kmon "):
            current = [()]
            for t in _leading_words(line.split()[1:]):
                current = [(*words, choice) for words in current for choice in t.split("|")]
            for words in current:
                commands.setdefault(words, set())
        for words in current:
            commands[words] |= set(FLAG.findall(line))
    return commands


def _leading_words(tokens: list[str]) -> list[str]:
    out = []
    for t in tokens:
        if not re.fullmatch(r"[a-z]+(\|[a-z]+)*", t):
            break
        out.append(t)
    return out


def cli_commands() -> dict[tuple[str, ...], set[str]]:
    """The commands the CLI has (its parser's leaves, and `kmon` itself) and each one's flags."""
    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], set[str]]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        yield words, {s for a in parser._actions if not isinstance(a, argparse._SubParsersAction)
                      for s in a.option_strings if s.startswith("--") and s != "--help"}
        for sub in subs:
            for name, child in sub.choices.items():
                yield from walk(child, (*words, name))
    from cli.main import build_parser
    return {words: flags for words, flags in walk(build_parser(), ())
            if words == () or not any(isinstance(a, argparse._SubParsersAction)
                                      for a in _parser(words)._actions)}


def _parser(words: tuple[str, ...]) -> argparse.ArgumentParser:
    from cli.main import build_parser
    parser = build_parser()
    for word in words:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    return parser


COMMANDS = readme_commands((ROOT / "README.md").read_text())


def _kmon() -> list[str]:
    """The `kmon` script of this environment, as the README's user runs it."""
    script = Path(sys.executable).with_name("kmon")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def test_the_block_names_every_command_of_the_cli_and_every_flag_of_each() -> None:
    """The other way round: a command or a flag added to the CLI and not to the README fails here."""
    missing = {" ".join(("kmon", *words)): sorted(flags - COMMANDS.get(words, set()))
               for words, flags in cli_commands().items() if words not in COMMANDS or flags - COMMANDS[words]}
    assert missing == {}, "the README's Commands block lacks these commands or flags"


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_each_command_runs_with_help_and_has_every_flag_the_readme_shows(words: tuple[str, ...]) -> None:
    done = subprocess.run([*_kmon(), *words, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: kmon {' '.join(words)}")
    offered = set(FLAG.findall(done.stdout))
    assert COMMANDS[words] - offered == set(), f"the README shows flags `kmon {' '.join(words)}` does not have"


def test_flags_on_continuation_lines_belong_to_their_command() -> None:
    text = ("## Commands\n```\nkmon [--v] X\nkmon a b [--x N]\n            [--y] what it does\nkmon c --z\n"
            "kmon a b|d --w\n```\n")
    assert readme_commands(text) == {(): {"--v"}, ("a", "b"): {"--x", "--y", "--w"}, ("c",): {"--z"},
                                     ("a", "d"): {"--w"}}
