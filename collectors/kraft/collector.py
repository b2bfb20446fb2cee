"""The KRaft collector: follows ``__cluster_metadata`` as an observer of the controller quorum.

It fetches the metadata log from the quorum's leader as a voter would, but as replica -1 (an
observer: it votes for nothing and the leader waits for nobody), follows the leader as it moves,
and replays every committed record (below the high watermark) into :class:`MetadataImage`, whose
events carry the record's metadata offset as their ordering key. Each (re)sync starts from the
quorum's newest snapshot (FetchSnapshot) when the log no longer starts at 0, and is bracketed by
snapshot markers up to the high watermark, so entities deleted while kmon did not look disappear
downstream. After a restart it reads the log again from there: the stream keeps, per entity, the
newest offset it applied, so what it has seen is ignored and what happened meanwhile is counted
once, in order. Every few seconds it asks the leader to describe the quorum (the ``quorum`` entity).

Authorization: fetching the metadata log takes CLUSTER_ACTION on the cluster resource (the
permission the brokers themselves have); DescribeQuorum takes DESCRIBE on the cluster.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid

from collectors.kafka_encoding import MalformedRecord
from collectors.kraft import wire
from collectors.kraft.config import KraftCollectorConfig
from collectors.kraft.connection import Connection, ControllerError
from collectors.kraft.image import SOURCE
from collectors.kraft.leader import LeaderFinder, Move
from collectors.kraft.quorum import QuorumTeller, quorum_state
from collectors.kraft.loader import Loaded, MetadataLoader, Position
from collectors.protocol import EventSink, publish_all
from collectors.resync import Resync
from collectors.telemetry import Telemetry
from kmon import __version__
from kmon.events import ControllerState, Event, LogMeta, QuorumState
from kmon.reachability import MONITORED_CONTROLLERS, Reachability

log = logging.getLogger("kmon.collector.kraft")

RETRY_S = 1.0


class NotLeader(Exception):
    """The node asked does not lead the quorum (or no longer at the epoch asked)."""


class KraftCollector:
    def __init__(self, config: KraftCollectorConfig, publisher: EventSink, telemetry: Telemetry) -> None:
        self.config = config
        self._publisher = publisher
        self._telemetry = telemetry
        self.reachability = Reachability(MONITORED_CONTROLLERS, config.address, "retrying every second", log)
        self.loader = MetadataLoader(config.cluster)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kmon-kraft", daemon=True)
        # apart from the fetch loop, which a hung controller holds for a request timeout (10 s)
        self._watchdog = threading.Thread(target=self._watch_leader, name="kmon-kraft-leaderless", daemon=True)
        self._resync_asked: str | None = "start"
        self._leader = LeaderFinder(config.controllers)
        self._conn: Connection | None = None
        self._quorum_conn: Connection | None = None
        self._next_quorum = 0.0
        self._quorum = QuorumTeller(config.quorum_progress_interval_s)
        self._quorum_lock = threading.Lock()   # the fetch loop and the watchdog tell the quorum in turn
        self._quorum_refused = False
        self._last_fetch_ok = 0.0
        self._busy = False   # on what the leader last answered, not waiting for it
        self._said: set[str] = set()   # kinds of skipped records said once
        self._resyncs = telemetry.metric("kmon_collector_resyncs_total", source=SOURCE)
        self._high_watermark = 0
        telemetry.metric("kmon_collector_metadata_offset").set_function(lambda: self.loader.position.offset)
        telemetry.metric("kmon_collector_metadata_lag_records").set_function(
            lambda: max(0, self._high_watermark - self.loader.position.offset))

    # ------------------------------------------------------------------ the Collector protocol
    def start(self) -> None:
        log.info("following the metadata log of cluster %r from the controllers %s", self.config.cluster,
                 self.config.address)
        self._thread.start()
        self._watchdog.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)
        self._watchdog.join(timeout)
        self._close()
        log.info("stopped following the metadata log at offset %d", self.loader.position.offset)

    def request_resync(self, reason: str) -> None:
        self._resync_asked = reason

    def cluster_id(self) -> str | None:
        return None   # the controller listener does not say it to an observer

    def health(self) -> str | None:
        if not self.loader.caught_up:
            return f"not caught up with the metadata log of {self.config.address} yet"
        if time.monotonic() - self._last_fetch_ok > max(10.0, 4 * self.config.max_wait_ms / 1000):
            return f"no answer from the metadata quorum's leader ({self.config.address}) for a while"
        return None

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._step()
            except NotLeader:
                continue
            except ControllerError as e:   # said once, by the reachability check that ends the collector
                self.reachability.refused(str(e))
                self._close()
                self._stopping.wait(RETRY_S * 5)
            except (OSError, MalformedRecord) as e:
                self.reachability.failed(str(e))
                log.debug("metadata fetch failed: %s", e)
                self._close()
                self._leader.forget()
                self._stopping.wait(RETRY_S)
            except Exception:   # a defect must not end the following: the next fetch starts over
                self._telemetry.survived(SOURCE, "while following the metadata log", log)
                self._close()
                self._resync_asked = "error"
                self._stopping.wait(RETRY_S)

    def _step(self) -> None:
        conn = self._connection()
        if self._resync_asked is not None:
            self.loader.position = Position()   # from the log's start, or the snapshot the answer names
        result = self._fetch(conn)
        # The leader answered. The time kmon spends on its answer (a large snapshot's replay takes
        # tens of seconds) is not the leader's silence: that counts from when kmon can ask again.
        self._busy = True
        try:
            self._use(conn, result)
        finally:
            self._last_fetch_ok = time.monotonic()
            self._busy = False

    def _use(self, conn: Connection, result: wire.FetchResult) -> None:
        if result.snapshot is not None:
            log.info("the metadata log now starts after offset %d: loading the quorum's snapshot at offset %d, "
                     "epoch %d", self.loader.position.offset, result.snapshot.end_offset, result.snapshot.epoch)
            self._begin_resync(conn, self._resync_asked or "log_cleaned", result.snapshot)
            self._resync_asked = None
            return
        if self._resync_asked is not None:
            self._begin_resync(conn, self._resync_asked, None)
            self._resync_asked = None
        if result.diverging is not None:
            log.warning("the metadata log diverged from offset %d (epoch %d); resyncing",
                        result.diverging.end_offset, result.diverging.epoch)
            self._resync_asked = "diverged"
            return
        self._apply(result)
        if self.loader.caught_up and time.monotonic() >= self._next_quorum:
            self._describe_quorum()

    def _connection(self) -> Connection:
        if self._conn is None:
            host, port = self._leader.target()
            self._conn = Connection(host, port, self.config.security, self.config.timeout_s, __version__)
            for api, version in ((wire.API_FETCH, wire.FETCH_VERSION),
                                 (wire.API_FETCH_SNAPSHOT, wire.FETCH_SNAPSHOT_VERSION)):
                if not self._conn.supports(api, version):
                    address = self._conn.address
                    self._close()
                    raise ControllerError(f"controller listener {address} does not serve version {version} of "
                                          f"API {api}: is it a KRaft controller listener of Kafka 3.7 or newer?")
        return self._conn

    def _close(self) -> None:
        for conn in (self._conn, self._quorum_conn):
            if conn is not None:
                conn.close()
        self._conn = self._quorum_conn = None

    def _switch(self, conn: Connection, error: int, leader: wire.LeaderAndEpoch | None, what: str) -> None:
        """Go where the answer says the leader is; raises NotLeader to fetch again from there."""
        move = self._leader.refused((conn.host, conn.port), error, leader)
        log.debug("%s %s answered %s; leader now %s epoch %d: %s", conn.address, what, wire.error_name(error),
                  self._leader.leader_id, self._leader.epoch, move.value)
        if move is not Move.AGAIN:
            self._close()
        if (lost := self._leader.why_lost()) is not None:
            self.reachability.explain(lost)
        if move is Move.WAIT:
            self._stopping.wait(0.2)   # an election under way, or a node that keeps naming a leader kmon cannot find
        raise NotLeader()

    def _fetch(self, conn: Connection) -> wire.FetchResult:
        conn.settimeout(self.config.timeout_s + self.config.max_wait_ms / 1000)
        # KRaft refuses a last fetched epoch above the leader epoch; one below the quorum's is answered
        # FENCED_LEADER_EPOCH with the leader and its epoch
        pos = self.loader.position
        epoch = max(self._leader.epoch, pos.epoch)
        body = wire.fetch_request(pos.offset, pos.epoch, epoch, self.config.max_wait_ms, self.config.max_bytes)
        result = wire.parse_fetch(conn.call(wire.API_FETCH, wire.FETCH_VERSION, body))
        self._leader.learn(result.endpoints)
        if result.error in (wire.NOT_LEADER_OR_FOLLOWER, wire.FENCED_LEADER_EPOCH, wire.UNKNOWN_LEADER_EPOCH):
            self._switch(conn, result.error, result.leader, "fetch")
        if result.error == wire.CLUSTER_AUTHORIZATION_FAILED:
            raise ControllerError(f"controller listener {conn.address} refused to serve the metadata log "
                                  "(CLUSTER_AUTHORIZATION_FAILED): kmon's principal needs the CLUSTER_ACTION "
                                  "ACL on the cluster resource there (a powerful permission: the brokers' own)")
        if result.error:
            raise ConnectionError(f"controller listener {conn.address}: fetch answered "
                                  f"{wire.error_name(result.error)}")
        self._leader.served(result.leader)
        self.reachability.reached()
        self._last_fetch_ok = time.monotonic()
        return result

    # ------------------------------------------------------------------ loading and sending
    def _apply(self, result: wire.FetchResult) -> None:
        self._high_watermark = result.high_watermark
        leader = self._leader
        known = ControllerState(leader.leader_id, leader.epoch) if leader.leader_id >= 0 else None
        self._report(self.loader.load(result.records, result.high_watermark, _now_ms(), known))

    def _report(self, loaded: Loaded) -> None:
        """Send what a load gave, and say what it could not read."""
        for kind, message in loaded.malformed:
            self._telemetry.metric("kmon_collector_malformed_total", source=SOURCE, kind=kind).inc()
            log.warning("malformed %s (skipped, still following): %s", kind, message)
        for api_key, version, offset in loaded.unknown:
            self._skipped(f"unknown_record_{api_key}_v{version}",
                          f"metadata record type {api_key} version {version} at offset {offset} is unknown to this kmon")
        for what, offset in loaded.unmatched:
            self._skipped(f"unmatched_{what}", f"a {what.replace('_', ' ')} record at offset {offset} names a broker "
                                               "or partition kmon does not hold")
        publish_all(self._publisher, self._telemetry, SOURCE, loaded.events)
        if (r := loaded.ended) is not None:
            self._resyncs.inc()
            image = self.loader.image
            log.info("caught up with the metadata log at offset %d (%s resync: %d brokers, %d topics, %d partitions "
                     "in %.1f s)", self.loader.position.offset, r.reason, len(image.brokers), len(image.topics),
                     len(image.partitions), (_now_ms() - r.begun_ms) / 1000)

    def _skipped(self, kind: str, what: str) -> None:
        """A record read but not applied: counted by kind, said once per kind."""
        self._telemetry.metric("kmon_collector_malformed_total", source=SOURCE, kind=kind).inc()
        if kind not in self._said:
            self._said.add(kind)
            log.warning("%s: skipped (counted as kind %s; said once per kind)", what, kind)

    # ------------------------------------------------------------------ resync
    def _begin_resync(self, conn: Connection, reason: str, snapshot: wire.SnapshotId | None) -> None:
        """Forget the image, replay the snapshot (if any) silently and send it whole between markers;
        the log after it follows as it is fetched."""
        resync = Resync(f"kraft-{uuid.uuid4().hex[:12]}", reason, _now_ms())
        data = self._fetch_snapshot(conn, snapshot) if snapshot is not None else None
        self._report(self.loader.begin(resync, (snapshot.end_offset, snapshot.epoch, data)
                                       if snapshot is not None and data is not None else None, _now_ms()))
        if snapshot is not None and data is not None:
            image = self.loader.image
            log.info("loaded the metadata snapshot at offset %d (%d bytes): %d brokers, %d topics, %d partitions",
                     snapshot.end_offset, len(data), len(image.brokers), len(image.topics), len(image.partitions))

    def _fetch_snapshot(self, conn: Connection, snapshot: wire.SnapshotId) -> bytes:
        data = bytearray()
        size = None
        while size is None or len(data) < size:
            body = wire.fetch_snapshot_request(snapshot, len(data), self._leader.epoch, self.config.max_bytes)
            chunk = wire.parse_fetch_snapshot(conn.call(wire.API_FETCH_SNAPSHOT, wire.FETCH_SNAPSHOT_VERSION, body))
            if chunk.error in (wire.NOT_LEADER_OR_FOLLOWER, wire.FENCED_LEADER_EPOCH, wire.UNKNOWN_LEADER_EPOCH):
                self._resync_asked = "start"
                self._switch(conn, chunk.error, chunk.leader, "snapshot fetch")
            if chunk.error:
                raise ConnectionError(f"controller listener {conn.address}: snapshot fetch answered "
                                      f"{wire.error_name(chunk.error)}")
            size = chunk.size
            data += chunk.data
            if not chunk.data and len(data) < size:
                raise ConnectionError(f"controller listener {conn.address}: an empty snapshot chunk at "
                                      f"{len(data)} of {size} bytes")
        return bytes(data)

    # ------------------------------------------------------------------ the quorum
    def _describe_quorum(self) -> None:
        self._next_quorum = time.monotonic() + self.config.quorum_interval_s
        try:
            if self._quorum_conn is None:
                assert self._conn is not None
                host, port = self._leader.leader_address or (self._conn.host, self._conn.port)
                self._quorum_conn = Connection(host, port, self.config.security, self.config.timeout_s, __version__)
            info = wire.parse_describe_quorum(self._quorum_conn.call(
                wire.API_DESCRIBE_QUORUM, wire.DESCRIBE_QUORUM_VERSION, wire.describe_quorum_request()))
        except (OSError, MalformedRecord) as e:
            log.debug("DescribeQuorum failed: %s", e)
            if self._quorum_conn is not None:
                self._quorum_conn.close()
                self._quorum_conn = None
            return
        if info.error == wire.CLUSTER_AUTHORIZATION_FAILED:
            if not self._quorum_refused:
                log.warning("controller listener %s refused DescribeQuorum (CLUSTER_AUTHORIZATION_FAILED): kmon's "
                            "principal needs the DESCRIBE ACL on the cluster resource for the quorum's voters, "
                            "observers and lag; following the metadata log without them (said once)",
                            self._quorum_conn.address if self._quorum_conn else self.config.address)
            self._quorum_refused = True
            return
        if info.error:
            if self._quorum_conn is not None:   # asked a node that no longer leads: the next poll asks anew
                self._quorum_conn.close()
                self._quorum_conn = None
            log.debug("DescribeQuorum answered %s", wire.error_name(info.error))
            return
        if self._quorum_refused:
            log.info("DescribeQuorum answered again: the quorum's voters and lag are exported")
            self._quorum_refused = False
        now = _now_ms()
        state = quorum_state(info, now, self.loader.image.features)
        with self._quorum_lock:
            if (sent := self._quorum.described(state, time.monotonic())) is not None:
                self._send_quorum(sent, now)

    def _watch_leader(self) -> None:
        while not self._stopping.wait(1.0):
            try:
                with self._quorum_lock:
                    now = time.monotonic()
                    if (state := self._quorum.unanswered(now if self._busy else self._last_fetch_ok, now)) \
                            is not None:
                        log.warning("no leader of the metadata quorum has answered for %.0f s: exported as no "
                                    "leader (last epoch %d) until one answers",
                                    time.monotonic() - self._last_fetch_ok, state.epoch)
                        self._send_quorum(state, _now_ms())
            except Exception:   # a defect must not end the watch
                self._telemetry.survived(SOURCE, "while watching for the quorum's leader", log)

    def _send_quorum(self, state: QuorumState, now_ms: int) -> None:
        pos = self.loader.position
        at = LogMeta(max(pos.offset - 1, 0), pos.epoch)
        quorum = Event(cluster=self.config.cluster, source=SOURCE, kind="quorum", entity="quorum", op="upsert",
                       observed_ms=now_ms, data=state, log=at)
        publish_all(self._publisher, self._telemetry, SOURCE, [quorum])


def _now_ms() -> int:
    return int(time.time() * 1000)
