"""`kmon run --bootstrap-servers` or `--config`: the flags that point kmon at clusters it did not start,
and the wait for them to answer what kmon must know of them (cli/discovery.py)."""
from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import threading
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from cli.discovery import DiscoveryError, Found, Given, NotAnswering, discover_each
from collectors.kraft.connection import ClientSecurity, ControllerError
from kmon import flags
from kmon.signals import stop_on_signals
from kmon.client_config import ClientConfigError, KafkaClientProperties, ZooKeeperClientProperties
from kmon.config_file import ClusterEntry, ConfigError, config_flag, load
from kmon.events import EVENTS_TOPIC
from kmon.watched import WatchedCluster

log = logging.getLogger("kmon")

ASK_EVERY_S = 5.0   # a bootstrap that does not answer is asked again this often
# `kmon run`'s flags that shape the local cluster it starts: none of them goes with --bootstrap-servers
SHAPE_FLAGS = {"kraft": "--kraft", "secure": "--secure", "chroot": "--chroot",
               "dedicated_controllers": "--dedicated-controllers", "zookeeper_port": "--zookeeper-port",
               "broker_port": "--broker-port", "no_events_cluster": "--no-events-cluster"}
WATCH_ONLY = {"command_config": "--command-config", "controllers": "--controllers", "zookeeper": "--zookeeper",
              "zk_client_config": "--zk-client-config"}


def add_watch_flags(p: argparse.ArgumentParser) -> None:
    flags.flag(p, "--bootstrap-servers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
               help="watch this existing cluster (ZooKeeper or KRaft mode, found out) instead of starting one: "
                    "kmon starts only its own parts beside it, and never stops or changes the cluster")
    flags.flag(p, "--command-config", type=flags.readable_file, metavar="FILE",
               help="with --bootstrap-servers: Kafka client properties of the cluster (security.protocol, sasl.*, "
                    "ssl.*), as the Kafka tools' --command-config; each can also be set as "
                    "KMON_MONITORED_KAFKA_<KEY>")
    flags.flag(p, "--controllers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
               help="with --bootstrap-servers, KRaft: the quorum's controller listeners (default: as "
                    "DescribeQuorum or the brokers' settings name them)")
    flags.flag(p, "--zookeeper", type=flags.zk_connect, metavar="HOST:PORT[,...][/chroot]",
               help="with --bootstrap-servers, ZooKeeper mode: zookeeper.connect (default: the brokers' own)")
    flags.flag(p, "--zk-client-config", type=flags.readable_file, metavar="FILE",
               help="with --bootstrap-servers, ZooKeeper mode: ZooKeeper client properties (zookeeper.ssl.*, "
                    "zookeeper.sasl.jaas.config, zookeeper.auth)")
    config_flag(p, "the clusters to watch (all of them, or --cluster NAME's), each as --bootstrap-servers does, "
                   "in one stream app; the events cluster and the trigger interval")
    flags.flag(p, "--events-bootstrap-servers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
               help="an events cluster of yours for kmon's events topic (default: kmon starts its own events node)")
    flags.flag(p, "--events-command-config", type=flags.readable_file, metavar="FILE",
               help="with --events-bootstrap-servers: that cluster's Kafka client properties")
    flags.flag(p, "--events-topic", default=EVENTS_TOPIC, type=flags.topic_name, help="kmon's events topic")


def check_flags(args: argparse.Namespace) -> None:
    """Flags that do not go together: one line naming them."""
    if args.bootstrap_servers and args.config:
        raise argparse.ArgumentTypeError(
            "--bootstrap-servers names one cluster and --config the file's: give one of them (--config FILE "
            "--cluster NAME watches one of the file's)")
    if args.bootstrap_servers or args.config:
        if shaped := [name for attr, name in SHAPE_FLAGS.items() if getattr(args, attr)]:
            raise argparse.ArgumentTypeError(
                f"{'--bootstrap-servers' if args.bootstrap_servers else '--config'} watches clusters kmon did not "
                f"start: {', '.join(shaped)} shape(s) a local one and do(es) not go with it")
    if args.events_bootstrap_servers and args.no_events_cluster:
        raise argparse.ArgumentTypeError("--events-bootstrap-servers names where kmon's events go, "
                                         "--no-events-cluster sends them to the monitored cluster: give one of them")
    if args.events_command_config and not args.events_bootstrap_servers:
        raise argparse.ArgumentTypeError("--events-command-config needs --events-bootstrap-servers: kmon's own "
                                         "events node needs no client properties")
    if not args.bootstrap_servers and (given := [name for attr, name in WATCH_ONLY.items() if getattr(args, attr)]):
        raise argparse.ArgumentTypeError(
            f"{', '.join(given)} need(s) --bootstrap-servers" + (
                ": with --config, each cluster's entry in the file gives them" if args.config else
                ": the cluster kmon starts itself needs none"))


