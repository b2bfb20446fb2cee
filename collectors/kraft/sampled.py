"""The KRaft collector's sampled mode: the brokers' metadata, polled, where the controllers cannot be
reached (their listener firewalled, CLUSTER_ACTION not granted).

A Metadata request to a broker every few seconds gives the unfenced brokers and every partition's
leader, leader epoch, replicas and ISR; DescribeQuorum, which a broker forwards to the controllers,
gives the quorum's leader and epoch (the active controller, never Metadata's "controller", a
random broker under KRaft). Each state that changed between two samples is one event marked
``sampled``. What happened in between is not invented: where a leader epoch (or the quorum's
epoch) moved further than the change the sample shows, the steps it skipped are counted
(``kmon_collector_sampled_missed_total{kind}``). Not seen at all in this mode: fenced brokers
(they are only absent), controlled shutdowns, ELR, ISR changes undone between two samples,
topic configs.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from collectors.kafka_encoding import MalformedRecord
from collectors.kraft import wire
from collectors.kraft.config import SampledConfig
from collectors.kraft.connection import Connection, ControllerError
from collectors.kraft.image import SOURCE
from collectors.kraft.quorum import quorum_state
from collectors.protocol import EventSink, publish_all
from collectors.resync import Resync, entity_order
from collectors.telemetry import Telemetry
from kmon import __version__
from kmon.events import BrokerState, ControllerState, Event, PartitionState, SnapshotMarker, TopicState, entity_key
from kmon.reachability import MONITORED_BOOTSTRAP, Reachability

log = logging.getLogger("kmon.collector.kraft")
MISSED_ELECTIONS = "leader_election"
MISSED_CONTROLLER_CHANGES = "controller_change"


def sample_states(metadata: wire.ClusterMetadata, quorum: wire.QuorumInfo | None,
                  now_ms: int) -> dict[str, tuple[str, Any]]:
    """entity -> (kind, state) of one sample."""
    states: dict[str, tuple[str, Any]] = {}
    if quorum is not None and not quorum.error:
        states["controller"] = ("controller", ControllerState(quorum.leader_id, quorum.epoch))
        states["quorum"] = ("quorum", quorum_state(quorum, now_ms))
    for broker_id, (host, port, rack) in sorted(metadata.brokers.items()):
        states[entity_key("broker", broker_id)] = ("broker", BrokerState(broker_id, host, port, rack))
    for topic in metadata.topics:
        if topic.error or topic.name is None:
            continue
        states[entity_key("topic", topic.name)] = ("topic", TopicState(
            topic=topic.name, topic_id=topic.topic_id,
            replicas={p.partition: p.replicas for p in sorted(topic.partitions, key=lambda p: p.partition)}))
        for p in topic.partitions:
            states[entity_key("partition", topic.name, p.partition)] = ("partition", PartitionState(
                topic=topic.name, partition=p.partition, leader=p.leader, leader_epoch=max(p.leader_epoch, 0),
                isr=p.isr, controller_epoch=0,   # 0: which controller wrote it, a sample does not say
                # Metadata names a moving partition's removing replicas among its replicas, not apart:
                # a broker a completed move dropped is left out
                remaining=p.replicas))
    return states


def missed(kind: str, old: Any, new: Any) -> int:
    """Steps an epoch took between two samples that the samples do not show."""
    if kind == "partition" and old.topic == new.topic:
        seen = int(new.leader != old.leader and new.leader >= 0)
        return max(0, new.leader_epoch - old.leader_epoch - seen)
    if kind == "controller":
        seen = int(new.broker_id != old.broker_id)
        return max(0, (new.epoch or 0) - (old.epoch or 0) - seen)
    return 0


class Samples:
    """What the samples said last, and the events and skipped steps of the next one. Pure."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.last: dict[str, tuple[str, Any]] = {}
        self.first = True

    def take(self, states: dict[str, tuple[str, Any]], now_ms: int) -> tuple[list[Event], dict[str, int]]:
        skipped = {MISSED_ELECTIONS: 0, MISSED_CONTROLLER_CHANGES: 0}
        if self.first:   # the first sample is sent whole, as every collector's start is
            self.first = False
            self.last = dict(states)
            resync = Resync(f"kraft-sampled-{now_ms}", "start", now_ms)
            body = resync.body(states, entity_order,
                               lambda e: self._event(e, *states[e], now_ms, resync.snapshot_id))
            return [resync.begin(self._marker), *body, resync.end(self._marker, len(states), now_ms)], skipped
        events: list[Event] = []
        for entity, (kind, state) in states.items():
            before = self.last.get(entity)
            if before is not None and before[1] == state:
                continue
            if before is not None and kind == "topic" and before[1].topic_id != state.topic_id:
                events.append(self._event(entity, kind, None, now_ms, None))   # deleted, created again
            elif before is not None:
                n = missed(kind, before[1], state)
                skipped[MISSED_CONTROLLER_CHANGES if kind == "controller" else MISSED_ELECTIONS] += n
            events.append(self._event(entity, kind, state, now_ms, None))
        for entity, (kind, _) in self.last.items():
            if entity not in states and not (kind in ("controller", "quorum")):
                events.append(self._event(entity, kind, None, now_ms, None))
        # the controller and the quorum stay as last sampled when DescribeQuorum did not answer
        self.last = {**{e: s for e, s in self.last.items() if s[0] in ("controller", "quorum")}, **states}
        return events, skipped

    def _event(self, entity: str, kind: str, state: Any, now_ms: int, snapshot_id: str | None) -> Event:
        return Event(cluster=self.cluster, source=SOURCE, kind=kind, entity=entity,
                     op="upsert" if state is not None else "delete", observed_ms=now_ms, data=state,
                     snapshot_id=snapshot_id, sampled=True)

    def _marker(self, kind: str, marker: SnapshotMarker, now_ms: int) -> Event:
        return Event(cluster=self.cluster, source=SOURCE, kind=kind, entity=entity_key(kind, SOURCE), op="marker",
                     observed_ms=now_ms, data=marker, snapshot_id=marker.snapshot_id, sampled=True)


