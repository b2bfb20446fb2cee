"""The ZooKeeper collector's I/O: watches Kafka's tree and publishes one state-carrying event per change.

The tree itself, what a read means and which events it makes, is collectors/zk/tree.py (pure).
Here, the reads with kazoo on one worker thread. Every read that follows a notification re-arms
the watch (ZooKeeper sets it and returns the data in one step, so no change falls between
them); missing znodes get exists-watches. Watch callbacks and the connection listener only
enqueue work, so kazoo's threads never wait on anything, and the publisher never blocks. On
start and after every reconnect or session expiry (kazoo drops its watches on both) the worker
re-reads the whole tree and publishes a bracketed snapshot.
"""
from __future__ import annotations

import copy
import json
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent
from kazoo.retry import KazooRetry

from collectors.client_logs import KazooLog, kazoo_login
from collectors.protocol import EventSink, publish_all
from collectors.telemetry import Telemetry
from collectors.zk.tree import SOURCE, Read, Round, ZkTree
from collectors.zk.znodes import ZkPaths
from kmon.events import Event
from kmon.reachability import MONITORED_ZOOKEEPER, Reachability

log = logging.getLogger("kmon.collector.zk")

READ_CHUNK = 2000   # reads pipelined at once: bounds memory on 100k-partition trees
# kazoo's default reconnect backoff grows to an hour; a monitor should be back within seconds
_RECONNECT = dict(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0)


@dataclass(frozen=True)
class ZkCollectorConfig:
    hosts: str                      # host:port[,host:port...] of the ZooKeeper ensemble
    cluster: str                    # the name events are keyed by: <cluster>/<entity>
    chroot: str = ""                # Kafka's zookeeper.connect chroot, e.g. /kafka
    session_timeout_s: float = 10.0
    client: Mapping[str, Any] = field(default_factory=dict)   # KazooClient's TLS/SASL/auth arguments


@dataclass(frozen=True)
class _Resync:
    reason: str


