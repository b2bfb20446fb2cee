"""The KRaft collector on a synthetic metadata log, beside the ZooKeeper collector on the same cluster.

Pure Python, one thread, no Kafka and no ZooKeeper: each collector's own code runs with its I/O
answered from memory, and publishing stops at the bytes the publisher would queue (``kmon.codec.encode``
of every event and its key); the network is not measured.

- **log**: the metadata log of a :class:`bench.synthetic.Shape` cluster, from offset 0, as a
  ``KraftCollector`` reads it on start when the log was never cleaned: ``_begin_resync`` (no snapshot),
  then ``_apply`` of each fetch (the collector's 8 MiB ``max_bytes``, cut at batch boundaries):
  batches(), decode_metadata_record(), MetadataImage.replay() per fetch, every event encoded, then the
  end marker.
- **snapshot**: the same batches served as the quorum's snapshot (a fake controller connection answers
  FetchSnapshot from memory; a snapshot Kafka writes holds the image instead, one record per entity:
  fewer records, no PartitionChangeRecords): ``_begin_resync`` with the snapshot (a new image, silent fold, snapshot_events(),
  all encoded), then one empty fetch at the high watermark, which publishes the end marker: the whole
  picture is on its way to the events topic.
- **zk**: the ZooKeeper collector's snapshot of the same cluster's znodes (bench.zk's tree, Kafka's own
  formats): ``ZkCollector._snapshot`` with a fake kazoo client answering every read at once from memory,
  so ZkTree's fold, snapshot() and the encoding are measured without the ZooKeeper reads that bound the
  real collector (bench/README: 104k reads, 32.7 s at 100k partitions).

The log: a LeaderChange, the metadata.version FeatureLevel, every broker's RegisterBrokerRecord (v3,
fenced) and its unfencing, then per topic its TopicRecord, ConfigRecord (min.insync.replicas) and
PartitionRecords (v1, with directories, as Kafka 3.7+ writes them); then a broker failure: its fencing
and a PartitionChangeRecord (v1) per partition it held (out of the ISR; a new leader where it led).
Records go into batches of at most 1,000, a topic's records never split (a creation is one atomic
operation); the failure's 25k changes are cut into batches of 1,000.

The record encoders are the tests' (tests/unit/kraft_builders.py, imported from there).
"""
from __future__ import annotations

import cProfile
import gc
import io
import pstats
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

import tests.unit.kraft_builders as kb
from bench.synthetic import Shape
from bench.zk import _tree as zk_tree
from collectors.kafka_encoding import Reader
from collectors.kraft import wire
from collectors.kraft.collector import KraftCollector
from collectors.kraft.config import KraftCollectorConfig
from collectors.kraft.records import TOPIC_RESOURCE
from collectors.telemetry import Telemetry
from collectors.zk.collector import ZkCollector, ZkCollectorConfig
from collectors.zk.znodes import ZkPaths
from kmon.codec import encode
from kmon.events import Event
from kmon.gc_tuning import collect_less_often

CLUSTER = "bench"
RECORDS_PER_BATCH = 1000
LEADER, EPOCH = 3000, 1          # the controller quorum's leader and its raft epoch
FAILED = 1                       # the broker that fails
METADATA_VERSION = 21            # 3.9-IV0's feature level


@dataclass
class MetadataLog:
    data: bytes          # record batches, back to back
    batches: int
    records: int         # control records included
    end_offset: int      # the next offset: the high watermark once all is committed


