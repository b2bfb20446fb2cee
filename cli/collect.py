"""``kmon collect ...``: run a collector as a long-lived process (SIGTERM stops it cleanly)."""
from __future__ import annotations

import argparse
import functools
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from cli.supervise import supervised
from collectors.groups.cli import add_groups_flags, groups_config
from collectors.kraft.config import KraftCollectorConfig, SampledConfig
from collectors.kraft.connection import ClientSecurity, ControllerError
from collectors.publisher import PublisherConfig
from kmon import flags
from kmon.config_file import config_flag
from kmon.client_config import ZK_ENV_PREFIX, ClientConfigError, KafkaClientProperties, ZooKeeperClientProperties
from kmon.flags import addresses
from kmon.reachability import watch
from kmon.signals import stop_on_signals

if TYPE_CHECKING:
    from collectors.groups.config import GroupsConfig
    from collectors.protocol import Collector, EventSink
    from collectors.runner import Running
    from collectors.telemetry import Telemetry

# A collector's own code (kazoo, the Admin API poller, the metadata log's reader) is imported by the
# process that runs it, not by its supervisor nor by the other commands: each process kmon starts
# pays for what it imports at every start.

log = logging.getLogger("kmon.collector")



def add_collect_parser(subparsers: argparse._SubParsersAction) -> None:
    collect = subparsers.add_parser("collect", help="run a collector that publishes events for one cluster",
                                    description="Collectors watch one Kafka cluster and publish state-carrying "
                                                "events to the events topic.")
    sources = collect.add_subparsers(dest="source", required=True, metavar="SOURCE")
    zk = sources.add_parser("zk", help="watch the cluster's ZooKeeper tree",
                            description="Watch Kafka's tree in ZooKeeper (controller, brokers, topics, "
                                        "partition states, admin requests) and publish one event per change, "
                                        "with a full snapshot on start and after every reconnect.")
    flags.flag(zk, "--zookeeper", type=flags.zk_connect, metavar="HOST:PORT[,HOST:PORT][/chroot]",
                help="the cluster's zookeeper.connect (required)")
    flags.flag(zk, "--zk-client-config", type=flags.readable_file, metavar="FILE",
                help="ZooKeeper client properties as Kafka names them (zookeeper.ssl.*), plus "
                     "zookeeper.sasl.jaas.config and zookeeper.auth=digest:user:password; "
                     f"each can also be set as {ZK_ENV_PREFIX}<KEY>")
    _output_flags(zk)
    zk.set_defaults(handler=functools.partial(cmd_collect_zk, zk))

    kraft = sources.add_parser("kraft", help="follow a KRaft cluster's metadata log (Kafka 4.x, KRaft-mode 3.x)",
                               description="Follow __cluster_metadata as an observer of the controller quorum "
                                           "(a Fetch as replica -1 on the controller listener) and publish one "
                                           "event per committed change, ordered by metadata offset, with the "
                                           "quorum's newest snapshot at start and after the log was cleaned "
                                           "below kmon's place. Needs CLUSTER_ACTION on the cluster there.")
    flags.flag(kraft, "--controllers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
               help="controller listeners of the quorum (controller.quorum.bootstrap.servers; required unless "
                    "--sampled)")
    flags.switch(kraft, "--sampled",
                 help="where the controllers cannot be reached: poll the brokers' metadata (--bootstrap-servers) "
                      "instead; each event is marked sampled and the changes between two samples that the leader "
                      "epochs prove are counted, not seen (README: The collectors)")
    flags.flag(kraft, "--bootstrap-servers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
               help="with --sampled: the cluster's brokers")
    flags.flag(kraft, "--sample-interval", default=SampledConfig.interval_s, type=flags.positive_float,
               metavar="SECONDS", help="with --sampled: seconds between two samples")
    flags.flag(kraft, "--command-config", type=flags.readable_file, metavar="FILE",
               help="Kafka client properties of the controller listener (security.protocol, sasl.*, ssl.*), as "
                    "the Kafka tools' --command-config; each can also be set as KMON_MONITORED_KAFKA_<KEY>")
    flags.flag(kraft, "--quorum-interval", default=KraftCollectorConfig.quorum_interval_s,
               type=flags.positive_float, metavar="SECONDS", help="how often to describe the quorum")
    flags.flag(kraft, "--quorum-progress-interval", default=KraftCollectorConfig.quorum_progress_interval_s,
               type=flags.positive_float, metavar="SECONDS",
               help="how often a quorum whose metadata log only went on (its high watermark, no other change) "
                    "is sent: each event is a micro-batch of the stream app; other changes are sent at once")
    _output_flags(kraft)
    kraft.set_defaults(handler=functools.partial(cmd_collect_kraft, kraft))

    groups = sources.add_parser("groups", help="consumer groups: Admin API poll and __consumer_offsets history",
                                description="Poll every consumer group's live state, members and lag through "
                                            "the Admin API, and read the coordinator's __consumer_offsets "
                                            "records so that every generation (rebalance) is an event, even "
                                            "between two polls.")
    add_groups_flags(groups)
    _output_flags(groups)
    groups.set_defaults(handler=functools.partial(cmd_collect_groups, groups))