class ZkCollector:
    """``start()`` returns at once: the worker connects, snapshots, then follows changes; ``stop()`` ends it."""

    def __init__(self, config: ZkCollectorConfig, publisher: EventSink, telemetry: Telemetry) -> None:
        self.config = config
        self._tree = ZkTree(ZkPaths(config.chroot), config.cluster)
        self._publisher = publisher
        self._telemetry = telemetry
        self.reachability = Reachability(MONITORED_ZOOKEEPER, config.hosts + config.chroot,
                                         f"retrying every {_RECONNECT['max_delay']:g} s", log)
        self._client = KazooClient(hosts=config.hosts, timeout=config.session_timeout_s,
                                   connection_retry=KazooRetry(**_RECONNECT),
                                   logger=KazooLog(log, self.reachability, kazoo_login(config.client)),
                                   **copy.deepcopy(dict(config.client)))
        self._queue: queue.SimpleQueue[str | _Resync | None] = queue.SimpleQueue()
        self._watched: set[tuple[str, str]] = set()   # (path, "data" | "child") armed on the server
        self._ever_connected = False
        self._expired = False
        self._stopping = threading.Event()
        self._worker = threading.Thread(target=self._run, name="kmon-zk-collector", daemon=True)
        self._connected = telemetry.metric("kmon_collector_zk_connected")
        self._reads = telemetry.metric("kmon_collector_zk_reads_total")
        self._read_count = 0   # the same, for the snapshot log line
        self._resyncs = telemetry.metric("kmon_collector_resyncs_total", source=SOURCE)
        telemetry.metric("kmon_collector_watches").set_function(lambda: len(self._watched))

    def start(self) -> None:
        self._client.add_listener(self._on_state)
        self._worker.start()
        self._client.start_async()
        log.info("connecting to ZooKeeper %s%s for cluster %r", self.config.hosts, self.config.chroot,
                 self.config.cluster)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching: the current round may finish (its events are published), then the session closes."""
        self._stopping.set()
        self._queue.put(None)
        self._worker.join(timeout)
        self._client.stop()   # also fails a read stuck on a lost connection
        self._client.close()
        self._worker.join()
        self._connected.set(0)
        log.info("stopped watching ZooKeeper %s%s", self.config.hosts, self.config.chroot)

    def request_resync(self, reason: str) -> None:
        self._queue.put(_Resync(reason))

    def cluster_id(self) -> str | None:
        """The monitored cluster's id (Kafka's /cluster/id znode), None while unknown."""
        try:
            data, _ = self._client.get(f"{self.config.chroot}/cluster/id")
            return str(json.loads(data)["id"])
        except (KazooException, KazooTimeoutError, ValueError, KeyError, TypeError):
            # not connected yet, no id written yet, or not Kafka's format
            return None

    def health(self) -> str | None:
        if self._client.connected:
            return None
        return f"ZooKeeper session to {self.config.hosts}{self.config.chroot} is not connected"

    # ------------------------------------------------------------------ kazoo's threads: enqueue only
    def _on_watch(self, event: WatchedEvent) -> None:
        if event.path is None:   # kazoo's "watches cleared" notice on a lost connection: the resync re-arms
            return
        if event.type in (EventType.CHILD, EventType.DELETED):
            self._watched.discard((event.path, "child"))
        if event.type != EventType.CHILD:
            self._watched.discard((event.path, "data"))
        self._queue.put(event.path)

    def _on_state(self, state: str) -> None:
        if self._stopping.is_set():
            return
        if state == KazooState.CONNECTED:
            reason = "expired" if self._expired else "reconnect" if self._ever_connected else "start"
            self._ever_connected, self._expired = True, False
            self._connected.set(1)
            self.reachability.reached()
            log.info("connected to ZooKeeper %s (%s); resyncing", self.config.hosts, reason)
            self.request_resync(reason)
            return
        self._connected.set(0)
        self._watched.clear()   # kazoo forgets every watch on a lost connection, not only on expiry
        self.reachability.failed("session expired" if state == KazooState.LOST else "connection lost")
        if state == KazooState.LOST:
            self._expired = True
            log.warning("ZooKeeper session expired; a new session and a full resync follow")
        else:
            log.warning("lost the connection to ZooKeeper %s; reconnecting", self.config.hosts)

    # ------------------------------------------------------------------ the worker
    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while not self._queue.empty():
                items.append(self._queue.get())
            if None in items:
                return
            resyncs = [i for i in items if isinstance(i, _Resync)]
            try:
                if resyncs:   # a snapshot re-reads whatever the notifications were about
                    self._snapshot(resyncs[-1].reason)
                else:
                    self._follow(i for i in items if isinstance(i, str))
            except KazooException as e:
                if not self._stopping.is_set():
                    log.warning("ZooKeeper read failed (%s: %s); the resync on reconnecting covers it",
                                type(e).__name__, e)
            except Exception:   # a defect must not end the watching
                self._telemetry.survived(SOURCE, "while following ZooKeeper", log)

    def _follow(self, paths: Iterable[str]) -> None:
        rnd = Round(full=False)
        for path in paths:
            rnd.follow(path)
        self._read(rnd)
        self._emit(self._tree.changes(rnd, _now_ms()))

    def _snapshot(self, reason: str) -> None:
        started, begun_ms = time.monotonic(), _now_ms()
        reads = self._read_count
        rnd = Round(full=True)
        for path in self._tree.roots():
            rnd.follow(path)
        self._read(rnd)
        events = self._tree.snapshot(rnd, uuid.uuid4().hex, reason, begun_ms, _now_ms())
        self._emit(events)
        self._resyncs.inc()
        log.info("snapshot (%s): %d entities, %d deleted while unwatched, %d ZooKeeper reads, %.2fs",
                 reason, events[-1].data.entities, sum(e.op == "delete" for e in events),
                 self._read_count - reads, time.monotonic() - started)

    def _read(self, rnd: Round) -> None:
        """Read until the round needs nothing more, pipelining each batch of reads."""
        while batch := rnd.take(READ_CHUNK):
            pending = []
            for path in batch:
                mode = self._tree.read_mode(path)
                if mode is Read.LIST:
                    pending.append((path, mode, self._client.get_children_async(path, self._on_watch, True)))
                elif mode is not Read.IGNORE:
                    watch = None if mode is Read.ONCE else self._on_watch
                    pending.append((path, mode, self._client.get_async(path, watch)))
            self._count_reads(len(pending))
            for path, mode, pending_read in pending:
                try:
                    found = pending_read.get()
                except NoNodeError:
                    found = None
                if found is not None and mode is not Read.ONCE:
                    self._watched.add((path, "child" if mode is Read.LIST else "data"))
                if self._tree.on_read(path, mode, found, rnd):
                    self._confirm_absent(path, rnd)
            self._report_malformed(rnd)

    def _confirm_absent(self, path: str, rnd: Round) -> None:
        self._count_reads(1)
        if self._client.exists(path, self._on_watch) is not None:
            rnd.retry(path)   # created since the read
            return
        self._watched.add((path, "data"))
        zxid = self._absence_zxid(path)
        if zxid is None:
            rnd.retry(path)
        else:
            self._tree.on_absent(path, zxid, rnd)

    def _absence_zxid(self, path: str) -> int | None:
        """The pzxid of the nearest existing ancestor, read with its children in one step: at or
        after the deletion of ``path`` (None if ``path`` was created meanwhile)."""
        node = path
        while True:
            parent, _, name = node.rpartition("/")
            self._count_reads(1)
            try:
                children, stat = self._client.get_children(parent or "/", include_data=True)
            except NoNodeError:
                node = parent
                continue
            return None if name in children else stat.pzxid

    def _count_reads(self, n: int) -> None:
        self._reads.inc(n)
        self._read_count += n

    def _report_malformed(self, rnd: Round) -> None:
        for role, error in rnd.malformed:
            self._telemetry.metric("kmon_collector_malformed_total", source=SOURCE, kind=role.value).inc()
            log.warning("malformed znode (kept the last valid state, still watching): %s", error)
        rnd.malformed.clear()

    def _emit(self, events: list[Event]) -> None:
        publish_all(self._publisher, self._telemetry, SOURCE, events)


def _now_ms() -> int:
    return int(time.time() * 1000)

