"""The metadata log loaded into the image, as Kafka's MetadataLoader and MetadataBatchLoader do it: pure.

Committed records go in (a fetch's record batches and the high watermark, or a snapshot's); events,
the position of the next fetch, and whether the log has been read up to its high watermark come
out. A (re)sync forgets the image, replays the snapshot silently and sends it whole between a
begin marker and, once the log after it has been read up to the high watermark, an end marker:
the stream then deletes what vanished while kmon did not look. Everything that talks to the
quorum (fetch, the leader, DescribeQuorum) is the collector's (collector.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from collectors.kafka_encoding import MalformedRecord
from collectors.kraft.image import MetadataImage, Replayed
from collectors.kraft.records import (FeatureLevelRecord, MetadataRecord, batches, decode_metadata_record, kraft_version,
                                      leader_change)
from collectors.resync import Resync
from kmon.construct import constructor
from kmon.events import ControllerState, Event, LogMeta

Entry = tuple[MetadataRecord | ControllerState, LogMeta]   # what the image replays


@dataclass(frozen=True)
class Position:
    """Where the next fetch starts, and the epoch of the record before it (KRaft checks it)."""
    offset: int = 0
    epoch: int = 0       # 0 at offset 0: -1 is refused


# one of each per record: built without the frozen __init__ (kmon/construct.py)
_log_meta, _position = constructor(LogMeta), constructor(Position)


@dataclass
class Loaded:
    """What one load gave: its events in order, what could not be read (kind, message), the unknown
    record types met ((api key, version, offset)), the changes of entities the image does not hold
    ((what, offset)), and the resync it ended, if it ended one."""
    events: list[Event] = field(default_factory=list)
    malformed: list[tuple[str, str]] = field(default_factory=list)
    unknown: list[tuple[int, int, int]] = field(default_factory=list)
    unmatched: list[tuple[str, int]] = field(default_factory=list)
    ended: Resync | None = None

    def add(self, replayed: Replayed) -> None:
        self.events += replayed.events
        self.unknown += replayed.unknown
        self.unmatched += replayed.unmatched


class MetadataLoader:
    def __init__(self, cluster: str) -> None:
        self.image = MetadataImage(cluster)
        self.published: set[str] = set()   # the entities sent and not deleted since
        self.position = Position()
        self.caught_up = False       # the log read up to the high watermark, no transaction open
        self.resync: Resync | None = None

    def begin(self, resync: Resync, snapshot: tuple[int, int, bytes] | None, now_ms: int) -> Loaded:
        """A (re)sync from ``snapshot`` (its end offset, epoch and records), else from the log's start:
        the image forgotten (what was sent is kept, to delete what vanished), the snapshot replayed
        silently, and the begin marker with every entity's state."""
        # the controller is no record of a snapshot: the last one known stands until the log says more
        self.image = MetadataImage(self.image.cluster, controller=self.image.controller)
        self.caught_up = False
        self.resync = resync
        out = Loaded()
        at = LogMeta(0, 0)
        if snapshot is not None:
            end_offset, epoch, data = snapshot
            at = LogMeta(max(end_offset - 1, 0), epoch)
            out.add(self.image.replay(self._snapshot(data, f"snapshot {end_offset}/{epoch}", at, out), now_ms,
                                      self.published, silent=True))
            self.position = Position(end_offset, epoch)
        else:
            self.position = Position()
        out.events += self.image.snapshot_events(resync, at, now_ms, self.published)
        return out

    def load(self, records: bytes, high_watermark: int, now_ms: int, leader: ControllerState | None) -> Loaded:
        """One fetch's records: those from the position up to the high watermark are replayed. Once
        read up to it, the controller is the quorum's ``leader`` where the log has not said so since
        (its LeaderChange came before the snapshot, or before kmon looked), and an open resync ends."""
        out = Loaded()
        out.add(self.image.replay(self._committed(records, high_watermark, out), now_ms, self.published))
        if self.position.offset >= high_watermark and not self.image.in_transaction():
            self._caught_up(leader, now_ms, out)
        return out

    def _snapshot(self, data: bytes, name: str, at: LogMeta, out: Loaded) -> Iterator[Entry]:
        for batch in batches(data):
            if batch.malformed:
                out.malformed.append(("batch", f"{name}: {batch.malformed}"))
            if batch.control:   # a snapshot's header, footer and, of a dynamic quorum, its kraft.version
                for _, key, value in batch.values:
                    if (control := self._control(key, value, at, out)) is not None:
                        yield control, at
                continue
            for _, _, value in batch.values:
                if value is not None and (record := self._decode(value, at, out)) is not None:
                    yield record, at

    def _committed(self, records: bytes, high_watermark: int, out: Loaded) -> Iterator[Entry]:
        """The records from the position up to the high watermark, read; the position moves past each
        once it is replayed."""
        for batch in batches(records):
            if batch.last_offset < self.position.offset:
                continue
            if batch.malformed:
                out.malformed.append(("batch", batch.malformed))
            for offset, key, value in batch.values:
                if offset < self.position.offset:
                    continue
                if offset >= high_watermark:
                    break   # not committed yet: a new leader may truncate it
                at = _log_meta(offset, batch.epoch, batch.max_timestamp_ms)
                if batch.control:
                    record = self._control(key, value, at, out)
                else:
                    record = self._decode(value, at, out) if value is not None else None
                if record is not None:
                    yield record, at
                self.position = _position(offset + 1, batch.epoch)
            if batch.malformed and batch.last_offset < high_watermark:
                self.position = Position(batch.last_offset + 1, batch.epoch)

    @staticmethod
    def _decode(value: bytes, at: LogMeta, out: Loaded) -> MetadataRecord | None:
        try:
            return decode_metadata_record(value)
        except MalformedRecord as e:
            out.malformed.append(("record", f"metadata record at offset {at.offset}: {e}"))
            return None

    @staticmethod
    def _control(key: bytes | None, value: bytes | None, at: LogMeta,
                 out: Loaded) -> ControllerState | FeatureLevelRecord | None:
        """A LeaderChange control record as the controller it names from its epoch on, a KRaftVersion as
        the feature level it sets; None for the rest."""
        try:
            leader = leader_change(key, value)
            return ControllerState(leader, at.epoch) if leader is not None else kraft_version(key, value)
        except MalformedRecord as e:
            out.malformed.append(("record", f"control record at offset {at.offset}: {e}"))
            return None

    def _caught_up(self, leader: ControllerState | None, now_ms: int, out: Loaded) -> None:
        at = LogMeta(max(self.position.offset - 1, 0), self.position.epoch)
        known = self.image.controller
        if leader is not None and leader.broker_id >= 0 and (known is None or (known.epoch or 0) < (leader.epoch or 0)):
            out.add(self.image.replay([(leader, at)], now_ms, self.published))
        if self.resync is not None:
            r, self.resync = self.resync, None
            out.events.append(self.image.end_marker(r, at, now_ms))
            out.ended = r
        self.caught_up = True
