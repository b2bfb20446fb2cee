"""The Admin API half: every poll interval, list and describe the groups, sample end
offsets; at the lag interval, compute lag. Emits a group's state when it changed since
the last poll (state, members, assignor, coordinator) and every group, with its lag, at
the lag interval. The groups of Kafka 4's protocols that the __consumer_offsets reader holds
(collectors.groups.book.ModernStates) are its to describe: the poller adds their lag only."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from collectors.groups.book import NO_OFFSETS, GroupBook, ModernStates, Offsets, Seen
from collectors.groups.consumer_status import ConsumerStatus, PartitionKey
from collectors.groups.config import GroupsConfig
from collectors.groups.gather import Gathered, K, Stopped, gather, settled
from collectors.groups.lag import LagTable
from collectors.groups.offsets_reader import OFFSETS_TOPIC
from collectors.groups.outputs import SOURCE, Emitter
from collectors.groups.record_times import RecordTimes, wanted_offsets
from collectors.groups.retention import DESCRIBE_BATCH, TopicRetention, describe
from collectors.groups.refusing import Broker, PollGate, refusing
from collectors.groups.states import state_from_description, topic_lags
from kmon.events import GroupState, TopicLag

log = logging.getLogger("kmon.collector.groups")

# list_offsets takes many partitions per request; the broker answers per leader
END_OFFSETS_BATCH = 1000
# while a listed broker refuses connections the poll is held, and runs anyway this often (refusing.py)
HOLD_S = 30.0


def present_groups(listed: Iterable[str], described: Mapping[str, GroupState],
                   failed: Mapping[str, BaseException], folded: Iterable[str] = ()) -> set[str]:
    """Pure: the groups that exist after a complete listing (``listed``) and a describe of the
    listed ones and of those the listing lacks. A group is gone when its coordinator describes
    it Dead or does not know it (GROUP_ID_NOT_FOUND). A group moving to another coordinator
    (a broker died) is in no listing for a moment: the old coordinator unloaded it, the new
    one has not loaded it yet, and its describe fails with NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS. Deleting it then reset its counters when it came back.
    ``folded``: the groups of Kafka 4's protocols the __consumer_offsets reader holds, which it
    alone deletes (the poller may have emitted one before the reader had folded it: gone from
    what it describes then, it was deleted and its counters reset)."""
    alive = {g for g, s in described.items() if s.state != "Dead"}
    listed = set(listed)
    unsure = {g for g, error in failed.items() if g in listed or not _not_found(error)}
    return alive | unsure | set(folded)


def refused(failures: Mapping[PartitionKey, BaseException]) -> list[PartitionKey]:
    """Pure: the partitions worth asking again after a metadata refresh: those answered with
    an error (a moved leader: NOT_LEADER, FENCED_LEADER_EPOCH) or without a leader. A
    partition whose request timed out (its leader away) would only time out again."""
    return sorted(tp for tp, error in failures.items() if not isinstance(error, TimeoutError))


def wait_for(event: threading.Event, stop: threading.Event, timeout_s: float, step_s: float = 0.1) -> bool:
    """Wait until ``event`` is set (True), ``stop`` is set or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
        if event.wait(min(step_s, left)):
            return True
    return event.is_set()


def _not_found(error: BaseException) -> bool:
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else None
    return isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError.GROUP_ID_NOT_FOUND