def default_name(bootstrap_servers: str) -> str:
    """Pure: a watched cluster's name where --cluster gives none: its first bootstrap host."""
    host = bootstrap_servers.split(",")[0].strip().rpartition(":")[0].strip("[]")
    name = re.sub(r"[^A-Za-z0-9._-]", "-", host).lstrip("._-")
    return flags.cluster_name(name or "kafka")


def stack_dir(args: argparse.Namespace, default: str) -> Path:
    """--dir, else a directory of the watched cluster's own, or of the config file's fleet (so `make run`'s
    is never resumed for them)."""
    if args.dir is not None:
        return args.dir
    if args.config:
        return Path(".kmon") / "fleets" / (re.sub(r"[^A-Za-z0-9._-]", "-", args.config.stem) or "kmon")
    return Path(".kmon") / "clusters" / args.cluster if args.bootstrap_servers else Path(default)


def watched_clusters(args: argparse.Namespace) -> tuple[WatchedCluster, ...]:
    """The clusters --bootstrap-servers or --config names (--cluster: only that one of the file's), each
    found out (find_clusters). Raises DiscoveryError, or ConfigError naming the file's problem."""
    if args.bootstrap_servers:
        return find_clusters([given(args.cluster, args.bootstrap_servers, args.command_config, args.controllers,
                                    args.zookeeper, args.zk_client_config)])
    config = load(args.config)
    givens = []
    for entry in [config.cluster(args.cluster)] if args.cluster else config.clusters:
        try:
            givens.append(of_entry(entry))
        except DiscoveryError as e:
            raise DiscoveryError(f"{entry.cluster}: {e}") from None
    return find_clusters(givens)


def find_clusters(givens: list[Given]) -> tuple[WatchedCluster, ...]:
    """What each cluster is and how kmon watches it, said in a few lines (prefixed by its name where there
    are several); while some do not answer, they are asked again every ASK_EVERY_S (said once each).
    Raises DiscoveryError naming what is missing, KeyboardInterrupt at SIGTERM or Ctrl-C. (A signal is
    waited for as an event here: raised as KeyboardInterrupt at once, it can land in a librdkafka
    callback, which swallows it.)"""
    several = len(givens) > 1
    found: dict[str, Found] = {}
    waiting: set[str] = set()
    stopped = threading.Event()
    stop_on_signals(stopped)
    try:
        while not stopped.is_set():
            asked = [g for g in givens if g.name not in found]
            for g, result in zip(asked, discover_each(asked)):
                if isinstance(result, Found):
                    found[g.name] = result
                elif not isinstance(result, NotAnswering):
                    raise DiscoveryError(f"{g.name}: {result}" if several else str(result)) from None
                elif g.name not in waiting:
                    log.warning("%s%s; asking again every %g s until it does (Ctrl-C stops)",
                                f"{g.name}: " if several else "", result, ASK_EVERY_S)
                    waiting.add(g.name)
            if len(found) == len(givens):
                break
            stopped.wait(ASK_EVERY_S)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):   # as `kmon run` had them: interrupt what it starts
            signal.signal(sig, signal.default_int_handler)
    if stopped.is_set():
        raise KeyboardInterrupt()
    for g in givens:
        prefix = f"{g.name}: " if several else ""
        if g.name in waiting:
            log.info("%sthe cluster at %s answers now", prefix, g.bootstrap_servers)
        for line in found[g.name].said:
            log.info("%s%s", prefix, line)
        for line in found[g.name].warnings:
            log.warning("%s%s", prefix, line)
    return tuple(found[g.name].cluster for g in givens)


def of_entry(entry: ClusterEntry) -> Given:
    """What a config file's entry says of its cluster."""
    try:
        entry.usable()
    except ConfigError as e:
        raise DiscoveryError(str(e)) from None
    return replace(given(entry.cluster, entry.bootstrap_servers, entry.command_config, entry.controllers,
                         entry.zookeeper, entry.zk_client_config, entry.client), sampled=entry.sampled)


def given(name: str, bootstrap_servers: str, command_config: Path | None, controllers: str | None,
          zookeeper: tuple[str, str] | None, zk_client_config: Path | None,
          inline: Mapping[str, str] | None = None) -> Given:
    """What the user said of a cluster (flags, or a config file's entry), its client properties checked."""
    try:
        client = KafkaClientProperties.load("monitored", command_config, os.environ, inline)
        settings = client.librdkafka()
        if zk_client_config:
            ZooKeeperClientProperties.load(zk_client_config, os.environ)   # a bad file fails here, not later
    except ClientConfigError as e:
        raise DiscoveryError(str(e)) from None
    try:
        security, why_not = ClientSecurity.from_librdkafka(settings), ""
    except ControllerError as e:   # the KRaft collector's own client cannot: the sampled mode can
        security, why_not = None, str(e)
    return Given(name=name, bootstrap_servers=bootstrap_servers, client=settings, security=security,
                 controllers=controllers or "", zookeeper="".join(zookeeper) if zookeeper else "",
                 command_config=str(command_config.resolve()) if command_config else "",
                 zk_client_config=str(zk_client_config.resolve()) if zk_client_config else "",
                 why_no_security=why_not)
