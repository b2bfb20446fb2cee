"""`kmon config check FILE`: the config file read as every command reads it, then each cluster it names
asked what it is (cli/discovery.py, as `kmon run --bootstrap-servers` asks): its mode, whether kmon follows
its control plane exactly or samples it, and what is missing. Exit 0 when kmon can watch every cluster."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kmon.config_file import ConfigError, load
from kmon.reachability import tcp_probe


def add_config_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="kmon's config file (the clusters it watches): check it",
                       description="kmon's config file names the clusters kmon watches, its events cluster and "
                                   "its stream app, with the flags' names as keys (README: Watch a fleet).")
    csub = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    check = csub.add_parser("check", help="read the file, ask each cluster what it is, say what is missing",
                            description="Read the config file (a bad key or value is one line naming its line), "
                                        "then ask each cluster what it is, as `kmon run` does: its mode, whether "
                                        "kmon follows its control plane exactly or samples it, and what is "
                                        "missing. Exits 0 when kmon can watch every cluster, else 1.")
    check.add_argument("file", type=Path, help="the config file (YAML)")
    check.set_defaults(handler=cmd_config_check)


def cmd_config_check(args: argparse.Namespace) -> int:
    from cli.discovery import DiscoveryError, Found, Given, discover_each   # the Admin API's client, only here
    from cli.watch import of_entry

    try:
        config = load(args.file)
    except ConfigError as e:
        print(f"kmon config check: {e}", file=sys.stderr)
        return 1
    print(f"{args.file}: {len(config.clusters)} cluster(s)")
    watchable = True
    givens: dict[int, Given] = {}
    outcomes: dict[int, Found | DiscoveryError] = {}
    for i, entry in enumerate(config.clusters):
        try:
            givens[i] = of_entry(entry)
        except DiscoveryError as e:
            outcomes[i] = e
    outcomes.update(zip(givens, discover_each(list(givens.values()))))
    for i, entry in enumerate(config.clusters):
        found = outcomes[i]
        if isinstance(found, DiscoveryError):
            print(f"{entry.cluster}: cannot be watched: {found}")
            watchable = False
            continue
        for line in found.said:
            print(f"{entry.cluster}: {line}")
        for line in found.warnings:
            print(f"{entry.cluster}: missing: {line}")
    events = config.events.bootstrap_servers
    if events is None:
        print("events: kmon run starts its own events node")
    elif (why := tcp_probe(events)) is None:
        print(f"events: {events} answers")
    else:
        print(f"events: {events} cannot be reached: {why}")
        watchable = False
    return 0 if watchable else 1
