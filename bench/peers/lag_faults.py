"""The lag faults of `python -m bench peers`: what each system says of a group's lag in seconds and
of the records it lost, beside the truth, which the bench knows because it wrote the records
(their offsets and times, from the producer's delivery reports) and reads the committed offsets
and log start offsets from the cluster.

- ``lag-producer-pause``: a consumer stops committing while records arrive, then the producer
  pauses. The truth (now minus the time of the record at the committed offset) keeps growing; an
  estimate from the production rate has nothing to go on once the producer pauses.
- ``lag-retention``: a group 25 records behind, then the topic's retention.ms cut to 1 s: the
  brokers' own retention deletes what it had not read (the bench's brokers check every second).
- ``lag-compacted``: a compacted topic whose cleaner removes superseded records the group has not
  read: the lag in offsets counts offsets that no longer hold records; none of them was lost.

Each fault samples the systems' figures from Prometheus every SAMPLE_S (kmon's series, and
klag-exporter's of its two instances) beside the truth at that moment, into ``FaultRun.figures``.
A figure is as old as the system's interval (kmon's lag interval and klag-exporter's poll, 30 s
each by default) plus a scrape.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from confluent_kafka import (OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer,
                             TopicPartition)
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from bench.peers.faults import (Ctx, FaultRun, Member, alter_configs, create_topic, delete_group, delete_topic, spread,
                               stable, wait)
from bench.peers.parts import KAFKA_CLUSTER, KLAG_MODES, prom_value

SAMPLE_S = 5.0
RATE_PER_S = 2.0
SYSTEMS = ("kmon", *KLAG_MODES)   # the prefixes of _figures' names
# how long a system may take to show a new topic's offsets before the fault goes on without it
LEARN_CAP_S = 300.0


class Written:
    """Records written to one partition by a thread of their own, ``rate`` a second, until paused;
    each offset's CreateTime (ms) as the broker stored it."""

    def __init__(self, bootstrap: str, topic: str, rate: float = RATE_PER_S,
                 key: Callable[[int], bytes | None] = lambda i: None) -> None:
        self.times: dict[int, int] = {}
        self.producing = threading.Event()
        self._done = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self._topic, self._rate, self._key = topic, rate, key
        self._thread = threading.Thread(target=self._run, name=f"writer-{topic}", daemon=True)

    def _delivered(self, err: KafkaError | None, msg) -> None:   # noqa: ANN001 (confluent_kafka.Message)
        if err is None:
            self.times[msg.offset()] = msg.timestamp()[1]

    def write(self, n: int) -> None:
        """``n`` records now, at the rate, whether producing or not."""
        for i in range(n):
            self._producer.produce(self._topic, value=b"%d" % i, key=self._key(len(self.times) + i), partition=0,
                                   on_delivery=self._delivered)
            self._producer.flush(30)
            time.sleep(1 / self._rate)

    def start(self) -> "Written":
        self.producing.set()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.is_set():
            if self.producing.wait(0.2):
                self.write(1)

    def stop(self) -> None:
        self.producing.clear()
        self._done.set()
        self._thread.join(30)
        self._producer.flush(30)


def _committed(ctx: Ctx, group: str, topic: str) -> int | None:
    [f] = ctx.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]).values()
    [tp] = f.result(30).topic_partitions
    return tp.offset if tp.offset >= 0 else None


def _commit(ctx: Ctx, group: str, topic: str, offset: int) -> None:
    [f] = ctx.admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, offset)])]).values()
    f.result(30)


def _offsets(ctx: Ctx, topic: str) -> tuple[int, int]:
    """(log start, end) of the topic's partition 0."""
    reader = Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": "bench-peers-offsets"})
    try:
        return reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        reader.close()


def _records(ctx: Ctx, topic: str, start: int) -> list[tuple[int, int]]:
    """(offset, CreateTime ms) of every record the partition still holds from ``start``."""
    reader = Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": "bench-peers-records",
                       "enable.partition.eof": True, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        reader.assign([TopicPartition(topic, 0, start)])
        out: list[tuple[int, int]] = []
        while True:
            msg = reader.poll(10)
            if msg is None or (msg.error() and msg.error().code() == KafkaError._PARTITION_EOF):
                return out
            if not msg.error():
                out.append((msg.offset(), msg.timestamp()[1]))
    finally:
        reader.close()


