"""A cluster kmon watches but did not start (`kmon run --bootstrap-servers`, or each of a config file's
clusters with `kmon run --config`): what kmon found out about
it, and so which collector follows its control plane and from where. Written by the discovery
(cli/discovery.py), kept in the stack's state, read when the collectors are started."""
from __future__ import annotations

from dataclasses import dataclass

KRAFT, ZOOKEEPER, MIGRATION = "kraft", "zookeeper", "migration"
MODE_WORDS = {KRAFT: "KRaft mode", ZOOKEEPER: "ZooKeeper mode",
              MIGRATION: "ZooKeeper mode, migrating to KRaft (zookeeper.metadata.migration.enable)"}


@dataclass(frozen=True)
class WatchedCluster:
    name: str                  # the `cluster` label of its series
    mode: str                  # KRAFT, ZOOKEEPER, or MIGRATION (ZooKeeper brokers, a KRaft controller)
    bootstrap_servers: str     # the brokers, as the user gave them
    cluster_id: str = ""
    controllers: str = ""      # KRAFT: the quorum's controller listeners, HOST:PORT,...
    exact: bool = False        # KRAFT: kmon may follow the metadata log there; else the brokers are sampled
    zookeeper: str = ""        # ZOOKEEPER, MIGRATION: zookeeper.connect, with its chroot
    command_config: str = ""   # the Kafka client properties file, absolute ("" none)
    zk_client_config: str = ""   # ZooKeeper's client properties file, absolute ("" none)
