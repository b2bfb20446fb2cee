"""Kafka clusters as their users run them, for `kmon run --bootstrap-servers`: plain ``kafka.Kafka`` and
ZooKeeper processes from properties files written here, with listener names of their own, none of
kmon's stack code. Every process dies with the test process, and ``stop`` ends them on any outcome."""
from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)

from kmon.signals import die_with_parent
from kmon.toolchain import Toolchain
from stack.configs import LOG4J, LOG4J2
from stack.probes import four_letter, kraft_cluster_id
from stack.process import PortPicker, wait_until

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
FAST = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.replication.factor": "2",
        "transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1",
        "replica.lag.time.max.ms": "5000", "num.partitions": "1"}


@dataclass
class PlainCluster:
    dir: Path
    tools: Toolchain
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    picker: PortPicker = field(default_factory=PortPicker)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for name, p in self.ports.items() if name.startswith("broker-"))

    def _start(self, name: str, argv: list[str]) -> None:
        with open(self.dir / f"{name}.log", "ab") as out:
            self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                start_new_session=True, preexec_fn=die_with_parent)

    def _write(self, name: str, props: dict[str, str]) -> Path:
        path = self.dir / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(30)

    def alive(self) -> list[str]:
        return sorted(name for name, p in self.procs.items() if p.poll() is None)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs.values():
            p.wait(30)

    def wait_serving(self, brokers: set[int], client: dict[str, str] | None = None, timeout: float = 120) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0, **(client or {})})
        deadline = time.monotonic() + timeout
        while True:
            try:
                if set(admin.list_topics(timeout=2).brokers) >= brokers:
                    return
            except KafkaException:
                pass
            if dead := [n for n, p in self.procs.items() if p.poll() is not None]:
                raise RuntimeError(f"{dead} exited; see {self.dir}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"brokers {brokers} not serving after {timeout} s; see {self.dir}")
            time.sleep(0.5)

    # ------------------------------------------------------------------ KRaft, dedicated controllers
    def start_kraft(self, brokers: int = 2, controller_id: int = 3001, secured: bool = False) -> None:
        """One dedicated controller on listener CTL and ``brokers`` broker-only nodes on listener CLIENTS:
        names neither CONTROLLER nor PLAINTEXT, as a user's may be. ``secured``: both listeners SASL
        (PLAIN), ACLs on, and user kmon granted DESCRIBE on the cluster only (not CLUSTER_ACTION, not
        DESCRIBE_CONFIGS); ``client_config`` is then its client properties file."""
        ctl = self.ports["controller"] = self.picker.pick()
        for i in range(1, brokers + 1):
            self.ports[f"broker-{i}"] = self.picker.pick()
        protocol = "SASL_PLAINTEXT" if secured else "PLAINTEXT"
        common = {"controller.quorum.voters": f"{controller_id}@127.0.0.1:{ctl}", "controller.listener.names": "CTL",
                  "listener.security.protocol.map": f"CTL:{protocol},CLIENTS:{protocol}",
                  **(self._sasl() if secured else {})}
        nodes = {"controller": {**common, "process.roles": "controller", "node.id": str(controller_id),
                                "listeners": f"CTL://127.0.0.1:{ctl}", "broker.session.timeout.ms": "6000",
                                "log.dirs": str(self.dir / "controller-data")}}
        for i in range(1, brokers + 1):
            port = self.ports[f"broker-{i}"]
            nodes[f"broker-{i}"] = {**common, **FAST, "process.roles": "broker", "node.id": str(i),
                                    "listeners": f"CLIENTS://127.0.0.1:{port}",
                                    "advertised.listeners": f"CLIENTS://127.0.0.1:{port}",
                                    "inter.broker.listener.name": "CLIENTS", "broker.heartbeat.interval.ms": "1000",
                                    "log.dirs": str(self.dir / f"broker-{i}-data")}
        cluster_id = kraft_cluster_id()
        (self.dir / "log4j2.properties").write_text(LOG4J2)
        java = [self.tools.java, "-Xmx384m", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}", "-cp", self.tools.kafka4_classpath]
        for name, props in nodes.items():
            cfg = self._write(name, props)
            subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(cfg)],
                           check=True, capture_output=True, timeout=120)
        for name in nodes:
            self._start(name, [*java, "kafka.Kafka", str(self.dir / f"{name}.properties")])
        self.wait_serving(set(range(1, brokers + 1)), self.admin_client if secured else {})
        if secured:
            self._grant_kmon_describe()

    # ------------------------------------------------------------------ SASL PLAIN and ACLs
    admin_client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                    "sasl.password": "admin-secret"}

    @property
    def client_config(self) -> Path:
        """kmon's client properties, as the Kafka tools take them."""
        path = self.dir / "kmon-client.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        f"sasl.jaas.config={PLAIN} required username=\"kmon\" password=\"kmon-secret\";\n")
        return path

    @staticmethod
    def _sasl() -> dict[str, str]:
        jaas = (f'{PLAIN} required username="admin" password="admin-secret" user_admin="admin-secret" '
                'user_kmon="kmon-secret";')
        return {"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.controller.protocol": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.ctl.plain.sasl.jaas.config": jaas,
                "listener.name.clients.plain.sasl.jaas.config": jaas,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"}

    def _grant_kmon_describe(self) -> None:
        """DESCRIBE on the cluster for kmon: the cluster resource then has an ACL, and every other
        operation on it (CLUSTER_ACTION, DESCRIBE_CONFIGS) is denied to kmon."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0, **self.admin_client})
        binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:kmon", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        admin.create_acls([binding], request_timeout=30)[binding].result()

    # ------------------------------------------------------------------ ZooKeeper mode, under a chroot
    def start_zookeeper_mode(self, chroot: str, brokers: int = 2) -> None:
        zk = self.ports["zookeeper"] = self.picker.pick()
        (self.dir / "log4j.properties").write_text(LOG4J)
        java = [self.tools.java, "-Xmx384m", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}", "-cp", self.tools.kafka_classpath]
        cfg = self._write("zookeeper", {"dataDir": str(self.dir / "zookeeper-data"), "clientPort": str(zk),
                                        "clientPortAddress": "127.0.0.1", "admin.enableServer": "false",
                                        "maxClientCnxns": "0"})
        self._start("zookeeper", [*java, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)])
        # A broker gives up on a ZooKeeper it cannot reach within its connection timeout (the session
        # timeout, 6 s here); on a loaded machine ZooKeeper can take longer than that to listen.
        wait_until(lambda: four_letter(zk, "srvr").startswith("Zookeeper version"), 60, "zookeeper",
                   alive=lambda: self.procs["zookeeper"].poll() is None)
        for i in range(1, brokers + 1):
            port = self.ports[f"broker-{i}"] = self.picker.pick()
            cfg = self._write(f"broker-{i}", {
                **FAST, "broker.id": str(i), "zookeeper.connect": f"127.0.0.1:{zk}{chroot}",
                "zookeeper.session.timeout.ms": "6000", "listeners": f"CLIENTS://127.0.0.1:{port}",
                "advertised.listeners": f"CLIENTS://127.0.0.1:{port}", "inter.broker.listener.name": "CLIENTS",
                "listener.security.protocol.map": "CLIENTS:PLAINTEXT", "log.dirs": str(self.dir / f"broker-{i}-data")})
            self._start(f"broker-{i}", [*java, "kafka.Kafka", str(cfg)])
        self.wait_serving(set(range(1, brokers + 1)))