class AdminPoller:
    def __init__(self, config: GroupsConfig, admin: AdminClient, book: GroupBook, emitter: Emitter,
                 modern: ModernStates, offsets_read: threading.Event | None,
                 record_times: RecordTimes | None = None) -> None:
        self._config = config
        self._admin = admin
        self._book = book
        self._emitter = emitter
        self._modern = modern
        # set once the __consumer_offsets reader holds every committed offset (None: no reader)
        self._offsets_read = offsets_read
        self._samples = LagTable()
        self._record_times = record_times   # None: lag in seconds from the samples only
        self._retention = TopicRetention()
        self._sampled: set[PartitionKey] = set()
        self._lags: dict[str, dict[str, TopicLag]] = {}   # latest lag per group, sent with every event
        self._judge = ConsumerStatus(config.stall_window_s)
        self._offsets: dict[str, Offsets] = {}   # what each group's events carry of its offsets
        self._next_lag = 0.0
        self._resync = threading.Event()
        self._poll_duration = emitter.telemetry.metric("kmon_collector_poll_duration_seconds")
        self._unknown_ends = emitter.telemetry.metric("kmon_collector_end_offsets_unknown")
        self._unknown_count = 0   # partitions whose end offset the latest poll could not read
        self._gate = PollGate(HOLD_S)
        self._probes = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kmon-groups-refusing")
        self._stop = threading.Event()   # run()'s: the requests in flight are given up when it is set

    def run(self, stop: threading.Event) -> None:
        try:
            self._run(stop)
        finally:
            self._probes.shutdown(wait=False)
            if self._record_times is not None:
                self._record_times.close()

    def _run(self, stop: threading.Event) -> None:
        if self._offsets_read is not None:
            # The first lags wait a while for the reader's committed offsets. Without them a group
            # whose Admin API offsets failed (a coordinator moving: when a crash and restart are
            # likeliest) went out with no lag, and its lag series vanished for a lag interval.
            wait_for(self._offsets_read, stop, self._config.request_timeout_s)
        self._stop = stop
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
            except Stopped:
                return
            except Exception:  # a defect or an unexpected client error must not end the thread
                self._emitter.telemetry.survived(SOURCE, "in a group poll", log)
            stop.wait(max(0.0, self._config.poll_interval_s - (time.monotonic() - started)))

    def request_resync(self) -> None:
        """Emit every group at the next poll (events were lost on the way to the events topic)."""
        self._resync.set()

    def poll_once(self) -> None:
        started = time.monotonic()
        self._admin.poll(0)   # hands the client's queued log lines to its logger
        if not self._admitted(started):
            return
        listed = self._list_groups()
        if listed is None:
            return
        listed_groups, complete = listed
        modern = self._modern.groups()
        groups = sorted(set(listed_groups) - modern.keys())
        # described too when the listing is complete: whether a group it lacks is gone (present_groups)
        missing = sorted(self._book.emitted_groups() - set(groups) - modern.keys()) if complete else []
        described, failed = self._describe(groups + missing)
        # a lag emission is the resync too: it sends every group's full state
        lag_due = self._resync.is_set() or started >= self._next_lag
        if lag_due:
            self._resync.clear()
            self._next_lag = started + self._config.lag_interval_s
            # a share group commits no offsets: the reader has its start offsets instead
            self._refresh_committed(groups + sorted(g for g, kind in modern.items() if kind != "share"))
        committed = {g: {tp: o for tp, o in offsets.items() if self._config.topics(tp[0])}
                     for g, offsets in self._book.committed(groups + sorted(modern)).items()}
        end_offsets = self._sample_end_offsets({tp for offsets in committed.values() for tp in offsets})
        now = time.monotonic()
        if lag_due:
            self._lags = self._topic_lags(committed, end_offsets, {*described, *modern}, now)
        self._judge.observe(now, committed, end_offsets)
        judged = self._judged({*described, *modern})
        self._modern.emit_offsets(self._offsets, None if lag_due else judged)
        alive = {g for g, s in described.items() if s.state != "Dead"}  # Dead: no longer exists
        for group in sorted(alive):
            self._emit(described[group], started, lag_due or group in judged)
        if complete:
            self._delete_vanished(present_groups(groups, described, failed, modern))
        self._poll_duration.set(time.monotonic() - started)

    def _topic_lags(self, committed: Mapping[str, Mapping[PartitionKey, int]], end_offsets: Mapping[PartitionKey, int],
                    groups: set[str], now: float) -> dict[str, dict[str, TopicLag]]:
        """Each group's lag; in seconds from the records at the committed offsets where they can be read."""
        times, unreadable = None, set()
        if self._record_times is not None:
            times = self._record_times.times(wanted_offsets({g: committed.get(g, {}) for g in groups}, end_offsets),
                                             self._stop)
            unreadable = self._record_times.unreadable()
        wall_now = time.time()
        log_starts, _ = self._list_offsets(sorted({tp for g in groups for tp in committed.get(g, {})}),
                                           OffsetSpec.earliest())
        lags = {g: topic_lags(committed.get(g, {}), end_offsets, self._samples, now, times, wall_now, unreadable,
                              log_starts) for g in groups}
        retention = self._retention_of({t for by_topic in lags.values() for t in by_topic})
        return {g: {t: replace(lag, retention_ms=retention.get(t)) for t, lag in by_topic.items()}
                for g, by_topic in lags.items()}

    def _retention_of(self, topics: set[str]) -> dict[str, int]:
        """retention.ms of the topics groups commit to (asked again every few minutes)."""
        self._retention.forget_except(topics)
        if stale := self._retention.stale(topics):
            timeout = self._config.request_timeout_s
            self._retention.learn(stale, self._gather("describe_configs", stale, describe(self._admin, timeout),
                                                      DESCRIBE_BATCH))
        return self._retention.of(topics)

    def _judged(self, groups: set[str]) -> set[str]:
        """Each group's lag and the verdict on its consumers as of this poll; the groups whose
        verdict changed (their events go out now, not at the next lag interval)."""
        changed = set()
        offsets = {}
        for group in groups:
            partitions = self._judge.partitions(group)
            status = self._judge.group(group)
            offsets[group] = Offsets(self._lags.get(group, {}), status, {
                f"{topic}:{p}": verdict for (topic, p), verdict in sorted(partitions.items()) if verdict != "ok"})
            if status != self._offsets.get(group, NO_OFFSETS).status:
                changed.add(group)
                if status not in (None, "ok"):
                    log.info("group %s: its consumers are %s (%s)", group, status.replace("_", " "),
                             ", ".join(offsets[group].partition_status) or "-")
        self._offsets = offsets
        return changed

    def _emit(self, state: GroupState, started: float, due: bool) -> None:
        seen = self._book.observe(state, started)
        if seen is Seen.CHANGED or (due and seen is Seen.SAME):
            self._emitter.upsert(self._offsets.get(state.group, NO_OFFSETS).on(state))

    def _delete_vanished(self, present: set[str]) -> None:
        for group in sorted(self._book.emitted_groups() - present):
            self._lags.pop(group, None)
            if self._book.delete(group):
                log.info("group %s no longer exists", group)
                self._emitter.delete(group)

    def _admitted(self, now: float) -> bool:
        """False while a broker of the cluster's metadata refuses connections and the poll is held.
        The brokers come from a Metadata request, which any broker answers: librdkafka sends a
        DescribeCluster to the broker the metadata names controller, under KRaft any broker, and
        while that one is the dead broker it reconnected in a busy loop for the whole request timeout."""
        timeout = self._config.request_timeout_s
        self._emitter.telemetry.metric("kmon_collector_admin_calls_total", call="metadata").inc()
        try:
            brokers = self._admin.list_topics(OFFSETS_TOPIC, timeout=timeout).brokers.values()
        except Exception as e:   # no broker answers: the poll's own requests fail and say so, as before
            log.debug("metadata: %s", e)
            return True
        down = refusing([Broker(b.id, b.host, b.port) for b in brokers], self._probes)
        held = self._gate.holding
        admitted = self._gate.admit(bool(down), now)
        if down and not held:
            log.warning("broker %s refuses connections and is still in the cluster's metadata: the Admin "
                        "API poll waits for it to come back or leave the metadata, and runs anyway every %g s",
                        ", ".join(map(str, down)), HOLD_S)
        elif held and not down:
            log.info("no broker of the cluster's metadata refuses connections now: polling again")
        return admitted

    # ----------------------------------------------------------- Admin API calls

    def _count(self, call: str, gathered: Gathered[K]) -> Gathered[K]:
        self._emitter.telemetry.metric("kmon_collector_admin_calls_total", call=call).inc(gathered.requests)
        if gathered.failures:
            item, error = next(iter(gathered.failures.items()))
            log.warning("%s: %d of %d failed (e.g. %r: %s)", call, len(gathered.failures),
                        len(gathered.failures) + len(gathered.results), item, error)
        return gathered

    def _list_groups(self) -> tuple[list[str], bool] | None:
        """Groups passing the filter, and whether the listing is complete (every
        coordinator answered), or None if the call failed."""
        self._emitter.telemetry.metric("kmon_collector_admin_calls_total", call="list_consumer_groups").inc()
        timeout = self._config.request_timeout_s
        try:
            result = settled(self._admin.list_consumer_groups(request_timeout=timeout), timeout + 1, self._stop)
        except Exception as e:
            log.warning("list_consumer_groups failed: %s", e)
            return None
        if result.errors:
            log.warning("list_consumer_groups: %d brokers did not answer (e.g. %s)",
                        len(result.errors), result.errors[0])
        groups = sorted(g.group_id for g in result.valid if self._config.groups(g.group_id))
        return groups, not result.errors

    def _gather(self, call: str, items: list[K], submit: Callable[[list[K]], dict], batch_size: int
                ) -> Gathered[K]:
        return self._count(call, gather(items, submit, batch_size=batch_size,
                                        concurrency=self._config.concurrency,
                                        timeout=self._config.request_timeout_s, stop=self._stop))

    def _describe(self, groups: list[str]) -> tuple[dict[str, GroupState], dict[str, BaseException]]:
        """The groups described, and why the others were not."""
        timeout = self._config.request_timeout_s
        gathered = self._gather(
            "describe_consumer_groups", groups,
            lambda batch: self._admin.describe_consumer_groups(batch, request_timeout=timeout),
            self._config.describe_batch_size)
        return {g: state_from_description(d) for g, d in gathered.results.items()}, gathered.failures

    def _refresh_committed(self, groups: list[str]) -> None:
        """Committed offsets from the Admin API where the __consumer_offsets reader
        cannot supply them: all groups until it has read the topic to its end, then only
        groups it has seen no commit of (one request per group: the API's limit)."""
        complete = self._offsets_read is not None and self._offsets_read.is_set()
        known = set(self._book.committed(groups)) if complete else set()
        timeout = self._config.request_timeout_s
        gathered = self._gather(
            "list_consumer_group_offsets", [g for g in groups if g not in known],
            lambda batch: self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(batch[0])], request_timeout=timeout),
            1)
        for group, result in gathered.results.items():
            self._book.replace_committed(group, {
                (tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or ()
                if tp.error is None and tp.offset >= 0})

    def _sample_end_offsets(self, partitions: set[PartitionKey]) -> dict[PartitionKey, int]:
        end_offsets, failures = self._list_offsets(sorted(partitions))
        again = refused(failures)
        if again:
            # the partition moved since the client's metadata was fetched: fetch it, ask once more
            self._refresh_metadata()
            found, failed_again = self._list_offsets(again)
            end_offsets.update(found)
            failures = {tp: e for tp, e in {**failures, **failed_again}.items() if tp not in found}
        self._say_unknown(failures)
        now = time.monotonic()
        for (topic, partition), offset in end_offsets.items():
            self._samples.add(topic, partition, offset, now)
        for topic, partition in self._sampled - partitions:  # no longer committed to: drop samples
            self._samples.forget(topic, partition)
        self._sampled = set(partitions)
        return end_offsets

    def _list_offsets(self, partitions: list[PartitionKey], spec: OffsetSpec = OffsetSpec.latest()
                      ) -> tuple[dict[PartitionKey, int], dict[PartitionKey, BaseException]]:
        """End offsets (log start offsets with ``OffsetSpec.earliest()``), and why the others are missing.
        A partition without a leader is answered with a negative offset, not an error: unknown, not 0."""
        timeout = self._config.request_timeout_s

        def submit(batch: list[PartitionKey]) -> dict:
            futures = self._admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in batch}, request_timeout=timeout)
            return {(tp.topic, tp.partition): f for tp, f in futures.items()}

        gathered = self._gather("list_offsets", partitions, submit, END_OFFSETS_BATCH)
        failures = dict(gathered.failures)
        end_offsets = {}
        for tp, info in gathered.results.items():
            if info.offset >= 0:
                end_offsets[tp] = info.offset
            else:
                failures[tp] = LookupError(f"no end offset (answered {info.offset}): no leader")
        return end_offsets, failures

    def _refresh_metadata(self) -> None:
        try:
            self._admin.list_topics(timeout=self._config.request_timeout_s)
        except KafkaException as e:
            log.debug("metadata refresh: %s", e)

    def _say_unknown(self, failures: Mapping[PartitionKey, BaseException]) -> None:
        """The partitions whose end offset is unknown: counted in a gauge; said in the log
        when their number changes."""
        unknown = len(failures)
        self._unknown_ends.set(unknown)
        if unknown == self._unknown_count:
            return
        self._unknown_count = unknown
        if unknown:
            tp, error = min(failures.items())
            log.warning("end offsets of %d partitions unknown (e.g. %s[%d]: %s): their lag is left out "
                        "until read", unknown, *tp, error)
        else:
            log.info("end offsets known for every partition again")
