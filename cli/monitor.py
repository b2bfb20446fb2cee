"""The monitor on a local stack: its collectors (zk or kraft, and groups) and the stream app, as
processes of the stack.

They join the stack's state file, so `kmon stack status` lists them, `kmon stack down`
stops them first, and tests kill and restart them like brokers (fault scenario 7).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from kmon.events import EVENTS_TOPIC
from kmon.watched import WatchedCluster
from stack.local import LocalStack
from stack.state import Collector, StackState

@dataclass(frozen=True)
class MonitorOptions:
    cluster: str = "local"
    events_topic: str = EVENTS_TOPIC
    trigger_seconds: float | None = None   # None: kmon stream's own default
    groups_poll_seconds: float = 5.0
    groups_lag_seconds: float | None = None   # None: kmon collect groups' own default
    groups_stall_window_seconds: float | None = None   # None: kmon collect groups' own default
    partition_detail: str | None = None       # None: kmon stream's own default (unhealthy partitions)
    spark_master: str = "local[2]"


def checkpoint_dir(stack_dir: Path) -> Path:
    """The checkpoint of the stream app on a local stack (its history is beside its state there)."""
    return stack_dir / "checkpoint"


def _kmon(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli", *args]


def collector_argv(stack: LocalStack, opts: MonitorOptions, collector: Collector, metrics_port: int) -> list[str]:
    """The command line of one collector of the stack."""
    s = stack.state
    assert s, "the stack is not up"
    w = collector.watched
    return _kmon("collect", collector.source, *_watched(s, opts, collector),
                 *(("--config", s.config_file) if s.config_file else ()),   # its client properties inline
                 "--cluster", w.name if w else opts.cluster,
                 "--events-bootstrap-servers", s.events_bootstrap_servers, "--events-topic", opts.events_topic,
                 *_events_client_flags(s), "--metrics-port", str(metrics_port), *_web_flags(s))


def _web_flags(s: StackState) -> tuple[str, ...]:
    """A secured stack serves kmon's own endpoints over TLS with a password too (stack/secure.py)."""
    return ("--web-config-file", str(s.secure_files.web_config)) if s.secure_files else ()


def _watched(s: StackState, opts: MonitorOptions, collector: Collector) -> list[str]:
    """The flags that say what one collector watches."""
    w, source = collector.watched, collector.source
    bootstrap = w.bootstrap_servers if w else s.bootstrap_servers
    client = _kafka_client_flags(s, w)
    if source == "groups":
        lag = ("--lag-interval", str(opts.groups_lag_seconds)) if opts.groups_lag_seconds else ()
        window = ("--stall-window", str(opts.groups_stall_window_seconds)) if opts.groups_stall_window_seconds else ()
        return ["--bootstrap-servers", bootstrap, "--poll-interval", str(opts.groups_poll_seconds), *lag, *window,
                *client]
    if w and source == "kraft" and not w.exact:   # kmon may not follow the metadata log
        return ["--sampled", "--bootstrap-servers", bootstrap, *client]
    if source == "kraft":   # the quorum itself: under KRaft the active controller is its leader
        return ["--controllers", w.controllers if w else s.controllers, *client]
    zk_client = w.zk_client_config if w else str(s.secure_files.zk_client) if s.secure_files else ""
    return ["--zookeeper", w.zookeeper if w else s.zk_connect,
            *(("--zk-client-config", zk_client) if zk_client else ())]


def _kafka_client_flags(s: StackState, w: WatchedCluster | None) -> tuple[str, ...]:
    """--command-config of the monitored cluster, where it has one."""
    path = w.command_config if w else str(s.secure_files.kafka_client) if s.secure_files else ""
    return ("--command-config", path) if path else ()


def _events_client_flags(s: StackState) -> tuple[str, ...]:
    return ("--events-command-config", s.events_command_config) if s.events_command_config else ()


def start_monitor(stack: LocalStack, opts: MonitorOptions) -> None:
    """Start what is not running yet: the collectors (zk or kraft, and groups, of each cluster), then the
    stream app."""
    s = stack.state
    assert s, "the stack is not up"
    for collector in s.collectors():
        port = s.collector_ports[collector.key]
        if f"collector-{collector.key}" not in s.components:
            stack.add_service(f"collector-{collector.key}", collector_argv(stack, opts, collector, port), port,
                              marker=f"--metrics-port {port}", ready_url=f"{s.scheme}://127.0.0.1:{port}/healthz")
    if "stream" not in s.components:
        port = s.stream_port
        stack.add_service("stream", _kmon(
            "stream", "--bootstrap-servers", s.events_bootstrap_servers, "--events-topic", opts.events_topic,
            *(("--config", s.config_file) if s.config_file else ()), *_events_client_flags(s),
            "--checkpoint", str(checkpoint_dir(stack.dir)),
            "--metrics-host", "127.0.0.1",
            "--metrics-port", str(port), *_web_flags(s), "--master", opts.spark_master,
            *(() if opts.trigger_seconds is None else ("--trigger-interval", str(opts.trigger_seconds))),
            *(() if opts.partition_detail is None else ("--partition-detail", opts.partition_detail))),
            port, marker=f"--metrics-port {port}", ready_url=f"{s.scheme}://127.0.0.1:{port}/metrics")
