"""`kmon run --bootstrap-servers`: the flags that point kmon at a cluster it did not start, and the wait
for that cluster to answer what kmon must know of it (cli/discovery.py)."""
from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import threading
from pathlib import Path
from typing import Mapping

from cli.discovery import DiscoveryError, Given, NotAnswering, discover
from collectors.kraft.connection import ClientSecurity, ControllerError
from kmon import flags
from kmon.signals import stop_on_signals
from kmon.client_config import ClientConfigError, KafkaClientProperties, ZooKeeperClientProperties
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


def check_flags(args: argparse.Namespace) -> None:
    """Flags that do not go together: one line naming them."""
    if args.bootstrap_servers:
        if shaped := [name for attr, name in SHAPE_FLAGS.items() if getattr(args, attr)]:
            raise argparse.ArgumentTypeError(
                f"--bootstrap-servers watches a cluster kmon did not start: {', '.join(shaped)} shape(s) a local "
                "one and do(es) not go with it")
    elif given := [name for attr, name in WATCH_ONLY.items() if getattr(args, attr)]:
        raise argparse.ArgumentTypeError(f"{', '.join(given)} need(s) --bootstrap-servers: the cluster kmon "
                                         "starts itself needs none")


def default_name(bootstrap_servers: str) -> str:
    """Pure: a watched cluster's name where --cluster gives none: its first bootstrap host."""
    host = bootstrap_servers.split(",")[0].strip().rpartition(":")[0].strip("[]")
    name = re.sub(r"[^A-Za-z0-9._-]", "-", host).lstrip("._-")
    return flags.cluster_name(name or "kafka")


def stack_dir(args: argparse.Namespace, default: str) -> Path:
    """--dir, else a directory of the watched cluster's own (so `make run`'s is never resumed for it)."""
    if args.dir is not None:
        return args.dir
    return Path(".kmon") / "clusters" / args.cluster if args.bootstrap_servers else Path(default)


def find_cluster(args: argparse.Namespace) -> WatchedCluster:
    """What the cluster is and how kmon watches it, said in a few lines; while no broker answers, asked
    again every ASK_EVERY_S (said once). Raises DiscoveryError naming what is missing, KeyboardInterrupt
    at SIGTERM or Ctrl-C. (A signal is waited for as an event here: raised as KeyboardInterrupt at once,
    it can land in a librdkafka callback, which swallows it.)"""
    given = _given(args)
    stopped = threading.Event()
    stop_on_signals(stopped)
    warned = False
    try:
        while not stopped.is_set():
            try:
                found = discover(given)
                break
            except NotAnswering as e:
                if not warned:
                    log.warning("%s; asking again every %g s until it does (Ctrl-C stops)", e, ASK_EVERY_S)
                    warned = True
            stopped.wait(ASK_EVERY_S)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):   # as `kmon run` had them: interrupt what it starts
            signal.signal(sig, signal.default_int_handler)
    if stopped.is_set():
        raise KeyboardInterrupt()
    if warned:
        log.info("the cluster at %s answers now", given.bootstrap_servers)
    for line in found.said:
        log.info("%s", line)
    for line in found.warnings:
        log.warning("%s", line)
    return found.cluster


def _given(args: argparse.Namespace) -> Given:
    return given(args.bootstrap_servers, args.command_config, args.controllers, args.zookeeper, args.zk_client_config)


def given(bootstrap_servers: str, command_config: Path | None, controllers: str | None,
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
    return Given(bootstrap_servers=bootstrap_servers, client=settings, security=security,
                 controllers=controllers or "", zookeeper="".join(zookeeper) if zookeeper else "",
                 command_config=str(command_config.resolve()) if command_config else "",
                 zk_client_config=str(zk_client_config.resolve()) if zk_client_config else "",
                 why_no_security=why_not)
