"""How the stream app is configured (`kmon stream`'s flags take their defaults from here), apart from the
app itself, so that reading the flags does not import the app and what it runs."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kmon.client_config import KafkaClientProperties
from kmon.events import EVENTS_TOPIC
from kmon.web_config import WebConfig
from streaming.cluster_share import ClusterShare
from streaming.paths import default_checkpoint
from streaming.views import ViewOptions


@dataclass(frozen=True)
class StreamConfig:
    bootstrap_servers: str
    events_topic: str = EVENTS_TOPIC
    # the clusters of the events topic this app takes (a fleet split among apps); all by default
    cluster_share: ClusterShare = ClusterShare()
    checkpoint: Path = field(default_factory=default_checkpoint)
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 9308
    web: WebConfig = field(default_factory=WebConfig)   # /metrics' TLS and basic auth (--web-config-file)
    master: str | None = "local[*]"   # None: keep the master spark-submit set
    # A micro-batch of a few events takes longer than this (bench/README.md, "The delay"), so a
    # change waits at most a quarter of a second for its batch to start.
    trigger_seconds: float = 0.25
    # None: the local master's cores, else 4. Fixed in the checkpoint once the query has run.
    shuffle_partitions: int | None = None
    max_offsets_per_trigger: int = 200_000
    kafka_timeout_s: float = 10.0     # per Kafka call of the source; see kafka_source_options
    kafka_outage_limit_s: float = 300.0  # the query fails once the events cluster is away this long
    driver_memory: str = "1g"
    startup_timeout_s: float = 0.0    # run_until gives up when the events cluster did not answer this long; 0: never
    stall_timeout_s: float = 600.0    # run_until exits 1 when one micro-batch has run this long (stall.py); 0: never
    views: ViewOptions = ViewOptions()
    history_dir: Path | None = None    # None: <checkpoint>/history
    history_retention_days: int = 7
    spark_jars: tuple[str, ...] = ()
    driver_java_options: tuple[str, ...] = ()   # of the Spark driver's JVM, which pyspark starts
    # the events cluster's client properties (security.protocol, sasl.*, ssl.*) as Java names them
    kafka_client: KafkaClientProperties = field(default_factory=lambda: KafkaClientProperties("events"))