class _LogWriter:
    """Packs operations' records into batches as the controller's accumulator does: a batch takes
    whole operations up to RECORDS_PER_BATCH records; a larger operation is cut into full batches."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.pending: list[bytes | tuple[bytes, bytes]] = []
        self.offset = 0       # of the next record written
        self.records = 0

    @property
    def next_offset(self) -> int:
        return self.offset + len(self.pending)

    def op(self, records: list[bytes]) -> None:
        if len(self.pending) + len(records) > RECORDS_PER_BATCH:
            self.flush()
        for i in range(0, len(records), RECORDS_PER_BATCH):
            self.pending += records[i:i + RECORDS_PER_BATCH]
            if len(self.pending) >= RECORDS_PER_BATCH:
                self.flush()

    def control(self, key: bytes, value: bytes) -> None:
        self.flush()
        self.pending.append((key, value))
        self.flush(control=True)

    def flush(self, control: bool = False) -> None:
        if self.pending:
            self.out.append(kb.batch(self.offset, self.pending, epoch=EPOCH, control=control))
            self.offset += len(self.pending)
            self.records += len(self.pending)
            self.pending = []

    def log(self) -> MetadataLog:
        self.flush()
        return MetadataLog(b"".join(self.out), len(self.out), self.records, self.offset)


def _topic_id(t: int) -> str:
    return str(uuid.UUID(int=(0xB3 << 120) | t))


def metadata_log(shape: Shape) -> MetadataLog:
    """The healthy cluster's metadata log, then broker FAILED's failure."""
    w = _LogWriter()
    w.control(kb.control_key(2), kb.leader_change_value(LEADER, voters=(LEADER,), granting=(LEADER,)))
    w.op([kb.feature_level("metadata.version", METADATA_VERSION)])
    epochs = {}   # a broker's epoch is the offset of its registration
    for b in range(1, shape.brokers + 1):
        epochs[b] = w.next_offset
        w.op([kb.register_broker(3, b, str(uuid.UUID(int=b)), epochs[b],
                                 endpoints=[("PLAINTEXT", "127.0.0.1", 9000 + b, 0)],
                                 features={"metadata.version": (7, METADATA_VERSION)}, fenced=True,
                                 log_dirs=[str(uuid.UUID(int=1000 + b))])])
    w.op([kb.broker_change(b, epochs[b], fenced=-1) for b in range(1, shape.brokers + 1)])
    ppt = range(shape.partitions_per_topic)
    for t in range(shape.topics):
        name, tid = shape.topic(t), _topic_id(t)
        records = [kb.topic(name, tid), kb.config(TOPIC_RESOURCE, name, "min.insync.replicas", "2")]
        for p in ppt:
            r = shape.replicas(t, p)
            records.append(kb.partition(tid, p, r, r, r[0], version=1,
                                        directories=[str(uuid.UUID(int=1000 + b)) for b in r]))
        w.op(records)
    changes = [kb.broker_change(FAILED, epochs[FAILED], fenced=1)]
    for t in range(shape.topics):
        for p in ppt:
            r = shape.replicas(t, p)
            if FAILED in r:
                isr = [b for b in r if b != FAILED]
                changes.append(kb.partition_change(_topic_id(t), p, isr=isr,
                                                   leader=isr[0] if r[0] == FAILED else None, version=1))
    w.op(changes)
    return w.log()


def fetches(log: MetadataLog, max_bytes: int) -> list[bytes]:
    """The log as the controller hands it out: up to ``max_bytes`` of whole batches per fetch."""
    out, pos, start = [], 0, 0
    data = log.data
    while pos < len(data):
        end = pos + 12 + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if end - start > max_bytes and pos > start:
            out.append(data[start:pos])
            start = pos
        pos = end
    out.append(data[start:])
    return out


# ---------------------------------------------------------------- the collectors, I/O from memory

class _Encoder:
    """The publisher minus the network: each event's key and value bytes, counted, not kept."""

    def __init__(self) -> None:
        self.events = 0
        self.bytes = 0

    def publish(self, event: Event) -> None:
        self.bytes += len(event.message_key.encode()) + len(encode(event))
        self.events += 1


class _Counter(_Encoder):
    """No publisher at all: what decoding, folding and the collector's own bookkeeping cost."""

    def publish(self, event: Event) -> None:
        self.events += 1


class _SnapshotConnection:
    """A controller connection answering FetchSnapshot from memory: the responses, in order."""
    address = "memory:0"

    def __init__(self, responses: list[bytes]) -> None:
        self.responses = list(responses)

    def call(self, api_key: int, version: int, body: bytes, **_: Any) -> Reader:
        assert api_key == wire.API_FETCH_SNAPSHOT
        return Reader(self.responses.pop(0), "FetchSnapshot v1 response", flexible=True)


def snapshot_responses(data: bytes, snapshot: wire.SnapshotId, max_bytes: int) -> list[bytes]:
    """FetchSnapshot v1 response bodies serving ``data`` a chunk of ``max_bytes`` at a time."""
    return [_fetch_snapshot_response(snapshot, len(data), pos, data[pos:pos + max_bytes])
            for pos in range(0, len(data), max_bytes)]