def _output_flags(p: argparse.ArgumentParser) -> None:
    """Flags every collector shares: who it reports as, and where events and metrics go."""
    config_flag(p, "the cluster's entry (--cluster) and the events cluster")
    flags.flag(p, "--cluster", type=flags.cluster_name, help="the cluster's name in events and metrics (required)")
    flags.flag(p, "--events-bootstrap-servers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
                help="Kafka cluster holding the events topic (required)")
    flags.flag(p, "--events-topic", default=PublisherConfig.topic, type=flags.topic_name,
                help="events topic; created compacted if missing")
    flags.flag(p, "--events-command-config", type=flags.readable_file, metavar="FILE",
                help="Kafka client properties for the events cluster (security.protocol, sasl.*, ssl.*), "
                     "as the Kafka tools' --command-config; each can also be set as KMON_EVENTS_KAFKA_<KEY>")
    flags.flag(p, "--metrics-port", default=0, type=flags.port,
                help="port of /metrics and /healthz (0 = a free port, logged at start)")
    flags.flag(p, "--buffer-size", default=PublisherConfig.buffer_size, type=flags.positive_int,
                help="events kept while the events cluster is unreachable; beyond it the oldest are "
                     "dropped and a resync follows")
    flags.flag(p, "--startup-timeout", default=0.0, type=flags.non_negative_float, metavar="SECONDS",
                help="exit 1 when the monitored cluster or the events cluster has not answered this long "
                     "after the start (0: keep retrying, and say so in the log)")


