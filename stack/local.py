"""A real Kafka cluster (ZooKeeper mode) plus Prometheus and Alertmanager, as local processes.

Beside the monitored cluster runs kmon's own events cluster (one KRaft node, component
``events``), so the monitored brokers, controller and ZooKeeper can all die while kmon's
events still flow.

Everything a stack started is recorded in ``<dir>/stack.json``; ``down`` stops exactly
those processes (checked against their command lines, so a recycled pid is never hit).

A directory that held a stack is resumed by ``up``: ZooKeeper's and the brokers' data, kmon's
events node, Prometheus' data and the monitor's checkpoint are kept, and each server gets its
earlier port back where it is free (so Prometheus' series and the printed addresses continue).
``up(fresh=True)`` deletes the directory first.
"""
from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterator

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kmon.client_config import KafkaClientProperties, ZooKeeperClientProperties
from kmon.toolchain import Toolchain
from stack import configs
from stack.owner import Busy, OwnerLock
from stack.process import cmdline, free_port, pid_alive, port_free, spawn, stop, wait_until
from stack.secure import SecureFiles

log = logging.getLogger("kmon.stack")

STATE_FILE = "stack.json"
EVENTS = "events"   # the component name of kmon's own events cluster
JVM_OPTS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=50", "-Djava.awt.headless=true",
            "-XX:+ExitOnOutOfMemoryError"]


class StackError(RuntimeError):
    pass


@dataclass
class Component:
    name: str
    port: int
    argv: list[str]
    log: str
    marker: str          # unique string in the process's command line (its config file)
    pid: int = 0
    ready_url: str = ""  # HTTP endpoint answering 200 once the process serves

    def alive(self) -> bool:
        return self.pid > 0 and pid_alive(self.pid)


@dataclass
class StackState:
    dir: Path
    chroot: str
    brokers: int
    fast: bool
    # ports reserved at `up` for the monitor's processes, so Prometheus is configured once
    stream_port: int
    collector_ports: dict[str, int]   # collector source (zk, groups) -> its /metrics port
    components: dict[str, Component] = field(default_factory=dict)
    secure: bool = False   # the monitored cluster on SASL_SSL and ZooKeeper with SASL and ACLs (secure.py)

    @property
    def secure_files(self) -> SecureFiles | None:
        return SecureFiles(self.dir / "secure") if self.secure else None

    def kafka_client(self) -> dict[str, str]:
        """librdkafka settings a client of the monitored cluster needs (none unless secure)."""
        files = self.secure_files
        return KafkaClientProperties.load("monitored", files.kafka_client, {}).librdkafka() if files else {}

    def zk_client(self) -> dict[str, object]:
        """KazooClient arguments for the stack's ZooKeeper (none unless secure)."""
        files = self.secure_files
        return ZooKeeperClientProperties.load(files.zk_client, {}).kazoo() if files else {}

    @property
    def zk_address(self) -> str:
        return f"127.0.0.1:{self.components['zookeeper'].port}"

    @property
    def zk_connect(self) -> str:
        return self.zk_address + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        """The monitored cluster's brokers."""
        return ",".join(f"127.0.0.1:{c.port}" for n, c in self.components.items()
                        if n.startswith("broker-"))

    @property
    def events_bootstrap_servers(self) -> str:
        """Where kmon's events go: its own cluster, or the monitored one when the stack has none."""
        events = self.components.get(EVENTS)
        return f"127.0.0.1:{events.port}" if events else self.bootstrap_servers

    def url(self, name: str) -> str | None:
        c = self.components.get(name)
        return f"http://127.0.0.1:{c.port}" if c else None

    def port_of(self, name: str) -> int:
        """The port ``name`` had (0 if it had none): a resumed stack asks for it again."""
        c = self.components.get(name)
        return c.port if c else 0

    def save(self) -> None:
        path = self.dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, default=str))
        tmp.replace(path)

    @classmethod
    def load(cls, directory: Path) -> "StackState | None":
        """The state ``up`` wrote, or None where there is none. A file this kmon cannot read (half
        written, from another version) raises StackError saying what to do."""
        path = directory / STATE_FILE
        try:
            raw = json.loads(path.read_text())
            raw["dir"] = Path(raw["dir"])
            raw["components"] = {k: Component(**_known(Component, v)) for k, v in raw["components"].items()}
            return cls(**_known(cls, raw))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise StackError(f"{path} is not a stack state this kmon can read ({type(e).__name__}: {e}); if "
                             f"nothing of that stack still runs, `kmon run --fresh --dir {directory}` starts "
                             "over (it deletes that directory)") from None