def _fetch_snapshot_response(snapshot: wire.SnapshotId, size: int, position: int, chunk: bytes) -> bytes:
    w = wire.Writer().int32(0).int16(0).count(1).compact_string(wire.METADATA_TOPIC).count(1)
    w.int32(0).int16(0).int64(snapshot.end_offset).int32(snapshot.epoch).no_tags()
    w.int64(size).int64(position).compact_bytes(chunk).no_tags()
    return w.no_tags().no_tags().bytes()


def _kraft(sink: _Encoder) -> KraftCollector:
    collector = KraftCollector(KraftCollectorConfig(controllers=(("memory", 0),), cluster=CLUSTER), sink,
                               Telemetry(CLUSTER))
    collector._leader_id, collector._leader_epoch = LEADER, EPOCH   # as the first fetch's answer says
    return collector


def _fetched(records: bytes, hw: int) -> wire.FetchResult:
    return wire.FetchResult(0, hw, 0, records, wire.LeaderAndEpoch(LEADER, EPOCH), None, None)


def kraft_log(log: MetadataLog, chunks: list[bytes], sink: _Encoder) -> _Encoder:
    """Start on a log that begins at offset 0: every record folded and published, then the end marker."""
    collector = _kraft(sink)
    collector._begin_resync(None, "start", None)  # type: ignore[arg-type]   # no snapshot: no connection used
    for chunk in chunks:
        collector._apply(_fetched(chunk, log.end_offset))
    assert collector.loader.caught_up and collector.loader.resync is None
    return sink


def kraft_snapshot(conn: _SnapshotConnection, snapshot: wire.SnapshotId) -> _Encoder:
    """Start on a log that begins after a snapshot: the snapshot loaded and published whole, then the
    (empty) log after it read up to the high watermark, which sends the end marker."""
    sink = _Encoder()
    collector = _kraft(sink)
    collector._begin_resync(conn, "start", snapshot)  # type: ignore[arg-type]
    collector._apply(_fetched(b"", snapshot.end_offset))
    assert collector.loader.caught_up and collector.loader.resync is None
    return sink


class _Answer:
    __slots__ = ("value", "missing")

    def __init__(self, value: Any, missing: bool = False) -> None:
        self.value, self.missing = value, missing

    def get(self) -> Any:
        if self.missing:
            raise NoNodeError()
        return self.value


class FakeKazoo:
    """A ZooKeeper that answers every read at once, from the znodes written as bench.zk writes them."""

    def __init__(self, shape: Shape, paths: ZkPaths) -> None:
        self.data: dict[str, tuple[bytes, ZnodeStat]] = {}
        self.children: dict[str, list[str]] = {"/": []}
        zxid = 0
        for wave in zk_tree(shape, paths):
            for path, value in wave:
                zxid += 1
                parent, _, name = path.rpartition("/")
                self.children.setdefault(parent or "/", []).append(name)
                self.children[path] = []
                self.data[path] = (value, ZnodeStat(zxid, zxid, 0, 1_700_000_000_000, 0, 0, 0, 0, len(value), 0, zxid))
        for path, names in self.children.items():   # a listing's pzxid: its last child's creation
            if path in self.data and names:
                value, stat = self.data[path]
                self.data[path] = (value, stat._replace(numChildren=len(names), pzxid=zxid))

    def get_async(self, path: str, watch: Any = None) -> _Answer:
        found = self.data.get(path)
        return _Answer(found, found is None)

    def get_children_async(self, path: str, watch: Any = None, include_data: bool = False) -> _Answer:
        found = self.data.get(path)
        return _Answer(None if found is None else (list(self.children[path]), found[1]), found is None)

    def exists(self, path: str, watch: Any = None) -> ZnodeStat | None:
        found = self.data.get(path)
        return None if found is None else found[1]

    def get_children(self, path: str, watch: Any = None, include_data: bool = False) -> Any:
        return self.get_children_async(path, watch, include_data).get()


def zk_snapshot(store: FakeKazoo) -> _Encoder:
    sink = _Encoder()
    collector = ZkCollector(ZkCollectorConfig(hosts="memory:0", cluster=CLUSTER), sink, Telemetry(CLUSTER))
    collector._client = store   # type: ignore[assignment]
    collector._snapshot("start")
    return sink


# ---------------------------------------------------------------- measuring

