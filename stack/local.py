"""A real Kafka cluster plus Prometheus and Alertmanager, as local processes.

The monitored cluster runs in ZooKeeper mode (Kafka 3.9: ZooKeeper and brokers) or, with
``StackRequest.kraft``, as a KRaft cluster of Kafka 4.x: by default each of the B nodes is broker and
controller at once (``broker-1`` .. ``broker-B``, node ids 1..B, every one a voter of a static
quorum); with ``controllers=N`` the brokers are broker-only and N dedicated controllers run beside
them (``controller-1001`` .. ``controller-<1000+N>``, node ids from ``FIRST_CONTROLLER_ID``).

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

import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kmon.toolchain import Toolchain
from stack import configs
from kmon.class_archive import archive_options
from stack.owner import Busy, OwnerLock
from stack.probes import (answers_api_versions, formatted_cluster_id, four_letter, http_ok, java_error,
                          kraft_cluster_id, metadata_brokers, serves_metadata)
from stack.process import PortPicker, cmdline, reap, spawn, stop, stop_all, wait_until
from stack.secure import KMON_PRINCIPALS, MTLS_LISTENER, SecureFiles
from stack.state import EVENTS, Component, StackError, StackRequest, StackState, collectors

log = logging.getLogger("kmon.stack")

FIRST_CONTROLLER_ID = 1001   # node id of a KRaft stack's first dedicated controller (brokers are 1..B)
JVM_OPTS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=50", "-Djava.awt.headless=true",
            "-XX:+ExitOnOutOfMemoryError"]


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
        req.check()
        if fresh and self.dir.exists():
            log.info("--fresh: deleting the stack in %s", self.dir)
            self._purge()
        previous = self.state
        if previous and previous.flags != req.flags:
            raise StackError(f"{self.dir} holds a stack made with {previous.flags}, not {req.flags}: resume it "
                             "with its flags, or start over with --fresh (it deletes that stack) or another --dir")
        if previous:
            log.info("resuming the stack in %s: its data, events, checkpoint and history are kept "
                     "(--fresh starts over)", self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "log4j.properties").write_text(configs.LOG4J)
        profile = req.timing()
        again = previous or StackState(dir=self.dir, chroot="", brokers=0, fast=False, stream_port=0,
                                       collector_ports={})
        pick = PortPicker(req.reserved_ports).pick   # each server's earlier port where it is free still
        self.state = StackState(dir=self.dir, chroot=req.chroot, brokers=req.brokers, fast=req.fast,
                                stream_port=pick(again.stream_port),
                                collector_ports={c.key: pick(again.collector_ports.get(c.key, 0))
                                                 for c in collectors(req.kraft, req.watched)},
                                secure=req.secure, kraft=req.kraft, kraft_controllers=req.controllers,
                                cluster_id=again.cluster_id, watched=req.watched, config_file=req.config_file,
                                events=req.events, events_command_config=req.events_command_config)
        if self.state.secure_files:
            self.state.secure_files.write()
        started = time.monotonic()
        try:
            if req.kraft:
                self._write_kraft_nodes(req, again, pick)
            elif not req.watched:   # a watched cluster runs on its own
                self._write_zookeeper_cluster(req, again, profile, pick, resumed=previous is not None)
            if req.own_events_node:
                self._write_events_node(profile, pick(again.port_of(EVENTS)), pick())
            for c in self._servers():  # all at once: the JVMs start in parallel
                self._spawn(c)
            if req.kraft:
                self._wait_kraft_cluster()
                if self.state.secure_files:
                    self._grant_kmon(self.state.secure_files)
            elif not req.watched:
                for i in range(req.brokers):
                    self._wait_broker(i + 1)
            if req.own_events_node:
                self._wait_events_node()
            if not req.kraft and not req.watched:
                wait_until(lambda: self.controller_id() >= 0, 60, "controller election")
            if req.prometheus:
                self._start_alertmanager(pick(again.port_of("alertmanager")))
                self._start_prometheus(pick(again.port_of("prometheus")))
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
            for together in _stop_order(self.state):
                running = [c for c in together if c.alive()]
                for c in running:
                    log.info("stopping %s (pid %d)", c.name, c.pid)
                done = stop_all([(c.pid, c.marker) for c in running], timeout=timeout)
                stopped += [c.name for c in running if c.pid in done]
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
        assert self.state
        if self.state.kraft and _kafka_node(name):   # from its data, as it was formatted
            self._spawn(c)
            self._wait_kraft_node(c, timeout)
            return
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
        """Start again every component that is not running (tests restore what they killed), in the
        stack's order, but the brokers side by side: each spawned, then each waited for."""
        assert self.state
        stopped = [name for name, c in self.state.components.items() if not c.alive()]
        brokers = [name for name in stopped if name.startswith("broker-")]
        for name in stopped:
            if not name.startswith("broker-"):
                log.info("restarting %s", name)
                self.start(name)
            elif name == brokers[0]:   # all of them, where the first stands in the stack's order
                self._restart_brokers(brokers)
        return stopped

    def _restart_brokers(self, names: list[str], timeout: float = 90) -> None:
        assert self.state
        logged: dict[str, int] = {}
        for name in names:
            log.info("restarting %s", name)
            logged[name] = _log_size(self.component(name))
            self._spawn(self.component(name))
        for name in names:
            if self.state.kraft:
                self._wait_kraft_node(self.component(name), timeout)
            else:
                self._start_broker(self.component(name), timeout, spawned_at=logged[name])

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
        if self.state.kraft:   # and its controller is the quorum's leader, which no ZooKeeper names
            raise StackError(f"the stack in {self.dir} runs KRaft: it has no ZooKeeper")
        client = KazooClient(hosts=self.state.zk_connect, timeout=10, **self.state.zk_client())
        client.start(timeout=15)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def registered_brokers(self) -> list[int]:
        """The brokers registered in ZooKeeper; under KRaft, those registered and unfenced in the
        metadata (as the first broker that answers lists them)."""
        assert self.state
        if self.state.kraft:
            client = self.state.kafka_client()
            for c in self.state.components.values():
                if c.name.startswith("broker-") and c.alive() and (found := metadata_brokers(c.port, client)):
                    return sorted(found)
            return []
        with self.zk() as client:
            try:
                return sorted(int(x) for x in client.get_children("/brokers/ids"))
            except NoNodeError:
                return []

    def controller_id(self) -> int:
        """The controller broker (ZooKeeper mode only: under KRaft, DescribeCluster and Metadata
        name a random broker, and the active controller is the quorum's leader)."""
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
        if c.pid:
            reap(c.pid)   # the part's last process, if ours and dead: how it ended was read by now
        c.pid = spawn(self._with_class_archive(c.argv), Path(c.log), cwd=self.dir,
                      die_with_parent=self.die_with_parent).pid
        self.state.save()
        log.info("started %s (pid %d) on 127.0.0.1:%d, log %s", c.name, c.pid, c.port, c.log)

    def _with_class_archive(self, argv: list[str]) -> list[str]:
        """A Kafka or ZooKeeper JVM's command line with the class-data sharing options of its kind, chosen
        at each start (class_archive.py); any other command as it is."""
        if "-cp" not in argv or Path(argv[0]).name != "java":
            return argv
        at = argv.index("-cp")
        options = archive_options(self.tools.cache / "cds", argv[0], argv[at + 1], argv[at + 2])
        return [argv[0], *options, *argv[1:]]

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

    def _write_zookeeper_cluster(self, req: StackRequest, again: StackState, profile: configs.Profile,
                                 pick: Callable[[int], int], resumed: bool) -> None:
        """Start ZooKeeper and write the brokers (ZooKeeper mode)."""
        assert self.state
        self._start_zookeeper(req.zk_port or pick(again.port_of("zookeeper")), profile)
        if self.state.secure_files:
            self._add_scram_users(self.state.secure_files)
        if resumed:
            self._await_earlier_sessions(req.brokers, profile)
        for i in range(req.brokers):
            name = f"broker-{i + 1}"
            port = req.first_broker_port + i if req.first_broker_port else pick(again.port_of(name))
            self._write_broker(i + 1, port, profile,
                               req.broker_jvm_options(i + 1) if req.broker_jvm_options else [], req.extra_props)

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

    def _write_broker(self, broker_id: int, port: int, profile: configs.Profile, jvm_options: list[str],
                      extra: dict[str, str]) -> None:
        assert self.state
        cfg = self.dir / f"broker-{broker_id}.properties"
        secure = self.state.secure_files
        cfg.write_text(configs.broker_properties(broker_id, port, self.dir / f"broker-{broker_id}-data",
                                                 self.state.zk_connect, self.state.brokers, profile,
                                                 {**(secure.broker_properties(port) if secure else {}), **extra}))
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

    def _grant_kmon(self, secure: SecureFiles) -> None:
        """kmon's ACLs on a secure KRaft cluster, as an operator grants them (again on a resume: the
        same binding twice is one)."""
        admin = AdminClient({"bootstrap.servers": self.state.bootstrap_servers if self.state else "", "log_level": 0,
                             **secure.admin_client()})
        bindings = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, "*",
                               operation, AclPermissionType.ALLOW)
                    for principal in KMON_PRINCIPALS for operation in (AclOperation.DESCRIBE,
                                                                       AclOperation.CLUSTER_ACTION)]
        for future in admin.create_acls(bindings, request_timeout=30).values():
            future.result()
        log.info("granted %s DESCRIBE and CLUSTER_ACTION on the cluster", " and ".join(KMON_PRINCIPALS))

    def _servers(self) -> list[Component]:
        """The Kafka JVMs written by ``up``: the monitored brokers (and KRaft controllers) and the events node."""
        assert self.state
        return [c for n, c in self.state.components.items() if _kafka_node(n) or n == EVENTS]

    def _write_events_node(self, profile: configs.Profile, port: int, controller_port: int) -> None:
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

    def _write_kraft_nodes(self, req: StackRequest, again: StackState, pick: Callable[[int], int]) -> None:
        """Write the KRaft cluster's nodes, each with its earlier ports where free, and format the storage
        of those that have none yet (a resumed node starts from its data)."""
        assert self.state
        profile = req.kraft_timing()
        (self.dir / "log4j2.properties").write_text(configs.LOG4J2)

        def port(name: str, listener: str) -> int:
            if listener == "CONTROLLER":
                return pick(again.controller_port_of(name))
            if listener == MTLS_LISTENER:
                return pick(again.controller_mtls_port_of(name)) if req.secure else 0
            broker_id = int(name.split("-")[1])
            return req.first_broker_port + broker_id - 1 if req.first_broker_port else pick(again.port_of(name))
        nodes = kraft_layout(req.brokers, req.controllers, port)
        voters = configs.quorum_voters([node for _, node in nodes])
        formatted = {name: formatted_cluster_id(self._data(name)) for name, _ in nodes}
        # one id for every node: the state's, else that of a node formatted by a start that failed
        # before the state was saved, else a new one
        cluster_id = self.state.cluster_id or next(filter(None, formatted.values()), None) or kraft_cluster_id()
        if wrong := [(name, found) for name, found in formatted.items() if found and found != cluster_id]:
            raise StackError(f"{self._data(wrong[0][0])} holds the storage of KRaft cluster {wrong[0][1]}, not of "
                             f"this stack's {cluster_id}: delete it, or start over with --fresh")
        self.state.cluster_id = cluster_id
        secure = self.state.secure_files
        for name, node in nodes:
            cfg = self.dir / f"{name}.properties"
            listeners = secure.kraft_properties(node.broker_port, node.controller_port, node.mtls_port) if secure else {}
            cfg.write_text(configs.kraft_node_properties(node, voters, self._data(name), req.brokers, profile,
                                                         {**listeners, **req.extra_props}))
            jvm = req.broker_jvm_options(node.node_id) if req.broker_jvm_options and node.broker_port else []
            c = self._add(name, node.broker_port or node.controller_port,
                          self._kafka4(cfg, profile.node_heap, jvm), str(cfg))
            c.controller_port, c.controller_mtls_port = node.controller_port, node.mtls_port
        self._format([name for name, found in formatted.items() if not found], profile.features,
                     secure.kraft_format_args() if secure else [])

    def _data(self, name: str) -> Path:
        """The log directory of a KRaft node (its meta.properties says whether it was formatted)."""
        return self.dir / f"{name}-data"

    def _format(self, names: list[str], features: dict[str, int], extra: list[str]) -> None:
        """Format the storage of these KRaft nodes with the stack's cluster id, all at once (a JVM each).
        The static ``controller.quorum.voters`` in their properties is all the tool needs."""
        assert self.state
        argv = [self.tools.java, "-cp", self.tools.kafka4_classpath, "kafka.tools.StorageTool", "format",
                "-t", self.state.cluster_id,
                *(arg for name, level in features.items() for arg in ("--feature", f"{name}={level}")), *extra]
        running = {name: subprocess.Popen([*argv, "-c", str(self.dir / f"{name}.properties")], text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for name in names}
        failed = []
        for name, p in running.items():
            said, _ = p.communicate(timeout=120)
            if p.returncode != 0:
                failed.append(f"{self._data(name)}: {java_error(said) or f'exit status {p.returncode}'}")
        if failed:
            raise StackError(f"formatting the KRaft storage failed: {'; '.join(failed)}")
        if names:
            log.info("formatted the storage of %s for KRaft cluster %s", ", ".join(names), self.state.cluster_id)

    def _kafka4(self, config: Path, heap: str, extra: list[str]) -> list[str]:
        """A Kafka 4.x node: its own jars, logging through log4j2."""
        return [self.tools.java, f"-Xmx{heap}", f"-Xms{heap}", *JVM_OPTS, *extra,
                f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                "-cp", self.tools.kafka4_classpath, "kafka.Kafka", str(config)]

    def _wait_kraft_cluster(self, timeout: float = 90) -> None:
        """Every broker registered and unfenced, as each broker's own metadata shows it. Not
        DescribeCluster's controller: under KRaft a broker answers with a random broker there."""
        assert self.state
        nodes = [c for n, c in self.state.components.items() if _kafka_node(n)]

        def none_died() -> bool:   # a dead controller would leave the brokers waiting until the timeout
            if dead := [c for c in nodes if not c.alive()]:
                raise RuntimeError(f"{dead[0].name} exited before the cluster was ready (log: {dead[0].log})")
            return True
        ids = set(self.broker_ids())
        client = self.state.kafka_client()
        for broker_id in sorted(ids):
            c = self.component(f"broker-{broker_id}")
            wait_until(lambda: ids <= metadata_brokers(c.port, client), timeout,
                       f"{c.name} serving metadata that lists every broker (log: {c.log})", interval=0.5,
                       alive=none_died)
        log.info("KRaft cluster %s: brokers %s registered and serving, controllers %s", self.state.cluster_id,
                 ", ".join(map(str, sorted(ids))), self.state.controllers)

    def _wait_kraft_node(self, c: Component, timeout: float) -> None:
        """A (re)started KRaft node serves: a broker lists itself in its metadata (registered and
        unfenced: it caught up with the metadata log), a dedicated controller answers requests."""
        assert self.state
        if c.name.startswith("broker-"):
            broker_id = int(c.name.split("-")[1])
            client = self.state.kafka_client()
            wait_until(lambda: broker_id in metadata_brokers(c.port, client), timeout,
                       f"{c.name} registered and serving (log: {c.log})", interval=0.5, alive=c.alive)
        else:
            secure = self.state.secure_files
            tls = ssl.create_default_context(cafile=str(secure.ca)) if secure else None
            wait_until(lambda: answers_api_versions(c.controller_port, tls), timeout,
                       f"{c.name} serving on 127.0.0.1:{c.controller_port} (log: {c.log})", interval=0.5,
                       alive=c.alive)
        log.info("%s serving", c.name)

    def _wait_events_node(self, timeout: float = 90) -> None:
        c = self.component(EVENTS)
        wait_until(lambda: serves_metadata(c.port, configs.EVENTS_NODE_ID), timeout,
                   f"events cluster (log: {c.log})", interval=0.5, alive=c.alive)
        log.info("events cluster serving on 127.0.0.1:%d", c.port)

    def _start_broker(self, c: Component, timeout: float, attempts: int = 3, spawned_at: int | None = None) -> None:
        """Kafka exits when its ZooKeeper session expires while it starts, which a short session
        on a loaded machine allows (the fast profile's 6 s): that one cause is started again.
        ``spawned_at``: the caller spawned its first attempt, its log then this long (restart_stopped)."""
        logged = spawned_at or 0   # where this attempt's lines begin in its log
        for attempt in range(1, attempts + 1):
            if attempt > 1 or spawned_at is None:
                logged = _log_size(c)
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


def kraft_layout(brokers: int, controllers: int,
                 port: Callable[[str, str], int]) -> list[tuple[str, configs.KraftNode]]:
    """A KRaft stack's nodes by component name, ``port(name, listener)`` giving each listener's port.
    ``controllers`` 0: brokers 1..B are controllers too; else brokers 1..B are brokers only and the
    controllers are FIRST_CONTROLLER_ID and up."""
    def node(name: str, node_id: int, broker: bool, controller: bool) -> tuple[str, configs.KraftNode]:
        return name, configs.KraftNode(node_id, broker_port=port(name, "PLAINTEXT") if broker else 0,
                                       controller_port=port(name, "CONTROLLER") if controller else 0,
                                       mtls_port=port(name, MTLS_LISTENER) if controller else 0)
    return ([node(f"broker-{i}", i, True, not controllers) for i in range(1, brokers + 1)] +
            [node(f"controller-{i}", i, False, True)
             for i in range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + controllers)])


def _stop_order(state: StackState) -> list[list[Component]]:
    """Pure: the components in the order ``down`` stops them, each list at once. The monitor and
    Prometheus first, then the events cluster (the collectors flush to it), the brokers, and ZooKeeper
    or the KRaft controllers last. A KRaft cluster's brokers stop together, then its controllers: a
    broker's controlled shutdown needs a quorum, which stopping the combined nodes one by one would
    leave the last one without."""
    def rank(c: Component) -> int:
        if _kafka_node(c.name):
            return 2 if c.name.startswith("broker-") else 3
        return {EVENTS: 1, "zookeeper": 3}.get(c.name, 0)
    groups: list[list[Component]] = []
    for _, same in itertools.groupby(sorted(state.components.values(), key=rank), key=rank):
        alike = list(same)
        groups += [alike] if state.kraft and _kafka_node(alike[0].name) else [[c] for c in alike]
    return groups


def _kafka_node(name: str) -> bool:
    """A server of the monitored Kafka cluster: a broker, or a KRaft controller."""
    return name.startswith("broker-") or name.startswith("controller-")


def _log_size(c: Component) -> int:
    return Path(c.log).stat().st_size if Path(c.log).exists() else 0