def _require(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    missing = [f"--{name.replace('_', '-')} (or {flags.env_name(name)})"
               for name in names if getattr(args, name) is None]
    if missing:
        parser.error(f"missing {', '.join(missing)}")


def _events(parser: argparse.ArgumentParser, args: argparse.Namespace) -> PublisherConfig:
    client = kafka_client(parser, "events", args.events_command_config, getattr(args, "events_client", None))
    return PublisherConfig(bootstrap_servers=args.events_bootstrap_servers, topic=args.events_topic,
                           buffer_size=args.buffer_size, client=client.librdkafka())


def kafka_client(parser: argparse.ArgumentParser, role: str, path: Path | None,
                 inline: Mapping[str, str] | None = None) -> KafkaClientProperties:
    """One cluster's client properties (``inline``: a config file's); a bad file or setting ends the
    command with one line naming it."""
    try:
        client = KafkaClientProperties.load(role, path, os.environ, inline)
    except ClientConfigError as e:
        parser.error(str(e))
    unused = client.unused_by_librdkafka()
    if unused:
        log.info("%s cluster client properties kmon's librdkafka clients do not use: %s", role, ", ".join(unused))
    return client


def cmd_collect_groups(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _require(parser, args, "bootstrap_servers", "cluster", "events_bootstrap_servers")
    monitored = kafka_client(parser, "monitored", args.command_config, getattr(args, "monitored_client", None))
    groups, events = groups_config(args, monitored.librdkafka()), _events(parser, args)
    return supervised(args.argv, lambda: _collect_groups(groups, events, monitored, args))


def _collect_groups(groups: GroupsConfig, events: PublisherConfig, monitored: KafkaClientProperties,
                    args: argparse.Namespace) -> int:
    from collectors.groups.collector import GroupsCollector
    from collectors.runner import running

    with running(groups.cluster, lambda pub, tel: GroupsCollector(groups, pub, tel), events,
                 args.metrics_port) as collector:
        log.info("collecting consumer groups of cluster %r from %s (%s) into %s on %s; metrics on port %d; "
                 "SIGTERM or Ctrl-C stops", groups.cluster, groups.bootstrap_servers, monitored.describe(),
                 events.topic, events.bootstrap_servers, collector.metrics_port)
        code = _until_signal(collector, args.startup_timeout)
    log.info("stopped")
    return code


def cmd_collect_zk(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _require(parser, args, "zookeeper", "cluster", "events_bootstrap_servers")
    hosts, chroot = args.zookeeper
    try:
        client = ZooKeeperClientProperties.load(args.zk_client_config, os.environ)
    except ClientConfigError as e:
        parser.error(str(e))
    events = _events(parser, args)
    return supervised(args.argv, lambda: _collect_zk(hosts, chroot, client, events, args))


def _collect_zk(hosts: str, chroot: str, client: ZooKeeperClientProperties, events: PublisherConfig,
                args: argparse.Namespace) -> int:
    from collectors.runner import running
    from collectors.zk.collector import ZkCollector, ZkCollectorConfig

    zk = ZkCollectorConfig(hosts=hosts, chroot=chroot, cluster=args.cluster, client=client.kazoo())
    security = client.describe()
    with running(zk.cluster, lambda pub, tel: ZkCollector(zk, pub, tel), events, args.metrics_port,
                 probe_brokers=True) as collector:
        log.info("collecting cluster %r from ZooKeeper %s%s (%s) into %s on %s; metrics on port %d; "
                 "SIGTERM or Ctrl-C stops", zk.cluster, zk.hosts, zk.chroot or "", security, events.topic,
                 events.bootstrap_servers, collector.metrics_port)
        code = _until_signal(collector, args.startup_timeout)
    log.info("stopped")
    return code


def cmd_collect_kraft(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _require(parser, args, "bootstrap_servers" if args.sampled else "controllers", "cluster",
             "events_bootstrap_servers")
    client = kafka_client(parser, "monitored", args.command_config, getattr(args, "monitored_client", None))
    try:
        security = ClientSecurity.from_librdkafka(client.librdkafka())
    except ControllerError as e:
        parser.error(f"{client.describe()}: {e}")
    events = _events(parser, args)
    if args.sampled:
        sampled = SampledConfig(bootstrap=tuple(addresses(args.bootstrap_servers)), cluster=args.cluster,
                                security=security, interval_s=args.sample_interval)
        def sampling(pub: EventSink, tel: Telemetry) -> Collector:
            from collectors.kraft.sampled import SampledCollector
            return SampledCollector(sampled, pub, tel)
        return supervised(args.argv, lambda: _collect_kraft(
            sampled.cluster, sampling, f"the metadata of its brokers {sampled.address}, sampled",
            client.describe(), events, args))
    kraft = KraftCollectorConfig(controllers=tuple(addresses(args.controllers)), cluster=args.cluster,
                                 security=security, quorum_interval_s=args.quorum_interval,
                                 quorum_progress_interval_s=args.quorum_progress_interval)
    def following(pub: EventSink, tel: Telemetry) -> Collector:
        from collectors.kraft.collector import KraftCollector
        return KraftCollector(kraft, pub, tel)
    return supervised(args.argv, lambda: _collect_kraft(
        kraft.cluster, following, f"its metadata quorum {kraft.address}", client.describe(), events, args))


def _collect_kraft(cluster: str, make: Callable[[EventSink, Telemetry], Collector], source: str, security: str,
                   events: PublisherConfig, args: argparse.Namespace) -> int:
    from collectors.runner import running

    with running(cluster, make, events, args.metrics_port, probe_brokers=True) as collector:
        log.info("collecting cluster %r from %s (%s) into %s on %s; metrics on port %d; SIGTERM or Ctrl-C stops",
                 cluster, source, security, events.topic, events.bootstrap_servers, collector.metrics_port)
        code = _until_signal(collector, args.startup_timeout)
    log.info("stopped")
    return code


def _until_signal(run: Running, startup_timeout: float) -> int:
    """0 at SIGTERM/SIGINT, 1 when an address was not reached within ``startup_timeout``; meanwhile
    the log says which address cannot be reached."""
    stopped = threading.Event()
    stop_on_signals(stopped)
    return 0 if watch(stopped, (run.collector.reachability, run.publisher.reachability), startup_timeout) else 1