def _only_inputs_kept() -> None:
    """The garbage of the runs before is collected (also what a part froze: streaming/gc_tuning.py),
    and what is left, the bench's inputs, frozen: the collectors' GC passes scan only what they allocate."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _timed(run: Callable[[], _Encoder]) -> tuple[float, float, _Encoder]:
    """(wall s, CPU s of this process, what was published); the garbage of the run before is gone first."""
    _only_inputs_kept()
    wall, cpu = time.perf_counter(), time.process_time()
    sink = run()
    return time.perf_counter() - wall, time.process_time() - cpu, sink


MEASURES = ("log", "log_unpublished", "snapshot", "zk")


def run(partitions: int, repeat: int, progress: Callable[[str], None], profile: bool = False,
        measures: Sequence[str] = MEASURES) -> dict:
    shape = Shape(partitions=partitions, cluster=CLUSTER)
    progress(f"{partitions} partitions: encoding the metadata log and writing the znodes (not timed)")
    log = metadata_log(shape)
    max_bytes = KraftCollectorConfig(controllers=(("memory", 0),), cluster=CLUSTER).max_bytes
    chunks = fetches(log, max_bytes)
    snapshot = wire.SnapshotId(log.end_offset, EPOCH)
    responses = snapshot_responses(log.data, snapshot, max_bytes)
    store = FakeKazoo(shape, ZkPaths("")) if "zk" in measures else None
    progress(f"  {log.records} records in {log.batches} batches ({len(log.data) / 1e6:.1f} MB, {len(chunks)} "
             f"fetches); {len(store.data) if store else 'no'} znodes")
    runs: dict[str, Callable[[], _Encoder]] = {name: measure for name, measure in {
        "log": lambda: kraft_log(log, chunks, _Encoder()),
        "log_unpublished": lambda: kraft_log(log, chunks, _Counter()),
        "snapshot": lambda: kraft_snapshot(_SnapshotConnection(responses), snapshot),
        "zk": lambda: zk_snapshot(store),  # type: ignore[arg-type]
    }.items() if name in measures}
    collect_less_often()   # as `kmon collect` does
    _only_inputs_kept()
    try:
        if profile:
            _profile(lambda: kraft_log(log, chunks, _Encoder()), progress)
        samples: dict[str, list[tuple[float, float, _Encoder]]] = {name: [] for name in runs}
        for i in range(repeat):   # interleaved, so that the machine's noise falls on all alike
            for name, measure in runs.items():
                samples[name].append(_timed(measure))
            progress(f"  round {i + 1}/{repeat} (wall/CPU s): " + ", ".join(
                f"{k} {v[-1][0]:.2f}/{v[-1][1]:.2f}" for k, v in samples.items()))
    finally:
        gc.unfreeze()
    wall = {k: statistics.median(s[0] for s in v) for k, v in samples.items()}
    cpu = {k: statistics.median(s[1] for s in v) for k, v in samples.items()}
    out = {k: v[-1][2] for k, v in samples.items()}
    progress(f"  medians, wall s: {wall}; CPU s: {cpu}; MB of events: "
             + ", ".join(f"{k} {sink.bytes / 1e6:.1f}" for k, sink in out.items() if sink.bytes))
    return _row(partitions, log, wall, cpu, out)


def _row(partitions: int, log: MetadataLog, wall: dict[str, float], cpu: dict[str, float],
         out: dict[str, _Encoder]) -> dict:
    """The table's row: the columns of the measurements made."""
    row: dict[str, Any] = {"partitions": partitions, "records": log.records, "log_mb": round(len(log.data) / 1e6, 1)}
    if "log" in cpu:
        row |= {"log_events": out["log"].events, "log_cpu_s": cpu["log"], "records_per_s": log.records / cpu["log"],
                "events_per_s": out["log"].events / cpu["log"]}
    if "log_unpublished" in cpu:
        row["unpublished_records_per_s"] = log.records / cpu["log_unpublished"]
    if "snapshot" in cpu:
        row |= {"snapshot_events": out["snapshot"].events, "snapshot_cpu_s": cpu["snapshot"],
                "snapshot_wall_s": wall["snapshot"]}
    if "zk" in cpu:
        row |= {"zk_events": out["zk"].events, "zk_cpu_s": cpu["zk"]}
        if "snapshot" in cpu:
            row["zk_over_kraft"] = cpu["zk"] / cpu["snapshot"]
    return row


def _profile(run: Callable[[], Any], progress: Callable[[str], None]) -> None:
    prof = cProfile.Profile()
    prof.runcall(run)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    progress("cProfile of the log run (by own time):\n" + out.getvalue())