class SampledCollector:
    def __init__(self, config: SampledConfig, publisher: EventSink, telemetry: Telemetry) -> None:
        self.config = config
        self._publisher = publisher
        self._telemetry = telemetry
        self.reachability = Reachability(MONITORED_BOOTSTRAP, config.address, f"retrying every {config.interval_s:g} s",
                                         log)
        self._samples = Samples(config.cluster)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kmon-kraft-sampled", daemon=True)
        self._conn: Connection | None = None
        self._next = 0
        self._cluster_id: str | None = None
        self._last_ok = 0.0

    def start(self) -> None:
        log.info("sampling the metadata of cluster %r from the brokers %s every %g s (sampled mode: changes "
                 "between two samples are counted, not seen)", self.config.cluster, self.config.address,
                 self.config.interval_s)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)
        if self._conn is not None:
            self._conn.close()

    def request_resync(self, reason: str) -> None:
        self._samples = Samples(self.config.cluster)

    def cluster_id(self) -> str | None:
        return self._cluster_id

    def health(self) -> str | None:
        if time.monotonic() - self._last_ok > 3 * self.config.interval_s + self.config.timeout_s:
            return f"no metadata sample from the brokers {self.config.address} lately"
        return None

    def _run(self) -> None:
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self._sample()
            except ControllerError as e:
                log.error("%s", e)
                self.reachability.refused(str(e))
                self._drop()
            except (OSError, MalformedRecord) as e:
                self.reachability.failed(str(e))
                self._drop()
            except Exception:   # a defect must not end the sampling
                self._telemetry.survived(SOURCE, "while sampling the brokers' metadata", log)
                self._drop()
            self._stopping.wait(max(0.0, self.config.interval_s - (time.monotonic() - started)))

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _sample(self) -> None:
        if self._conn is None:
            host, port = self.config.bootstrap[self._next % len(self.config.bootstrap)]
            self._next += 1
            self._conn = Connection(host, port, self.config.security, self.config.timeout_s, __version__)
        metadata = wire.parse_metadata(self._conn.call(wire.API_METADATA, wire.METADATA_VERSION,
                                                       wire.metadata_request()))
        quorum: wire.QuorumInfo | None = None
        try:   # the broker forwards it to the controllers, which may still be asked this way
            quorum = wire.parse_describe_quorum(self._conn.call(
                wire.API_DESCRIBE_QUORUM, wire.DESCRIBE_QUORUM_VERSION, wire.describe_quorum_request()))
        except MalformedRecord as e:
            log.debug("DescribeQuorum through %s failed: %s", self._conn.address, e)
        self._cluster_id = metadata.cluster_id
        self.reachability.reached()
        self._last_ok = time.monotonic()
        now = int(time.time() * 1000)
        events, skipped = self._samples.take(sample_states(metadata, quorum, now), now)
        for kind, n in skipped.items():
            if n:
                self._telemetry.metric("kmon_collector_sampled_missed_total", source=SOURCE, kind=kind).inc(n)
                log.info("the epochs moved %d %s step(s) further than the samples show (counted, not invented)",
                         n, kind.replace("_", " "))
        publish_all(self._publisher, self._telemetry, SOURCE, events)