def _figures(ctx: Ctx, group: str, topic: str) -> dict[str, float | None]:
    """Each system's lag in seconds, lag in offsets and records lost for the group, as Prometheus has them."""
    prom = ctx.recorder.prometheus
    out: dict[str, float | None] = {
        "kmon_lag_s": prom_value(prom, f'max(kmon_consumer_group_lag_seconds{{group="{group}",topic="{topic}"}})'),
        "kmon_lag": prom_value(prom, f'sum(kmon_consumer_group_lag{{group="{group}",topic="{topic}"}})'),
        "kmon_lost": prom_value(prom, f'sum(kmon_consumer_group_lost_messages_total{{group="{group}",topic="{topic}"}})')}
    for job in KLAG_MODES:
        where = f'job="{job}",cluster_name="{KAFKA_CLUSTER}",group="{group}",topic="{topic}"'
        out[f"{job}_lag_s"] = prom_value(prom, f"max(kafka_consumergroup_group_lag_seconds{{{where}}})")
        out[f"{job}_lag"] = prom_value(prom, f"sum(kafka_consumergroup_group_lag{{{where}}})")
        out[f"{job}_lost"] = prom_value(prom, f"sum(kafka_consumergroup_group_messages_lost{{{where}}})")
        out[f"{job}_end"] = prom_value(prom, f'max(kafka_partition_latest_offset{{job="{job}",topic="{topic}"}})')
        flags = prom_value(prom, f'count(kafka_consumergroup_group_lag_seconds{{{where},compaction_detected="true"}})')
        out[f"{job}_compaction_flag"] = 1.0 if flags else 0.0
    return out


class Sampler(threading.Thread):
    """Every SAMPLE_S: the truth (``truth()``, a dict) beside each system's figures, into ``run.figures``."""

    def __init__(self, ctx: Ctx, run: FaultRun, group: str, topic: str, truth: Callable[[], dict]) -> None:
        super().__init__(daemon=True, name=f"sampler-{group}")
        self.ctx, self.fault, self.group, self.topic, self.truth = ctx, run, group, topic, truth
        self.phase = "before"
        self._done = threading.Event()
        self.start()

    def run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            try:
                row = {"fault": self.fault.name, "phase": self.phase, "t": round(time.time() - self.fault.moment, 1),
                       **self.truth(), **_figures(self.ctx, self.group, self.topic)}
            except Exception as e:   # noqa: BLE001 -- a sample lost is noted, the fault goes on
                self.fault.notes.append(f"a sample failed: {type(e).__name__}: {e}")
                continue
            self.fault.figures.append(row)

    def stop(self) -> None:
        self._done.set()
        self.join(30)


def _age_truth(ctx: Ctx, group: str, topic: str, times: dict[int, int]) -> Callable[[], dict]:
    """The lag as it is: offsets from the committed one to the end, and the age of the record at the
    committed offset (0 when caught up)."""
    def truth() -> dict:
        committed = _committed(ctx, group, topic)
        _, end = _offsets(ctx, topic)
        if committed is None:
            return {"committed": None, "true_lag": None, "true_lag_s": None}
        age = (time.time() * 1000 - times[committed]) / 1000 if committed < end and committed in times else 0.0
        return {"committed": committed, "true_lag": end - committed, "true_lag_s": round(age, 1)}
    return truth


def producer_pause(ctx: Ctx, consuming_s: float = 40.0, writing_s: float = 60.0, paused_s: float = 120.0) -> FaultRun:
    """A member consumes and commits, then stops committing (it goes on polling, so the group keeps it);
    ``writing_s`` later the producer pauses, and the figures are sampled ``paused_s`` more."""
    group = topic = "peers-lag-pause"
    created = time.time()
    create_topic(ctx, topic, spread(ctx, 1))
    ctx.recorder.watch_group(group)
    writer = Written(ctx.bootstrap, topic).start()
    member = Member(ctx.bootstrap, group, topic)
    run = FaultRun("lag producer pause", f"group {group}: its consumer stops committing while {RATE_PER_S:g} records/s "
                   f"arrive; {writing_s:g} s later the producer pauses for {paused_s:g} s", {"group": group})
    sampler = None
    try:
        wait(lambda: stable(ctx, group, 1), 120, f"{group} stable", interval=0.5)
        time.sleep(consuming_s)
        # kmon shows a group's lag once it knows the end offsets; klag-exporter shows lag 0 before it does
        _learned(ctx, run, lambda f, system: f[f"{system}_lag"] is not None if system == "kmon"
                 else (f[f"{system}_end"] or 0) > 0, created)
        member.committing.clear()
        run.moment = time.time()
        sampler = Sampler(ctx, run, group, topic, _age_truth(ctx, group, topic, writer.times))
        sampler.phase = "consumer stopped, producer writing"
        time.sleep(writing_s)
        writer.producing.clear()
        sampler.phase = "producer paused"
        time.sleep(paused_s)
    finally:
        if sampler is not None:
            sampler.stop()
        writer.stop()
        member.leave()
    delete_group(ctx, group)
    delete_topic(ctx, topic)
    return run


