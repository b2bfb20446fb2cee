"""``kmon stream``: the Spark views and their /metrics."""
from __future__ import annotations

import argparse
import os
import shutil
import threading
from pathlib import Path
from typing import get_args

from kmon import flags, logs
from kmon.client_config import ClientConfigError, KafkaClientProperties
from kmon.config_file import config_flag, parse_with_file
from kmon.class_archive import archive_options
from kmon.signals import stop_on_signals
from kmon.toolchain import find_toolchain
from kmon.web_config import WebConfig
from streaming.cluster_share import ClusterShare, parse_cluster_share
from streaming.config import StreamConfig
from streaming.views import ViewOptions
from streaming.views.cluster import Detail


def add_stream_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stream", help="the Spark Structured Streaming views, exported to Prometheus",
                       description="Read the events topic with Spark's Kafka source, keep the ISR, leader "
                                   "balance, controller and consumer-group views in Spark state "
                                   "(RocksDB, checkpointed) and serve them on /metrics.")
    flags.flag(p, "--bootstrap-servers", type=flags.host_port_list,
                help="Kafka cluster holding the events topic (required)")
    flags.flag(p, "--events-topic", default=StreamConfig.events_topic, help="events topic")
    flags.flag(p, "--cluster-share", default=str(ClusterShare()), type=cluster_share, metavar="I/N",
                help="take only share I of N of the events topic's clusters (a cluster's share: the CRC-32 of "
                     "its name mod N), for a fleet split among N stream apps, each with its own checkpoint")
    config_flag(p, "the events cluster and the stream's settings")
    flags.flag(p, "--events-command-config", type=flags.readable_file, metavar="FILE",
                help="Kafka client properties for the events cluster (security.protocol, sasl.*, ssl.*), "
                     "as the Kafka tools' --command-config, given to Spark's Kafka source; each can also be "
                     "set as KMON_EVENTS_KAFKA_<KEY>")
    flags.flag(p, "--checkpoint", default=StreamConfig(bootstrap_servers="").checkpoint, type=Path,
                help="checkpoint directory (Spark state + the views' record log)")
    flags.flag(p, "--history-dir", type=Path, metavar="DIR",
                help="where the transition history is written (kmon history reads it; default: <checkpoint>/history)")
    flags.flag(p, "--history-retention-days", default=StreamConfig.history_retention_days, type=flags.positive_int,
                help="whole days of history kept")
    flags.flag(p, "--metrics-host", default=StreamConfig.metrics_host, help="address of the /metrics endpoint")
    flags.flag(p, "--metrics-port", default=StreamConfig.metrics_port, type=flags.port, help="port of the /metrics endpoint")
    flags.web_flag(p)
    flags.flag(p, "--master", default=StreamConfig.master, help="Spark master")
    flags.flag(p, "--trigger-interval", default=StreamConfig.trigger_seconds, type=float, help="seconds between micro-batches")
    flags.flag(p, "--partition-detail", default=ViewOptions.detail, choices=get_args(Detail),
                help="which partitions get per-partition series")
    flags.flag(p, "--default-min-isr", default=ViewOptions.default_min_isr, type=flags.positive_int,
                help="min.insync.replicas of topics without that config (the brokers' default)")
    flags.flag(p, "--max-offsets-per-trigger", default=StreamConfig.max_offsets_per_trigger, type=flags.positive_int,
                help="events read per micro-batch at most")
    flags.flag(p, "--driver-memory", default=StreamConfig.driver_memory, help="Spark driver memory")
    flags.flag(p, "--kafka-timeout", default=StreamConfig.kafka_timeout_s, type=flags.positive_float, metavar="SECONDS",
                help="timeout of each Kafka call of Spark's Kafka source: when a leader of the events "
                     "topic dies, the views stall this long, or until its partitions have a new leader")
    flags.flag(p, "--kafka-outage-limit", default=StreamConfig.kafka_outage_limit_s, type=flags.positive_float, metavar="SECONDS",
                help="the query (and kmon stream) fails when the events cluster is unreachable this long")
    flags.flag(p, "--startup-timeout", default=StreamConfig.startup_timeout_s, type=flags.non_negative_float, metavar="SECONDS",
                help="exit 1 when the events cluster has not answered this long after the start (Spark starts "
                     "only once it has; 0: keep retrying, and say so in the log)")
    flags.flag(p, "--stall-timeout", default=StreamConfig.stall_timeout_s, type=flags.non_negative_float, metavar="SECONDS",
                help="exit 1 when one micro-batch has run this long (a batch stuck where nothing times out), "
                     "for the service manager to start kmon again from its checkpoint; 0: never")
    p.set_defaults(handler=cmd_stream)


