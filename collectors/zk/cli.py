"""``kmon collect zk``: the ZooKeeper collector's own flags.

The flags every collector shares and the process around the collector belong to ``cli.collect``.
"""
from __future__ import annotations

import argparse

from kmon import flags
from kmon.client_config import ZK_ENV_PREFIX


def add_zk_flags(parser: argparse.ArgumentParser) -> None:
    flags.flag(parser, "--zookeeper", type=flags.zk_connect, metavar="HOST:PORT[,HOST:PORT][/chroot]",
               help="the cluster's zookeeper.connect (required)")
    flags.flag(parser, "--zk-client-config", type=flags.readable_file, metavar="FILE",
               help="ZooKeeper client properties as Kafka names them (zookeeper.ssl.*), plus "
                    "zookeeper.sasl.jaas.config and zookeeper.auth=digest:user:password; "
                    f"each can also be set as {ZK_ENV_PREFIX}<KEY>")