def _learned(ctx: Ctx, run: FaultRun, shown: Callable[[dict, str], bool], since: float) -> None:
    """Until every system shows what ``shown(figures, system)`` asks (the fault's moment is then not a
    first look), or LEARN_CAP_S; how long each took since ``since`` (the topic's creation) is noted."""
    group = topic = run.culprit["group"]
    took: dict[str, float] = {}

    def all_shown() -> bool:
        f = _figures(ctx, group, topic)
        took.update({s: time.time() - since for s in SYSTEMS if s not in took and shown(f, s)})
        return len(took) == len(SYSTEMS)
    try:
        wait(all_shown, LEARN_CAP_S, f"every system showing {group}'s lag", interval=2)
    except TimeoutError:
        pass
    run.notes.append("the new topic's offsets shown " + ", ".join(
        f"by {s} after {took[s]:.0f} s" if s in took else f"not by {s} within {LEARN_CAP_S:g} s" for s in SYSTEMS))


def _behind(ctx: Ctx, name: str, what: str, written: int, committed: int, config: dict[str, str],
            key: Callable[[int], bytes | None] = lambda i: None) -> tuple[Written, FaultRun]:
    """Its topic (one partition, ``config``) holding ``written`` records a second apart and its group
    at ``committed`` (an admin's commit, no members), once every system shows the group's true lag."""
    group = topic = f"peers-{name}"
    run = FaultRun(name.replace("-", " "), f"group {group}: {what}", {"group": group})
    created = time.time()
    create_topic(ctx, topic, spread(ctx, 1), **config)
    writer = Written(ctx.bootstrap, topic, rate=1.0, key=key)
    writer.write(written)
    _commit(ctx, group, topic, committed)
    _learned(ctx, run, lambda f, system: f[f"{system}_lag"] == written - committed, created)
    return writer, run


def _sampled(ctx: Ctx, run: FaultRun, truth: Callable[[], dict], phase: str, act: Callable[[], str],
             after_s: float) -> FaultRun:
    """``act()`` (what it returns: a note) with the figures sampled from its moment to ``after_s`` past
    its end; then the group and topic are deleted."""
    group = topic = run.culprit["group"]
    run.moment = time.time()
    sampler = Sampler(ctx, run, group, topic, truth)
    sampler.phase = phase
    try:
        run.notes.append(f"{act()}, {time.time() - run.moment:.1f} s after the moment")
        time.sleep(after_s)
    finally:
        sampler.stop()
    delete_group(ctx, group)
    delete_topic(ctx, topic)
    return run


def retention(ctx: Ctx, written: int = 30, committed: int = 5, after_s: float = 90.0) -> FaultRun:
    """30 records a second apart in one-second segments, a group at 5, then retention.ms 1 s: the
    brokers delete every closed segment, all but the last record."""
    _, run = _behind(ctx, "lag-retention", f"{written - committed} records behind, then the topic's retention.ms "
                     "cut to 1 s", written, committed, {"segment.ms": "1000", "retention.ms": "3600000"})
    topic = run.culprit["group"]

    def truth() -> dict:
        start, end = _offsets(ctx, topic)
        return {"log_start": start, "true_lost": max(0, start - committed), "true_lag": end - committed}

    def cut() -> str:
        alter_configs(ctx, [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])])
        wait(lambda: _offsets(ctx, topic)[0] > committed, 120, "retention deleting the unread records", interval=1)
        return f"log start {_offsets(ctx, topic)[0]}"
    return _sampled(ctx, run, truth, "retention 1 s", cut, after_s)


def compacted(ctx: Ctx, keys: int = 5, rounds: int = 6, committed: int = 5, after_s: float = 90.0) -> FaultRun:
    """``rounds`` of ``keys`` keys in one-second segments, a group at 5; then one more record rolls the
    last segment and the cleaner (every second on the bench's brokers) keeps each key's newest record."""
    written = keys * rounds
    writer, run = _behind(ctx, "lag-compacted", f"{written - committed} offsets behind on a compacted topic of "
                          f"{keys} keys, then the cleaner removes the superseded records", written, committed,
                          {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01",
                           "min.compaction.lag.ms": "0", "delete.retention.ms": "1000"},
                          key=lambda i: b"k%d" % (i % keys))
    topic = run.culprit["group"]

    def truth() -> dict:
        _, end = _offsets(ctx, topic)
        unread = _records(ctx, topic, committed)
        oldest = (time.time() * 1000 - unread[0][1]) / 1000 if unread else 0.0
        return {"true_lag": end - committed, "unread_records": len(unread), "true_lag_s": round(oldest, 1)}

    def clean() -> str:
        time.sleep(1.5)
        writer.write(1)   # rolls the segment of the last round: it can be cleaned
        wait(lambda: len(_records(ctx, topic, OFFSET_BEGINNING)) < written + 1, 180, "the cleaner at work", interval=2)
        return f"{len(_records(ctx, topic, committed))} unread records left of {written + 1 - committed} offsets"
    return _sampled(ctx, run, truth, "compacting", clean, after_s)


FAULTS: dict[str, Callable[[Ctx], FaultRun]] = {
    "lag-producer-pause": producer_pause,
    "lag-retention": retention,
    "lag-compacted": compacted,
}
