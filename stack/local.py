"""A real Kafka cluster plus Prometheus and Alertmanager, as local processes.

The monitored cluster runs in ZooKeeper mode (Kafka 3.9: ZooKeeper and brokers) or, with
``StackRequest.kraft``, as a KRaft cluster of Kafka 4.x: by default each of the B nodes is broker and
controller at once (``broker-1`` .. ``broker-B``, node ids 1..B, every one a voter of a static
quorum); with ``controllers=N`` the brokers are broker-only and N dedicated controllers run beside
them (``controller-1001`` .. ``controller-<1000+N>``, node ids from ``FIRST_CONTROLLER_ID`` in stack/kraft_nodes.py).

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
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from kazoo.client import KazooClient

from kmon.toolchain import Toolchain
from stack import cluster_views, configs, jvm
from stack.credentials import add_scram_users, grant_kmon
from stack.kraft_nodes import format_events_node, format_storage, kraft_layout
from stack.owner import Busy, OwnerLock
from stack.probes import formatted_cluster_id, four_letter, http_ok, kraft_cluster_id
from stack.process import PortPicker, cmdline, reap, spawn, stop, stop_all, wait_until
from stack.secure import MTLS_LISTENER, WEB_USER
from stack.state import EVENTS, Component, StackError, StackRequest, StackState, collectors, kafka_node, stop_order

log = logging.getLogger("kmon.stack")



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
                cluster_views.wait_kraft_cluster(self.state, timeout=90)
                if self.state.secure_files:
                    grant_kmon(self.state.bootstrap_servers, self.state.secure_files)
            elif not req.watched:
                for i in range(req.brokers):
                    cluster_views.wait_broker(self.state, self.component(f"broker-{i + 1}"), timeout=90)
            if req.own_events_node:
                cluster_views.wait_events_node(self.component(EVENTS), timeout=90)
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
            for together in stop_order(self.state):
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
        if self.state.kraft and kafka_node(name):   # from its data, as it was formatted
            self._spawn(c)
            cluster_views.wait_kraft_node(self.state, c, timeout)
            return
        if name.startswith("broker-"):
            self._start_broker(c, timeout)
            return
        self._spawn(c)
        if name == EVENTS:
            cluster_views.wait_events_node(c, timeout)
        elif c.ready_url:
            credentials = self.state.web_credentials()
            wait_until(lambda: http_ok(c.ready_url, credentials), timeout, f"{name} (log: {c.log})", alive=c.alive)

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
                cluster_views.wait_kraft_node(self.state, self.component(name), timeout)
            else:
                self._start_broker(self.component(name), timeout, spawned_at=logged[name])

    def kill_broker(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        self.kill(f"broker-{broker_id}", sig)

    def start_broker(self, broker_id: int, timeout: float = 90) -> None:
        self.start(f"broker-{broker_id}", timeout)

    def broker_ids(self) -> list[int]:
        assert self.state
        return [int(n.split("-")[1]) for n in self.state.components if n.startswith("broker-")]

    # ------------------------------------------------------------------ what the cluster says
    @contextlib.contextmanager
    def zk(self) -> Iterator[KazooClient]:
        """A client on the stack's chroot, stopped and closed on leaving the block."""
        assert self.state
        with cluster_views.zookeeper(self.state) as client:
            yield client

    def registered_brokers(self) -> list[int]:
        assert self.state
        return cluster_views.registered_brokers(self.state)

    def controller_id(self) -> int:
        assert self.state
        return cluster_views.controller_id(self.state)

    def zk_exists(self, path: str) -> bool:
        with self.zk() as client:
            return client.exists(path) is not None

    def controller_epoch(self) -> int:
        with self.zk() as client:
            return int(client.get("/controller_epoch")[0])

    # ------------------------------------------------------------------ internals
    def _add(self, name: str, port: int, argv: list[str], marker: str) -> Component:
        assert self.state
        c = Component(name=name, port=port, argv=argv, log=str(self.dir / "logs" / f"{name}.log"), marker=marker)
        self.state.components[name] = c
        return c

    def _spawn(self, c: Component) -> None:
        assert self.state
        if c.pid:
            reap(c.pid)   # the part's last process, if ours and dead: how it ended was read by now
        c.pid = spawn(jvm.with_class_archive(self.tools, c.argv), Path(c.log), cwd=self.dir,
                      die_with_parent=self.die_with_parent).pid
        self.state.save()
        log.info("started %s (pid %d) on 127.0.0.1:%d, log %s", c.name, c.pid, c.port, c.log)

    def _start_zookeeper(self, port: int, profile: configs.Profile) -> None:
        cfg = self.dir / "zookeeper.properties"
        secure = self.state.secure_files if self.state else None
        cfg.write_text(configs.zookeeper_properties(self.dir / "zookeeper-data", port, profile,
                                                    secure.zookeeper_properties() if secure else None))
        argv = jvm.kafka3(self.tools, self.dir, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg, "256m",
                          "zookeeper", secure.jvm_options(True) if secure else None)
        c = self._add("zookeeper", port, argv, str(cfg))
        self._spawn(c)
        wait_until(lambda: four_letter(port, "ruok") == "imok", 60, "zookeeper", alive=c.alive)

    def _write_zookeeper_cluster(self, req: StackRequest, again: StackState, profile: configs.Profile,
                                 pick: Callable[[int], int], resumed: bool) -> None:
        """Start ZooKeeper and write the brokers (ZooKeeper mode)."""
        assert self.state
        self._start_zookeeper(req.zk_port or pick(again.port_of("zookeeper")), profile)
        if self.state.secure_files:
            add_scram_users(self.tools.java, self.tools.kafka_classpath, self.state.zk_connect, self.state.secure_files)
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
                  jvm.kafka3(self.tools, self.dir, "kafka.Kafka", cfg, profile.broker_heap, f"broker-{broker_id}",
                             [*(secure.jvm_options(False) if secure else ()), *jvm_options]), str(cfg))

    def _servers(self) -> list[Component]:
        """The Kafka JVMs written by ``up``: the monitored brokers (and KRaft controllers) and the events node."""
        assert self.state
        return [c for n, c in self.state.components.items() if kafka_node(n) or n == EVENTS]

    def _write_events_node(self, profile: configs.Profile, port: int, controller_port: int) -> None:
        cfg = self.dir / "events.properties"
        data = self.dir / "events-data"
        cfg.write_text(configs.events_node_properties(port, controller_port, data))
        format_events_node(self.tools.java, self.tools.kafka_classpath, cfg, data)
        self._add(EVENTS, port, jvm.kafka3(self.tools, self.dir, "kafka.Kafka", cfg, profile.broker_heap, EVENTS),
                  str(cfg))

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
            jvm_options = req.broker_jvm_options(node.node_id) if req.broker_jvm_options and node.broker_port else []
            c = self._add(name, node.broker_port or node.controller_port,
                          jvm.kafka4(self.tools, self.dir, cfg, profile.node_heap, jvm_options), str(cfg))
            c.controller_port, c.controller_mtls_port = node.controller_port, node.mtls_port
        if unformatted := [name for name, found in formatted.items() if not found]:
            format_storage(self.tools.java, self.tools.kafka4_classpath, cluster_id,
                           {name: (self.dir / f"{name}.properties", self._data(name)) for name in unformatted},
                           profile.features, secure.kraft_format_args() if secure else [])
            log.info("formatted the storage of %s for KRaft cluster %s", ", ".join(unformatted), cluster_id)

    def _data(self, name: str) -> Path:
        """The log directory of a KRaft node (its meta.properties says whether it was formatted)."""
        return self.dir / f"{name}-data"

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
                assert self.state
                cluster_views.wait_broker(self.state, c, timeout)
                return
            except RuntimeError:
                with open(c.log, "rb") as f:
                    f.seek(logged)
                    said = f.read().decode(errors="replace")
                if attempt == attempts or c.alive() or "SessionExpiredException" not in said:
                    raise
                log.warning("%s lost its ZooKeeper session while starting (attempt %d of %d): starting it again",
                            c.name, attempt, attempts)

    def _start_prometheus(self, port: int) -> None:
        assert self.state
        cfg = self.dir / "prometheus.yml"
        files = self.state.secure_files
        cfg.write_text(configs.prometheus_config(
            [f"127.0.0.1:{self.state.stream_port}"],
            [f"127.0.0.1:{p}" for p in self.state.collector_ports.values()],
            f"127.0.0.1:{self.state.components['alertmanager'].port}",
            configs.scrape_security(files.ca, WEB_USER, files.web_password) if files else {}))
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


def _log_size(c: Component) -> int:
    return Path(c.log).stat().st_size if Path(c.log).exists() else 0
