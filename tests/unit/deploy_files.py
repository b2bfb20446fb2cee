"""What the deploy files' tests hold them to: the `kmon` (sub)command parsers, their flags and variables."""
from __future__ import annotations

import argparse

from cli.main import build_parser
from kmon.flags import env_name

# variables read by prefix (kmon/client_config.py), not by a flag
PREFIXES = ("KMON_MONITORED_KAFKA_", "KMON_EVENTS_KAFKA_", "KMON_ZK_CLIENT_")
COLLECTOR_PORTS = {"zk": 9309, "groups": 9310, "kraft": 9311}


def command(words: list[str]) -> argparse.ArgumentParser:
    """The (sub)parser of `kmon <words...>` (flags after the command words are ignored)."""
    parser = build_parser()
    for word in words:
        if word.startswith("-"):
            break
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def env_vars(parser: argparse.ArgumentParser) -> set[str]:
    return {env_name(s) for s in flags(parser) if s.startswith("--") and s != "--help"}


def assert_known(variables: set[str], parser: argparse.ArgumentParser, where: str) -> None:
    unknown = {v for v in variables if v.startswith("KMON_") and v not in env_vars(parser)
               and not v.startswith(PREFIXES) and v != "KMON_CACHE"}
    assert not unknown, f"{where}: variables no flag of `kmon {parser.prog.split(' ', 1)[1]}` reads: {unknown}"
