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

# Kafka 4.x logs through log4j2 (log4j-slf4j-impl, deploy/maven/kafka4): the same, in its format.
# Without its own shutdown hook, log4j2 keeps logging while the node shuts down (else the log
# ends mid-shutdown, with "Unable to register Log4j shutdown hook because JVM is shutting down").
LOG4J2 = """status = warn
shutdownHook = disable
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = INFO
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
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


@dataclass(frozen=True)
class KraftProfile:
    """Timing of a KRaft cluster (Kafka 4.x) and how it is formatted. ``fast`` detects failures in
    seconds and snapshots and cleans the metadata log often, for tests and demos."""
    broker_session_timeout_ms: int = 9000      # a broker not heartbeating this long is fenced
    broker_heartbeat_interval_ms: int = 2000
    election_timeout_ms: int = 1000            # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000               # a voter not hearing its leader this long calls an election
    replica_lag_time_max_ms: int = 30000
    node_heap: str = "512m"
    extra_props: dict[str, str] = field(default_factory=dict)
    # feature levels given to the storage tool at format (--feature name=level), e.g.
    # {"eligible.leader.replicas.version": 0} turns ELR off; a formatted node keeps its own
    features: dict[str, int] = field(default_factory=dict)

    @classmethod
    def fast(cls) -> "KraftProfile":
        # a dead broker is fenced after 5 s; a dead quorum leader is replaced within ~2-3 s (Kafka's
        # own election and fetch timeouts are that short already)
        return cls(broker_session_timeout_ms=5000, broker_heartbeat_interval_ms=1000,
                   election_timeout_ms=1000, fetch_timeout_ms=2000, replica_lag_time_max_ms=5000,
                   node_heap="384m",
                   extra_props={
                       # the tests run elections themselves; keep the controller from undoing them
                       "auto.leader.rebalance.enable": "false",
                       # A snapshot every 5 s (the active controller writes a no-op record every 500 ms,
                       # so there is always something new), or sooner after 16 KiB of records...
                       "metadata.log.max.snapshot.interval.ms": "5000",
                       "metadata.log.max.record.bytes.between.snapshots": "16384",
                       # ...and each cleaning pass (every 60 s from the node's start: a fixed timer in
                       # 4.3) deletes the snapshots older than 5 s and moves the log start up to the
                       # oldest one kept: the offset of a reader that stops is cleaned away within ~65 s
                       # (~35 s on average). Segments roll every 30 s so that their files go too
                       # (metadata.log.segment.bytes cannot go below 8 MiB).
                       "metadata.max.retention.ms": "5000",
                       "metadata.log.segment.ms": "30000",
                       # the group protocols of Kafka 4 fence a member 6 s after its last heartbeat
                       **{f"group.{kind}.{name}": value for kind in ("consumer", "share", "streams")
                          for name, value in (("min.session.timeout.ms", "5000"), ("session.timeout.ms", "6000"),
                                              ("min.heartbeat.interval.ms", "500"),
                                              ("heartbeat.interval.ms", "1000"))},
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


@dataclass(frozen=True)
class KraftNode:
    """One node of a KRaft cluster: a broker (PLAINTEXT listener), a controller (CONTROLLER
    listener, a voter of the metadata quorum) or both in one JVM (combined mode)."""
    node_id: int
    broker_port: int = 0       # 0: not a broker
    controller_port: int = 0   # 0: not a controller
    mtls_port: int = 0         # a secure controller's listener for clients by certificate; 0: none

    @property
    def roles(self) -> str:
        return ",".join(role for role, port in (("broker", self.broker_port), ("controller", self.controller_port))
                        if port)


def quorum_voters(nodes: list[KraftNode]) -> str:
    """controller.quorum.voters: a static quorum of every controller (kraft.version 0)."""
    return ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes if n.controller_port)


def kraft_node_properties(node: KraftNode, voters: str, log_dir: Path, brokers: int, profile: KraftProfile,
                          extra: dict[str, str] | None = None) -> str:
    """A Kafka 4.x node of the monitored cluster; ``brokers``: how many brokers the cluster has."""
    rf = min(3, brokers)
    listeners = [f"{name}://127.0.0.1:{port}" for name, port in
                 (("PLAINTEXT", node.broker_port), ("CONTROLLER", node.controller_port)) if port]
    values: dict[str, object] = {
        "process.roles": node.roles,
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "listeners": ",".join(listeners),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        # every node gets all the timing: the controllers fence on the session, the brokers heartbeat
        "controller.quorum.election.timeout.ms": profile.election_timeout_ms,
        "controller.quorum.fetch.timeout.ms": profile.fetch_timeout_ms,
        "broker.session.timeout.ms": profile.broker_session_timeout_ms,
        "broker.heartbeat.interval.ms": profile.broker_heartbeat_interval_ms,
        "replica.lag.time.max.ms": profile.replica_lag_time_max_ms,
        **_small_server(log_dir, rf, offsets_partitions=10),
    }
    if node.broker_port:
        values.update({
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "default.replication.factor": rf,
        })
    values.update(profile.extra_props)
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


def scrape_security(ca_file: Path, username: str, password_file: Path) -> dict[str, object]:
    """How Prometheus scrapes kmon's endpoints behind the secured stack's web config (stack/secure.py)."""
    return {"scheme": "https", "tls_config": {"ca_file": str(ca_file)},
            "basic_auth": {"username": username, "password_file": str(password_file)}}


def prometheus_config(stream_targets: list[str], collector_targets: list[str],
                      alertmanager: str, security: dict[str, object] | None = None) -> str:
    filled = {
        "{{STREAM_TARGETS}}": json.dumps(stream_targets),
        "{{COLLECTOR_TARGETS}}": json.dumps(collector_targets),
        "{{ALERTMANAGER}}": json.dumps([alertmanager]),
        "{{RULES_DIR}}": str(RULES_DIR),
        # each job's own settings, as JSON flow mappings (YAML reads them as they are)
        "{{SCRAPE_SECURITY}}": "".join(f"\n    {key}: {json.dumps(v)}" for key, v in (security or {}).items()),
    }

    def fill(line: str) -> str:
        if line.lstrip().startswith("#"):   # the header names the placeholders
            return line
        for placeholder, value in filled.items():
            line = line.replace(placeholder, value)
        return line
    return "".join(fill(line) for line in PROMETHEUS_TEMPLATE.read_text().splitlines(keepends=True))
