"""``kmon collect ...``: run a collector as a long-lived process (SIGTERM stops it cleanly)."""
from __future__ import annotations

import argparse
import functools
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from cli.supervise import supervised
from collectors.groups.cli import add_groups_flags, groups_config
from collectors.kraft.cli import add_kraft_flags
from collectors.kraft.config import KraftCollectorConfig, SampledConfig
from collectors.kraft.connection import ClientSecurity, ControllerError
from collectors.publisher import PublisherConfig
from collectors.zk.cli import add_zk_flags
from kmon import flags
from kmon.config_file import config_flag
from kmon.client_config import ClientConfigError, KafkaClientProperties, ZooKeeperClientProperties
from kmon.flags import addresses
from kmon.reachability import watch
from kmon.signals import stop_on_signals

if TYPE_CHECKING:
    from collectors.protocol import Collector, EventSink
    from collectors.runner import Running
    from collectors.telemetry import Telemetry

# A collector's own code (kazoo, the Admin API poller, the metadata log's reader) is imported by the
# process that runs it, not by its supervisor nor by the other commands: each process kmon starts
# pays for what it imports at every start.

log = logging.getLogger("kmon.collector")


@dataclass(frozen=True)
class Plan:
    """One collector process, as its flags make it: built by the supervisor and again by its child,
    which alone calls ``make`` (and so imports the collector's code)."""
    cluster: str
    make: Callable[[EventSink, Telemetry], Collector]
    reads: str       # where it reads the cluster, as its first line says
    security: str    # how it logs in there, said beside it
    probe_brokers: bool = False   # the runner probes the brokers the collector's events register


@dataclass(frozen=True)
class Source:
    """A source of events: its sub-command of `kmon collect`, its own flags (beside its code in
    collectors/<source>/cli.py), the flags it cannot run without, and its plan."""
    help: str
    description: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    required: Callable[[argparse.Namespace], tuple[str, ...]]
    plan: Callable[[argparse.ArgumentParser, argparse.Namespace], Plan]


def _zk_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Plan:
    hosts, chroot = args.zookeeper
    try:
        client = ZooKeeperClientProperties.load(args.zk_client_config, os.environ)
    except ClientConfigError as e:
        parser.error(str(e))

    def make(pub: EventSink, tel: Telemetry) -> Collector:
        from collectors.zk.collector import ZkCollector, ZkCollectorConfig
        return ZkCollector(ZkCollectorConfig(hosts=hosts, chroot=chroot, cluster=args.cluster,
                                             client=client.kazoo()), pub, tel)
    return Plan(args.cluster, make, f"ZooKeeper {hosts}{chroot}", client.describe(), probe_brokers=True)


def _kraft_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Plan:
    client = kafka_client(parser, "monitored", args.command_config, getattr(args, "monitored_client", None))
    try:
        security = ClientSecurity.from_librdkafka(client.librdkafka())
    except ControllerError as e:
        parser.error(f"{client.describe()}: {e}")
    if args.sampled:
        sampled = SampledConfig(bootstrap=tuple(addresses(args.bootstrap_servers)), cluster=args.cluster,
                                security=security, interval_s=args.sample_interval)

        def sampling(pub: EventSink, tel: Telemetry) -> Collector:
            from collectors.kraft.sampled import SampledCollector
            return SampledCollector(sampled, pub, tel)
        return Plan(args.cluster, sampling, f"the metadata of its brokers {sampled.address}, sampled",
                    client.describe(), probe_brokers=True)
    kraft = KraftCollectorConfig(controllers=tuple(addresses(args.controllers)), cluster=args.cluster,
                                 security=security, quorum_interval_s=args.quorum_interval,
                                 quorum_progress_interval_s=args.quorum_progress_interval)

    def following(pub: EventSink, tel: Telemetry) -> Collector:
        from collectors.kraft.collector import KraftCollector
        return KraftCollector(kraft, pub, tel)
    return Plan(args.cluster, following, f"its metadata quorum {kraft.address}", client.describe(),
                probe_brokers=True)