def _known(cls: type, raw: dict) -> dict:
    """The fields of ``cls`` in ``raw``: keys an older or newer kmon wrote are left out, and a
    missing field with a default takes it (a missing field without one fails in ``cls(...)``)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in raw.items() if k in names}


@dataclass(frozen=True)
class StackRequest:
    brokers: int = 3
    chroot: str = ""
    fast: bool = False
    prometheus: bool = True
    zk_port: int = 0          # 0 = a free port
    first_broker_port: int = 0
    events_cluster: bool = True   # False: kmon's events travel on the monitored cluster itself
    secure: bool = False          # SASL_SSL brokers, ZooKeeper with SASL and ACLs (see secure.py)
    profile: configs.Profile | None = None   # timing; None: Profile.fast() or Profile() after ``fast``
    # extra JVM options of each monitored broker by id (e.g. a Java agent on a port of its own)
    broker_jvm_options: Callable[[int], list[str]] | None = None

    def timing(self) -> configs.Profile:
        if self.profile is not None:
            return self.profile
        return configs.Profile.fast() if self.fast else configs.Profile()


class LocalStack:
    def __init__(self, directory: Path, toolchain: Toolchain, die_with_parent: bool = False,
                 command: str | None = None):
        """``die_with_parent``: the stack lives only as long as this process (`kmon run`, a test),
        which owns the directory until ``down``; ``command`` names it to a second one refused."""
        self.dir = directory.resolve()
        self.tools = toolchain
        self.die_with_parent = die_with_parent
        self.command = command or Path(sys.argv[0]).name
        self.owner = OwnerLock(self.dir)
        self.state = StackState.load(self.dir)

    # ------------------------------------------------------------------ lifecycle
    def up(self, req: StackRequest, fresh: bool = False) -> StackState:
        """Start the stack, resuming the one this directory held (``fresh``: delete it first)."""
        self._take_ownership()
        try:
            return self._up(req, fresh)
        finally:
            if not self.die_with_parent:   # `kmon stack up`: its servers run on without it
                self.owner.release()

    def _take_ownership(self) -> None:
        try:
            self.owner.acquire(self.command)
        except OSError as e:
            raise StackError(f"cannot keep a stack in {self.dir} (--dir): {e.strerror or e}") from None
        except Busy as e:
            raise self._running(f", {e}") from None
        if self.state and (running := [c for c in self.state.components.values() if c.alive()]):
            self.owner.release()
            raise self._running(": " + ", ".join(f"{c.name} (pid {c.pid})" for c in running))

    def _running(self, which: str) -> StackError:
        return StackError(f"a stack is already running in {self.dir}{which}; `kmon stack status --dir {self.dir}` "
                          f"shows it, `kmon stack down --dir {self.dir}` stops it")

    def _up(self, req: StackRequest, fresh: bool) -> StackState:
        if fresh and self.dir.exists():
            log.info("--fresh: deleting the stack in %s", self.dir)
            self._purge()
        previous = self.state
        if previous and (previous.chroot, previous.brokers, previous.secure) != (req.chroot, req.brokers, req.secure):
            raise StackError(f"{self.dir} holds a stack of {previous.brokers} brokers, chroot "
                             f"{previous.chroot or '/'}{', secure' if previous.secure else ''}: resume it with "
                             "those flags, or start over with --fresh (it deletes that stack) or another --dir")
        if previous:
            log.info("resuming the stack in %s: its data, events, checkpoint and history are kept "
                     "(--fresh starts over)", self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "log4j.properties").write_text(configs.LOG4J)
        profile = req.timing()
        again = previous or StackState(dir=self.dir, chroot="", brokers=0, fast=False, stream_port=0,
                                       collector_ports={})
        self.state = StackState(dir=self.dir, chroot=req.chroot, brokers=req.brokers, fast=req.fast,
                                stream_port=_port(again.stream_port),
                                collector_ports={source: _port(again.collector_ports.get(source, 0))
                                                 for source in ("zk", "groups")},
                                secure=req.secure)
        if self.state.secure_files:
            self.state.secure_files.write()
        started = time.monotonic()
        try:
            self._start_zookeeper(req.zk_port or _port(again.port_of("zookeeper")), profile)
            if self.state.secure_files:
                self._add_scram_users(self.state.secure_files)
            if previous:
                self._await_earlier_sessions(req.brokers, profile)
            for i in range(req.brokers):
                name = f"broker-{i + 1}"
                port = req.first_broker_port + i if req.first_broker_port else _port(again.port_of(name))
                self._write_broker(i + 1, port, profile,
                                   req.broker_jvm_options(i + 1) if req.broker_jvm_options else [])
            if req.events_cluster:
                self._write_events_node(profile, _port(again.port_of(EVENTS)))
            for c in self._servers():  # all at once: the JVMs start in parallel
                self._spawn(c)
            for i in range(req.brokers):
                self._wait_broker(i + 1)
            if req.events_cluster:
                self._wait_events_node()
            wait_until(lambda: self.controller_id() >= 0, 60, "controller election")
            if req.prometheus:
                self._start_alertmanager(_port(again.port_of("alertmanager")))
                self._start_prometheus(_port(again.port_of("prometheus")))
        except BaseException as e:
            log.error("stack start failed; stopping what was started (logs in %s)", self.dir)
            self.down(timeout=5)
            if previous and isinstance(e, (StackError, RuntimeError, TimeoutError)):
                raise StackError(f"{e}; this directory held an earlier stack: `kmon run --fresh --dir "
                                 f"{self.dir}` starts over (it deletes that stack)") from None
            raise
        log.info("stack up in %.1fs", time.monotonic() - started)
        return self.state

    def down(self, timeout: float = 20.0, purge: bool = False) -> list[str]:
        """Stop what ``up`` started, Prometheus first and ZooKeeper last; the directory is free
        for the next ``up`` then."""
        stopped: list[str] = []
        if self.state:
            # the monitor and Prometheus first, then the events cluster (the collectors flush to it),
            # the brokers, and ZooKeeper last
            rank = {EVENTS: 1, "zookeeper": 3}
            order = sorted(self.state.components.values(),
                           key=lambda c: 2 if c.name.startswith("broker-") else rank.get(c.name, 0))
            for c in order:
                if c.alive():
                    log.info("stopping %s (pid %d)", c.name, c.pid)
                    if stop(c.pid, c.marker, timeout=timeout):
                        stopped.append(c.name)
        if purge and self.dir.exists():
            self._purge()
        self.owner.release()
        return stopped

    def _purge(self) -> None:
        # the lock file goes with the directory; a held lock moves to the new one at the next up
        held = self.owner.held
        self.owner.release()
        shutil.rmtree(self.dir)
        self.state = None
        if held:
            self.owner.acquire(self.command)

    # ------------------------------------------------------------------ processes
    def add_service(self, name: str, argv: list[str], port: int, marker: str, ready_url: str,
                    timeout: float = 120) -> Component:
        """Start one more process (a collector, the stream app) as part of this stack."""
        c = self._add(name, port, argv, marker)
        c.ready_url = ready_url
        self.start(name, timeout)
        return c

    def start(self, name: str, timeout: float = 90) -> None:
        """(Re)start a stopped component and wait until it is ready."""
        c = self.component(name)
        if c.alive():
            raise StackError(f"{name} is already running (pid {c.pid})")
        if name.startswith("broker-"):
            self._start_broker(c, timeout)
            return
        self._spawn(c)
        if name == EVENTS:
            self._wait_events_node(timeout)
        elif c.ready_url:
            wait_until(lambda: http_ok(c.ready_url), timeout, f"{name} (log: {c.log})", alive=c.alive)

    def respawn(self, name: str) -> None:
        """Start a dead component again without waiting for it (kmon run's keeper)."""
        c = self.component(name)
        if c.alive():
            raise StackError(f"{name} is already running (pid {c.pid})")
        self._spawn(c)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        c = self.component(name)
        log.info("sending %s to %s (pid %d)", signal.Signals(sig).name, name, c.pid)
        stop(c.pid, c.marker, timeout=30, sig=sig)

    def send_signal(self, name: str, sig: int) -> None:
        """Signal a running component and return at once: SIGSTOP hangs it (alive, answering
        nothing), SIGCONT resumes it."""
        c = self.component(name)
        if not c.alive() or c.marker not in cmdline(c.pid):
            raise StackError(f"{name} is not running")
        log.info("sending %s to %s (pid %d)", signal.Signals(sig).name, name, c.pid)
        os.kill(c.pid, sig)

    def remove(self, name: str) -> None:
        """Stop a process that joined the stack (SIGTERM, so it flushes) and forget it."""
        c = self.component(name)
        if c.alive():
            stop(c.pid, c.marker, timeout=30)
        assert self.state
        del self.state.components[name]
        self.state.save()

    def component(self, name: str) -> Component:
        assert self.state
        try:
            return self.state.components[name]
        except KeyError:
            raise StackError(f"no {name} in this stack (it has: {', '.join(self.state.components)})") from None

    def restart_stopped(self) -> list[str]:
        """Start again every component that is not running (tests restore what they killed)."""
        assert self.state
        stopped = [name for name, c in self.state.components.items() if not c.alive()]
        for name in stopped:
            log.info("restarting %s", name)
            self.start(name)
        return stopped

    def kill_broker(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        self.kill(f"broker-{broker_id}", sig)

    def start_broker(self, broker_id: int, timeout: float = 90) -> None:
        self.start(f"broker-{broker_id}", timeout)

    def broker_ids(self) -> list[int]:
        assert self.state
        return [int(n.split("-")[1]) for n in self.state.components if n.startswith("broker-")]

    # ------------------------------------------------------------------ ZooKeeper views
    @contextlib.contextmanager
    def zk(self) -> Iterator[KazooClient]:
        """A client on the stack's chroot, stopped and closed on leaving the block."""
        assert self.state
        client = KazooClient(hosts=self.state.zk_connect, timeout=10, **self.state.zk_client())
        client.start(timeout=15)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def registered_brokers(self) -> list[int]:
        with self.zk() as client:
            try:
                return sorted(int(x) for x in client.get_children("/brokers/ids"))
            except NoNodeError:
                return []

    def controller_id(self) -> int:
        with self.zk() as client:
            try:
                data, _ = client.get("/controller")
            except NoNodeError:
                return -1
        return int(json.loads(data)["brokerid"])

    def zk_exists(self, path: str) -> bool:
        with self.zk() as client:
            return client.exists(path) is not None

    def controller_epoch(self) -> int:
        with self.zk() as client:
            return int(client.get("/controller_epoch")[0])

    # ------------------------------------------------------------------ internals
    def _java(self, main: str, config: Path, heap: str, name: str, extra: list[str] | None = None) -> list[str]:
        return [self.tools.java, f"-Xmx{heap}", f"-Xms{heap}", *JVM_OPTS, *(extra or []),
                f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
                f"-Dkafka.logs.dir={self.dir / 'logs' / name}",
                "-cp", self.tools.kafka_classpath, main, str(config)]

    def _add(self, name: str, port: int, argv: list[str], marker: str) -> Component:
        assert self.state
        c = Component(name=name, port=port, argv=argv, log=str(self.dir / "logs" / f"{name}.log"), marker=marker)
        self.state.components[name] = c
        return c

    def _spawn(self, c: Component) -> None:
        assert self.state
        c.pid = spawn(c.argv, Path(c.log), cwd=self.dir, die_with_parent=self.die_with_parent).pid
        self.state.save()
        log.info("started %s (pid %d) on 127.0.0.1:%d, log %s", c.name, c.pid, c.port, c.log)

    def _start_zookeeper(self, port: int, profile: configs.Profile) -> None:
        cfg = self.dir / "zookeeper.properties"
        secure = self.state.secure_files if self.state else None
        cfg.write_text(configs.zookeeper_properties(self.dir / "zookeeper-data", port, profile,
                                                    secure.zookeeper_properties() if secure else None))
        c = self._add("zookeeper", port, self._java("org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg, "256m",
                                                     "zookeeper", secure.jvm_options(True) if secure else None),
                      str(cfg))
        self._spawn(c)
        wait_until(lambda: four_letter(port, "ruok") == "imok", 60, "zookeeper", alive=c.alive)

    def _await_earlier_sessions(self, brokers: int, profile: configs.Profile) -> None:
        """Brokers killed with their stack (its owner SIGKILLed) stay registered in ZooKeeper until
        their sessions expire, which ZooKeeper's restart does not end: a broker started before
        then finds its id taken and exits."""
        stale = set(self.registered_brokers()) & set(range(1, brokers + 1))
        if not stale:
            return
        limit = 2 * profile.zk_session_timeout_ms / 1000 + 10
        log.info("brokers %s are still registered by the sessions of the stack's earlier run: waiting for them "
                 "to expire (up to %.0f s)", ", ".join(map(str, sorted(stale))), limit)
        wait_until(lambda: not stale & set(self.registered_brokers()), limit,
                   "the earlier run's broker registrations in ZooKeeper to expire", interval=0.5)

    def _write_broker(self, broker_id: int, port: int, profile: configs.Profile, jvm_options: list[str]) -> None:
        assert self.state
        cfg = self.dir / f"broker-{broker_id}.properties"
        secure = self.state.secure_files
        cfg.write_text(configs.broker_properties(broker_id, port, self.dir / f"broker-{broker_id}-data",
                                                 self.state.zk_connect, self.state.brokers, profile,
                                                 secure.broker_properties(port) if secure else None))
        self._add(f"broker-{broker_id}", port,
                  self._java("kafka.Kafka", cfg, profile.broker_heap, f"broker-{broker_id}",
                             [*(secure.jvm_options(False) if secure else ()), *jvm_options]), str(cfg))

    def _add_scram_users(self, secure: SecureFiles) -> None:
        """SCRAM credentials live in ZooKeeper and the brokers need theirs to start."""
        assert self.state
        users = secure.scram_users()
        for user, credential in users:
            done = subprocess.run([self.tools.java, *secure.jvm_options(False), "-cp", self.tools.kafka_classpath,
                                   "kafka.admin.ConfigCommand", "--zookeeper", self.state.zk_connect, "--alter",
                                   "--add-config", credential, "--entity-type", "users", "--entity-name", user],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode != 0:   # the output holds no password: ConfigCommand does not echo it
                raise StackError(f"creating the SCRAM user {user} failed: {done.stdout}{done.stderr}")
        log.info("SCRAM users %s created", ", ".join(u for u, _ in users))

    def _servers(self) -> list[Component]:
        """The Kafka JVMs written by ``up``: the monitored brokers and the events node."""
        assert self.state
        return [c for n, c in self.state.components.items() if n.startswith("broker-") or n == EVENTS]

    def _write_events_node(self, profile: configs.Profile, port: int) -> None:
        controller_port = free_port()
        cfg = self.dir / "events.properties"
        data = self.dir / "events-data"
        cfg.write_text(configs.events_node_properties(port, controller_port, data))
        # A KRaft node needs its log directory formatted with a cluster id before its first start;
        # a directory formatted before (a resumed stack, or a start that died after formatting)
        # keeps its id, which the storage tool checks even with --ignore-formatted.
        cluster_id = formatted_cluster_id(data) or kraft_cluster_id()
        fmt = subprocess.run([self.tools.java, "-cp", self.tools.kafka_classpath, "kafka.tools.StorageTool",
                              "format", "-t", cluster_id, "-c", str(cfg), "--ignore-formatted"],
                             capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise StackError(f"formatting the events node's storage {data} failed: "
                             f"{java_error(fmt.stdout + fmt.stderr) or f'exit status {fmt.returncode}'}")
        self._add(EVENTS, port, self._java("kafka.Kafka", cfg, profile.broker_heap, EVENTS), str(cfg))

    def _wait_events_node(self, timeout: float = 90) -> None:
        c = self.component(EVENTS)
        wait_until(lambda: serves_metadata(c.port, configs.EVENTS_NODE_ID), timeout,
                   f"events cluster (log: {c.log})", interval=0.5, alive=c.alive)
        log.info("events cluster serving on 127.0.0.1:%d", c.port)

    def _start_broker(self, c: Component, timeout: float, attempts: int = 3) -> None:
        """Kafka exits when its ZooKeeper session expires while it starts, which a short session
        on a loaded machine allows (the fast profile's 6 s): that one cause is started again."""
        for attempt in range(1, attempts + 1):
            logged = Path(c.log).stat().st_size if Path(c.log).exists() else 0
            self._spawn(c)
            try:
                self._wait_broker(int(c.name.split("-")[1]), timeout)
                return
            except RuntimeError:
                with open(c.log, "rb") as f:
                    f.seek(logged)
                    said = f.read().decode(errors="replace")
                if attempt == attempts or c.alive() or "SessionExpiredException" not in said:
                    raise
                log.warning("%s lost its ZooKeeper session while starting (attempt %d of %d): starting it again",
                            c.name, attempt, attempts)

    def _wait_broker(self, broker_id: int, timeout: float = 90) -> None:
        c = self.component(f"broker-{broker_id}")
        wait_until(lambda: broker_id in self.registered_brokers(), timeout,
                   f"broker {broker_id} (log: {c.log})", interval=0.5, alive=c.alive)
        # Registered is not ready: the broker opens its port and learns the cluster (the
        # controller's UpdateMetadata) after registering; an admin request sent before that
        # can go unanswered until it times out.
        client = self.state.kafka_client() if self.state else {}
        wait_until(lambda: serves_metadata(c.port, broker_id, client), timeout,
                   f"broker {broker_id} serving metadata (log: {c.log})", interval=0.5, alive=c.alive)
        log.info("broker %d registered and serving", broker_id)

    def _start_prometheus(self, port: int) -> None:
        assert self.state
        cfg = self.dir / "prometheus.yml"
        cfg.write_text(configs.prometheus_config(
            [f"127.0.0.1:{self.state.stream_port}"],
            [f"127.0.0.1:{p}" for p in self.state.collector_ports.values()],
            f"127.0.0.1:{self.state.components['alertmanager'].port}"))
        c = self._add("prometheus", port, [
            self.tools.prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={self.dir / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle", "--log.level=info"], str(cfg))
        self._spawn(c)
        wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/-/ready"), 60, "prometheus", alive=c.alive)

    def _start_alertmanager(self, port: int) -> None:
        data = self.dir / "alertmanager-data"
        c = self._add("alertmanager", port, [
            self.tools.alertmanager, f"--config.file={configs.ALERTMANAGER_CONFIG}", f"--storage.path={data}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="], str(data))
        self._spawn(c)
        wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/-/ready"), 60, "alertmanager", alive=c.alive)


def _port(earlier: int) -> int:
    """The port a server had before if it is free still, else a new free one."""
    return earlier if earlier and port_free(earlier) else free_port()


def formatted_cluster_id(log_dir: Path) -> str | None:
    """The cluster id a KRaft log directory was formatted with (its meta.properties), if it was."""
    try:
        text = (log_dir / "meta.properties").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "cluster.id" and value.strip():
            return value.strip()
    return None


def java_error(output: str) -> str:
    """Pure: what a Java tool's output says went wrong, without its stack frames: the message of
    the first exception it printed, else its last line that is no frame."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        found = re.search(r"(?:Exception|Error): (.+)$", line)
        if found:
            return found.group(1)
    said = [line for line in lines if not line.startswith("at ") and not line.startswith("...")]
    return said[-1] if said else ""


def kraft_cluster_id() -> str:
    """A random cluster id as Kafka writes them (a UUID in URL-safe base64), never starting with
    '-': the storage tool would read one that does as an option (1 start in 64; Kafka's own
    Uuid.randomUuid draws again too)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return cluster_id


def serves_metadata(port: int, broker_id: int, client: dict[str, str] | None = None) -> bool:
    """The broker on ``port`` answers a metadata request that lists itself and a controller."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0, **(client or {})})
    try:
        md = admin.list_topics(timeout=2)
    except KafkaException:
        return False
    return broker_id in md.brokers and md.controller_id >= 0


def four_letter(port: int, word: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status == 200
