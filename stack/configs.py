"""Configuration files of the stack's servers (pure: text in, text out)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# deploy/ in a checkout (through the stack/deploy link), the package's copy in a wheel
DEPLOY = (Path(__file__).parent / "deploy").resolve()
PROMETHEUS_TEMPLATE = DEPLOY / "prometheus" / "prometheus.yml.tmpl"
RULES_DIR = DEPLOY / "prometheus" / "rules"
ALERTMANAGER_CONFIG = DEPLOY / "alertmanager" / "alertmanager.yml"
EVENTS_NODE_ID = 1

# Kafka logs through log4j 1 (reload4j); everything to stdout, which spawn() sends to a file.
LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=INFO
log4j.logger.org.apache.zookeeper=INFO
log4j.logger.kafka.log.LogCleaner=WARN
"""


@dataclass(frozen=True)
class Profile:
    """Timing of the stack. ``fast`` detects failures in seconds, for tests and demos."""
    zk_tick_ms: int = 2000
    zk_session_timeout_ms: int = 18000
    replica_lag_time_max_ms: int = 30000
    broker_heap: str = "512m"
    extra_broker_props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def fast(cls) -> "Profile":
        return cls(zk_tick_ms=500, zk_session_timeout_ms=6000, replica_lag_time_max_ms=5000,
                   broker_heap="384m",
                   extra_broker_props={
                       # a shrink is only noticed after the follower is lagging this long
                       "replica.lag.time.max.ms": "5000",
                       "zookeeper.connection.timeout.ms": "10000",
                       # the tests run elections themselves; keep the controller from undoing them
                       "auto.leader.rebalance.enable": "false",
                       "controlled.shutdown.max.retries": "1",
                       "controlled.shutdown.retry.backoff.ms": "500",
                   })


def properties(values: dict[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def zookeeper_properties(data_dir: Path, port: int, profile: Profile,
                         extra: dict[str, object] | None = None) -> str:
    return properties({
        "dataDir": data_dir,
        "clientPort": port,
        "clientPortAddress": "127.0.0.1",
        "tickTime": profile.zk_tick_ms,
        "maxClientCnxns": 0,
        "admin.enableServer": "false",
        # "ruok"/"srvr" let readiness checks and `stack status` ask ZooKeeper directly
        "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
        **(extra or {}),
    })


def _small_server(log_dir: Path, rf: int, offsets_partitions: int) -> dict[str, object]:
    """What every local Kafka server shares: small internal topics, few threads, a day of data."""
    return {
        "log.dirs": log_dir,
        "num.partitions": 1,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": offsets_partitions,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "num.network.threads": 2,
        "num.io.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "log.retention.hours": 24,
    }


def broker_properties(broker_id: int, port: int, log_dir: Path, zk_connect: str,
                      brokers: int, profile: Profile, extra: dict[str, object] | None = None) -> str:
    rf = min(3, brokers)
    values: dict[str, object] = {
        "broker.id": broker_id,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": profile.zk_session_timeout_ms,
        "replica.lag.time.max.ms": profile.replica_lag_time_max_ms,
        "default.replication.factor": rf,
        **_small_server(log_dir, rf, offsets_partitions=10),
        "delete.topic.enable": "true",
    }
    values.update(profile.extra_broker_props)
    values.update(extra or {})
    return properties(values)


def events_node_properties(port: int, controller_port: int, log_dir: Path) -> str:
    """kmon's own events cluster: one Kafka node in KRaft combined mode (no ZooKeeper), so that no
    failure of the monitored cluster (brokers, controller, ZooKeeper) stops the events."""
    return properties({
        "process.roles": "broker,controller",
        "node.id": EVENTS_NODE_ID,
        "controller.quorum.voters": f"{EVENTS_NODE_ID}@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        **_small_server(log_dir, 1, offsets_partitions=3),
    })


def prometheus_config(stream_targets: list[str], collector_targets: list[str],
                      alertmanager: str) -> str:
    text = PROMETHEUS_TEMPLATE.read_text()
    for placeholder, value in {
        "{{STREAM_TARGETS}}": json.dumps(stream_targets),
        "{{COLLECTOR_TARGETS}}": json.dumps(collector_targets),
        "{{ALERTMANAGER}}": json.dumps([alertmanager]),
        "{{RULES_DIR}}": str(RULES_DIR),
    }.items():
        text = text.replace(placeholder, value)
    return text