def _groups_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Plan:
    monitored = kafka_client(parser, "monitored", args.command_config, getattr(args, "monitored_client", None))
    groups = groups_config(args, monitored.librdkafka())

    def make(pub: EventSink, tel: Telemetry) -> Collector:
        from collectors.groups.collector import GroupsCollector
        return GroupsCollector(groups, pub, tel)
    return Plan(groups.cluster, make, f"the consumer groups of its brokers {groups.bootstrap_servers}",
                monitored.describe())


# The sources of events, by the name `kmon collect` and kmon run's wiring (stack.state.collector_sources)
# give them. A new source plugs in here: its flags and its plan.
SOURCES: dict[str, Source] = {
    "zk": Source(
        help="watch the cluster's ZooKeeper tree",
        description="Watch Kafka's tree in ZooKeeper (controller, brokers, topics, partition states, admin "
                    "requests) and publish one event per change, with a full snapshot on start and after every "
                    "reconnect.",
        add_flags=add_zk_flags, required=lambda args: ("zookeeper",), plan=_zk_plan),
    "kraft": Source(
        help="follow a KRaft cluster's metadata log (Kafka 4.x, KRaft-mode 3.x)",
        description="Follow __cluster_metadata as an observer of the controller quorum (a Fetch as replica -1 "
                    "on the controller listener) and publish one event per committed change, ordered by metadata "
                    "offset, with the quorum's newest snapshot at start and after the log was cleaned below "
                    "kmon's place. Needs CLUSTER_ACTION on the cluster there.",
        add_flags=add_kraft_flags,
        required=lambda args: ("bootstrap_servers",) if args.sampled else ("controllers",), plan=_kraft_plan),
    "groups": Source(
        help="consumer groups: Admin API poll and __consumer_offsets history",
        description="Poll every consumer group's live state, members and lag through the Admin API, and read "
                    "the coordinator's __consumer_offsets records so that every generation (rebalance) is an "
                    "event, even between two polls.",
        add_flags=add_groups_flags, required=lambda args: ("bootstrap_servers",), plan=_groups_plan),
}


def add_collect_parser(subparsers: argparse._SubParsersAction) -> None:
    collect = subparsers.add_parser("collect", help="run a collector that publishes events for one cluster",
                                    description="Collectors watch one Kafka cluster and publish state-carrying "
                                                "events to the events topic.")
    sub = collect.add_subparsers(dest="source", required=True, metavar="SOURCE")
    for name, source in SOURCES.items():
        p = sub.add_parser(name, help=source.help, description=source.description)
        source.add_flags(p)
        _output_flags(p)
        p.set_defaults(handler=functools.partial(cmd_collect, p, source))


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
    flags.web_flag(p)
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


def cmd_collect(parser: argparse.ArgumentParser, source: Source, args: argparse.Namespace) -> int:
    _require(parser, args, *source.required(args), "cluster", "events_bootstrap_servers")
    plan = source.plan(parser, args)
    events = _events(parser, args)
    return supervised(args.argv, lambda: _collect(plan, events, args))


def _collect(plan: Plan, events: PublisherConfig, args: argparse.Namespace) -> int:
    from collectors.runner import running
    from kmon.gc_tuning import collect_less_often

    collect_less_often()   # a collector's image holds an object or more per partition, long-lived all
    with running(plan.cluster, plan.make, events, args.metrics_port, probe_brokers=plan.probe_brokers,
                 web=args.web_config_file) as collector:
        log.info("collecting cluster %r from %s (%s) into %s on %s; metrics on port %d; SIGTERM or Ctrl-C stops",
                 plan.cluster, plan.reads, plan.security, events.topic, events.bootstrap_servers,
                 collector.metrics_port)
        code = _until_signal(collector, args.startup_timeout)
    log.info("stopped")
    return code


def _until_signal(run: Running, startup_timeout: float) -> int:
    """0 at SIGTERM/SIGINT, 1 when an address was not reached within ``startup_timeout``; meanwhile
    the log says which address cannot be reached."""
    stopped = threading.Event()
    stop_on_signals(stopped)
    return 0 if watch(stopped, (run.collector.reachability, run.publisher.reachability), startup_timeout) else 1