def stream_config(args: argparse.Namespace) -> StreamConfig:
    if not args.bootstrap_servers:
        raise SystemExit("kmon stream: --bootstrap-servers (or KMON_BOOTSTRAP_SERVERS) is required")
    # Under spark-submit (which starts Python with a gateway to its JVM) the master and
    # the jars are spark-submit's: --master and --jars there.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    try:
        client = KafkaClientProperties.load("events", args.events_command_config, os.environ,
                                            getattr(args, "events_client", None))
    except ClientConfigError as e:
        raise SystemExit(f"kmon stream: {e}") from None
    return StreamConfig(
        bootstrap_servers=args.bootstrap_servers, events_topic=args.events_topic, cluster_share=args.cluster_share,
        checkpoint=args.checkpoint, metrics_host=args.metrics_host, metrics_port=args.metrics_port,
        web=args.web_config_file or WebConfig(),
        master=None if submitted else args.master, trigger_seconds=args.trigger_interval,
        max_offsets_per_trigger=args.max_offsets_per_trigger, driver_memory=args.driver_memory,
        kafka_timeout_s=args.kafka_timeout, kafka_outage_limit_s=args.kafka_outage_limit,
        startup_timeout_s=args.startup_timeout, stall_timeout_s=args.stall_timeout,
        history_dir=args.history_dir, history_retention_days=args.history_retention_days,
        views=ViewOptions(detail=args.partition_detail, default_min_isr=args.default_min_isr),
        spark_jars=() if submitted else tuple(find_toolchain().spark_jar_list()),
        driver_java_options=() if submitted else tuple(driver_class_archive(find_toolchain().cache / "cds")),
        kafka_client=client)


def cluster_share(text: str) -> ClusterShare:
    try:
        return parse_cluster_share(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def driver_class_archive(directory: Path) -> list[str]:
    """Class-data sharing for the Spark driver's JVM (kmon/class_archive.py). Spark's launcher makes its
    class path, so the kind is named by pyspark's jars and the java it runs (JAVA_HOME's, else PATH's)."""
    import pyspark

    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or " " in str(directory):   # spark.driver.extraJavaOptions is split on spaces
        return []
    jars = Path(pyspark.__file__).parent / "jars"
    return archive_options(directory, os.path.realpath(java), f"{jars}/*", "org.apache.spark.deploy.SparkSubmit",
                           checked=False)


def cmd_stream(args: argparse.Namespace) -> int:
    from streaming.app import StreamApp, run_until   # the app and what it runs, only where it runs

    stop = threading.Event()
    stop_on_signals(stop)
    return run_until(StreamApp(stream_config(args)), stop)


def main(argv: list[str]) -> int:
    """``kmon stream`` alone, for spark-submit: the other commands (and kazoo, grafana-client
    and the local stack they load) stay out of the Spark driver."""
    p = argparse.ArgumentParser(prog="kmon")
    logs.flag(p)
    add_stream_parser(p.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parse_with_file(p, ["stream", *argv], lambda args: "stream")
    logs.configure(args.log_level)
    return args.handler(args)
