"""Pure parts of the consumer-group collector: mappings to GroupState, filters, batched
requests with deadlines, the shared book, and the __consumer_offsets record handling."""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future
import itertools
from dataclasses import replace

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException, Node, TopicPartition
from confluent_kafka.admin import ConsumerGroupDescription, MemberAssignment, MemberDescription

from collectors.groups.admin_poll import present_groups, refused, wait_for
from collectors.groups.book import GroupBook, ModernStates, Offsets, Seen
from collectors.groups.config import GroupsConfig, NameFilter
from collectors.groups.gather import Stopped, batches, gather, settled
from collectors.groups.lag import LagTable
from collectors.groups.codec.offsets_codec import GroupMetadata
from collectors.groups.offsets_reader import OffsetsReader
from collectors.groups.outputs import Emitter
from collectors.groups.record_times import wanted_offsets
from collectors.groups.states import state_from_description, state_from_metadata, topic_lags
from collectors.telemetry import Telemetry
from kmon.codec import decode, encode
from kmon.events import GroupMember, GroupState, TopicLag
from collectors.groups.codec.offsets_codec import GroupTombstone, SubRecordTombstone
from collectors.groups.codec.share_state_codec import ShareSnapshot, ShareUpdate
from tests.unit.groups_builders import (G, T, Record, current, deletion, epoch, join, member, reader, sample,
                                       target, target_epoch)
from tests.unit.offsets_builders import encode as encode_record
from tests.unit.fakes import ListSink
from tests.unit.offsets_builders import (encode_share_state, group_key, group_value, offset_key, offset_value,
                                        sample_group, sample_offset, share_state_key, tombstone)


# ----------------------------------------------------------------- GroupMetadata -> GroupState


def test_metadata_with_members_is_stable_with_its_generation_leader_and_assignment() -> None:
    state = state_from_metadata(sample_group(3))
    assert (state.group, state.state, state.generation) == ("orders-app", "Stable", 42)
    assert (state.protocol_type, state.protocol, state.leader) == ("consumer", "cooperative-sticky",
                                                                  "consumer-1-5f0c")
    assert state.origin == "offsets" and state.state_since_ms == 1_700_000_000_000
    assert state.members[0] == GroupMember("consumer-1-5f0c", "consumer-1", "/10.0.0.1", "static-1",
                                           ("orders:0", "orders:1", "payments:2"))
    assert [m.assignment for m in state.members[1:]] == [("orders:2",), ()]


def test_metadata_without_members_is_empty() -> None:
    empty = replace(sample_group(1), members=(), protocol=None, leader=None)
    state = state_from_metadata(empty)
    assert (state.state, state.generation, state.protocol, state.leader, state.members) == ("Empty", 42, "", None, ())
    assert state.state_since_ms is None  # v1 records carry no state timestamp


def test_members_are_sorted_so_equal_memberships_compare_equal() -> None:
    record = sample_group(2)
    shuffled = replace(record, members=tuple(reversed(record.members)))
    assert state_from_metadata(shuffled) == state_from_metadata(record)


# ----------------------------------------------------------------- description -> GroupState


def description(state: ConsumerGroupState, simple: bool = False, **kw: object) -> ConsumerGroupDescription:
    member = MemberDescription("m-2", "c-2", "/10.0.0.2",
                               MemberAssignment([TopicPartition("t", 1), TopicPartition("t", 0)]))
    return ConsumerGroupDescription("g", simple, [member, MemberDescription("m-1", "c-1", "/10.0.0.1", None)],
                                    "range", state, Node(3, "h", 9092), **kw)


@pytest.mark.parametrize(("client_state", "name"), [
    (ConsumerGroupState.EMPTY, "Empty"), (ConsumerGroupState.PREPARING_REBALANCING, "PreparingRebalance"),
    (ConsumerGroupState.COMPLETING_REBALANCING, "CompletingRebalance"), (ConsumerGroupState.STABLE, "Stable"),
    (ConsumerGroupState.DEAD, "Dead"), (ConsumerGroupState.UNKNOWN, "Unknown")])
def test_description_states_use_kafkas_names(client_state: ConsumerGroupState, name: str) -> None:
    assert state_from_description(description(client_state)).state == name


def test_description_maps_members_coordinator_and_leaves_generation_unknown() -> None:
    state = state_from_description(description(ConsumerGroupState.STABLE, type=ConsumerGroupType.CONSUMER))
    assert (state.generation, state.protocol, state.coordinator, state.origin) == (-1, "range", 3, "admin")
    assert (state.protocol_type, state.group_type) == ("consumer", "consumer")
    assert [(m.member_id, m.assignment) for m in state.members] == [("m-1", ()), ("m-2", ("t:0", "t:1"))]
    simple = state_from_description(description(ConsumerGroupState.EMPTY, simple=True))
    assert (simple.protocol_type, simple.group_type) == ("", "classic")


# ----------------------------------------------------------------- lag per topic


def test_topic_lag_sums_partitions_and_takes_the_worst_seconds() -> None:
    samples = LagTable()
    for partition, end in ((0, 100), (1, 50)):
        samples.add("t", partition, end, 10.0)
    samples.add("t", 0, 200, 20.0)
    committed = {("t", 0): 100, ("t", 1): 50, ("u", 0): 5, ("t", 2): 0}
    lags = topic_lags(committed, {("t", 0): 200, ("t", 1): 50, ("u", 0): 9}, samples, now=30.0,
                      log_starts={("t", 0): 60, ("u", 0): 0, ("t", 2): 0})
    # t/2 has no end offset: left out; u has no samples: lag seconds unknown; each partition's committed
    # offset and, where read, its log start go with it (t/1's start was not read)
    assert lags == {"t": TopicLag(lag=100, lag_seconds=20.0, partitions={0: 100, 1: 0},
                                  lag_seconds_method="interpolated", committed={0: 100, 1: 50}, log_start={0: 60}),
                    "u": TopicLag(lag=4, lag_seconds=None, partitions={0: 4}, committed={0: 5}, log_start={0: 0})}


def test_lag_seconds_is_the_age_of_the_record_at_the_committed_offset_where_it_was_read() -> None:
    """The samples say 20 s; the record at t/0's committed offset was written an hour before: 3600 s, exactly.
    A partition whose record was not read makes its topic's figure interpolated; a caught-up partition
    needs no record, and a producer's clock ahead of ours is no lag."""
    samples = LagTable()
    samples.add("t", 0, 100, 10.0)
    samples.add("t", 0, 200, 20.0)
    samples.add("u", 0, 9, 25.0)
    committed = {("t", 0): 100, ("t", 1): 50, ("u", 0): 5, ("v", 0): 3, ("w", 0): 7}
    ends = {("t", 0): 200, ("t", 1): 50, ("u", 0): 9, ("v", 0): 3, ("w", 0): 8}
    times = {("t", 0, 100): 5_000.0, ("u", 0, 6): 8_000.0, ("w", 0, 7): 8_700.5}
    lags = topic_lags(committed, ends, samples, now=30.0, record_times=times, wall_now=8_600.0)
    assert {t: (lag.lag_seconds, lag.lag_seconds_method) for t, lag in lags.items()} == {
        "t": (3600.0, "record"), "u": (5.0, "interpolated"), "v": (0.0, "record"), "w": (0.0, "record")}
    # a topic kmon may not read stays interpolated, caught up too (its series keep their label)
    assert topic_lags({("v", 0): 3}, {("v", 0): 3}, samples, 30.0, {}, 8_600.0, {"v"})["v"].lag_seconds_method \
        == "interpolated"
    # record times off (--lag-from-samples): every figure interpolated
    assert topic_lags(committed, ends, samples, now=30.0)["t"] == TopicLag(100, 20.0, {0: 100, 1: 0}, "interpolated",
                                                                          committed={0: 100, 1: 50})


def test_the_offsets_whose_records_are_wanted_are_those_with_lag() -> None:
    committed = {"g": {("t", 0): 100, ("t", 1): 50, ("u", 0): -1}, "h": {("t", 0): 120, ("x", 0): 1}}
    assert wanted_offsets(committed, {("t", 0): 200, ("t", 1): 50, ("u", 0): 9}) == {("t", 0, 100), ("t", 0, 120)}


def test_committed_beyond_the_sampled_end_is_no_lag() -> None:
    lags = topic_lags({("t", 0): 12}, {("t", 0): 10}, LagTable(), now=1.0)
    assert lags["t"].lag == 0


# ----------------------------------------------------------------- filters and config


def test_filters_match_whole_names() -> None:
    f = NameFilter(include="orders-.*", exclude=".*-test")
    assert f("orders-app") and not f("orders-test") and not f("my-orders-app")
    assert NameFilter()("anything") and not NameFilter(exclude="a.*")("abc")


def test_bad_settings_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="bad regex"):
        NameFilter(include="(")
    with pytest.raises(ValueError, match="concurrency"):
        GroupsConfig("h:9092", "c", concurrency=0)
    with pytest.raises(ValueError, match="offsets_start"):
        GroupsConfig("h:9092", "c", offsets_start="middle")  # type: ignore[arg-type]


# ----------------------------------------------------------------- gather


def test_batches() -> None:
    assert list(batches([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]
    assert list(batches([], 2)) == []


class FakeService:
    """Answers a batch with futures it resolves later: `slow` items never, `bad` with an error."""

    def __init__(self, slow: set[str] = frozenset(), bad: set[str] = frozenset()) -> None:
        self.slow, self.bad = slow, bad
        self.in_flight = self.max_in_flight = 0
        self.batches: list[list[str]] = []
        self._lock = threading.Lock()

    def submit(self, batch: list[str]) -> dict[str, Future]:
        self.batches.append(batch)
        futures = {item: Future() for item in batch}
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        threading.Timer(0.01, self._answer, (futures,)).start()
        return futures

    def _answer(self, futures: dict[str, Future]) -> None:
        with self._lock:
            self.in_flight -= 1
        for item, future in futures.items():
            if item in self.bad:
                future.set_exception(RuntimeError(f"{item} failed"))
            elif item not in self.slow:
                future.set_result(item.upper())


def test_gather_batches_with_bounded_concurrency() -> None:
    service = FakeService()
    items = [f"g{i}" for i in range(10)]
    out = gather(items, service.submit, batch_size=3, concurrency=2, timeout=5)
    assert out.results == {i: i.upper() for i in items} and not out.failures
    assert out.requests == 4 and [len(b) for b in service.batches] == [3, 3, 3, 1]
    assert service.max_in_flight <= 2


def test_one_slow_or_failing_item_does_not_stall_the_others() -> None:
    service = FakeService(slow={"g1"}, bad={"g4"})
    items = [f"g{i}" for i in range(6)]
    out = gather(items, service.submit, batch_size=2, concurrency=1, timeout=0.3)
    assert set(out.results) == {"g0", "g2", "g3", "g5"}
    assert isinstance(out.failures["g1"], TimeoutError) and isinstance(out.failures["g4"], RuntimeError)


def test_a_refused_batch_fails_its_items_only() -> None:
    def submit(batch: list[str]) -> dict[str, Future]:
        if "x" in batch:
            raise ValueError("refused")
        return FakeService().submit(batch)

    out = gather(["a", "x", "b"], submit, batch_size=1, concurrency=1, timeout=5)
    assert set(out.results) == {"a", "b"} and isinstance(out.failures["x"], ValueError)


def outcome_of(call) -> list[object]:
    """What ``call()`` returned or raised, run on a thread and waited for 10 s: a wait for a request
    whose answer never comes (60 s here) must end at the stop, not at its timeout."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as e:
            out.append(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    return out


def test_a_stop_ends_the_waits_for_requests_in_flight() -> None:
    """The groups collector stopped while a broker is dead: its request there never answers."""
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    waited = outcome_of(lambda: gather(["a", "slow"], FakeService(slow={"slow"}).submit, batch_size=1,
                                       concurrency=2, timeout=60, stop=stop))
    assert len(waited) == 1 and isinstance(waited[0], Stopped)
    assert isinstance(outcome_of(lambda: settled(Future(), 60, stop))[0], Stopped)


def test_settled_is_the_result_or_a_timeout() -> None:
    answered: Future = Future()
    answered.set_result(7)
    assert settled(answered, 1, threading.Event()) == 7
    with pytest.raises(TimeoutError):
        settled(Future(), 0.3, threading.Event())


# ----------------------------------------------------------------- the book


def admin_state(group: str = "g", state: str = "Stable") -> GroupState:
    return GroupState(group=group, state=state, generation=-1)


def test_partitions_a_broker_refused_are_asked_again_and_timed_out_ones_not() -> None:
    fenced = KafkaException(KafkaError(KafkaError.FENCED_LEADER_EPOCH))
    failures = {("t", 2): fenced, ("t", 0): TimeoutError("no answer"), ("s", 1): KafkaException(
        KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))}
    failures[("u", 0)] = LookupError("no end offset (answered -1001): no leader")
    assert refused(failures) == [("s", 1), ("t", 2), ("u", 0)]
    assert refused({}) == []


def test_the_admin_client_trusts_cached_metadata_half_a_poll_interval_unless_told_otherwise() -> None:
    config = GroupsConfig(bootstrap_servers="b:9092", cluster="c", poll_interval_s=10)
    assert config.admin_client()["metadata.max.age.ms"] == 5000
    assert GroupsConfig(bootstrap_servers="b:9092", cluster="c", poll_interval_s=0.5) \
        .admin_client()["metadata.max.age.ms"] == 1000
    told = GroupsConfig(bootstrap_servers="b:9092", cluster="c", client_config={"metadata.max.age.ms": "60000"})
    assert told.admin_client(logger=None)["metadata.max.age.ms"] == "60000"


def test_book_reports_changes_once() -> None:
    book = GroupBook()
    started = time.monotonic()
    assert book.observe(admin_state(), started) is Seen.CHANGED
    assert book.observe(admin_state(), started) is Seen.SAME
    assert book.observe(admin_state(state="PreparingRebalance"), started) is Seen.CHANGED


def test_book_deletes_once_and_does_not_resurrect_from_an_older_observation() -> None:
    book = GroupBook()
    started = time.monotonic()
    book.observe(admin_state(), started)
    book.commit("g", ("t", 0), 5)
    assert book.delete("g") and not book.delete("g")
    assert book.committed(["g"]) == {} and book.emitted_groups() == set()
    assert book.observe(admin_state(), started) is Seen.DELETED_MEANWHILE
    assert book.observe(admin_state(), time.monotonic()) is Seen.CHANGED  # re-created later


def test_a_group_missing_from_a_listing_is_gone_only_when_its_coordinator_says_so() -> None:
    def state(group: str, name: str) -> GroupState:
        return GroupState(group=group, state=name, generation=-1, protocol_type="consumer")

    def failure(code: int) -> KafkaException:
        return KafkaException(KafkaError(code))
    present = present_groups(
        listed=["listed", "listed-dead", "listed-undescribed"],
        described={"listed": state("listed", "Stable"), "listed-dead": state("listed-dead", "Dead"),
                   "moved": state("moved", "Empty"), "deleted": state("deleted", "Dead")},
        failed={"listed-undescribed": failure(KafkaError.REQUEST_TIMED_OUT),
                "moving": failure(KafkaError.NOT_COORDINATOR),
                "loading": failure(KafkaError.COORDINATOR_LOAD_IN_PROGRESS),
                "unknown": failure(KafkaError.GROUP_ID_NOT_FOUND)},
        folded=["modern"])
    assert present == {"listed", "listed-undescribed", "moved", "moving", "loading", "modern"}


def test_book_committed_offsets() -> None:
    book = GroupBook()
    book.commit("g", ("t", 0), 5)
    book.commit("g", ("t", 1), 7)
    book.uncommit("g", ("t", 0))
    assert book.committed(["g", "h"]) == {"g": {("t", 1): 7}}
    book.replace_committed("g", {})
    assert book.committed(["g"]) == {}


# ----------------------------------------------------------------- __consumer_offsets records


def handle_all(offsets: OffsetsReader, *messages: Record) -> None:
    """As the reader's loop does: the messages of one fetch, then what they completed."""
    for message in messages:
        offsets.handle(message)  # type: ignore[arg-type]
    offsets.flush()


def metadata_record(record: GroupMetadata) -> Record:
    return Record(group_key(record.group), group_value(record))


EOF = KafkaError(KafkaError._PARTITION_EOF)


def test_each_generation_is_one_event_and_a_tombstone_one_delete() -> None:
    offsets, _, sink, telemetry = reader()
    record = sample_group(3)
    offsets.handle(Record(None, None, error_=EOF))  # type: ignore[arg-type]
    handle_all(offsets, metadata_record(record), metadata_record(record), metadata_record(replace(record, generation=43)),
               Record(group_key("orders-app"), None), Record(group_key("orders-app"), None))
    assert [(e.op, e.data and e.data.generation) for e in sink.events] == [
        ("upsert", 42), ("upsert", 43), ("delete", None)]
    assert sink.events[0].entity == "group:orders-app" and sink.events[0].source == "groups"
    assert sample(telemetry, "kmon_collector_events_total", kind="group") == 3


def test_history_before_a_partitions_end_emits_each_groups_outcome_only() -> None:
    """A restarted collector re-reads the log: a group deleted later in it stays deleted,
    and a live one jumps to its last generation (the stream counts the steps)."""
    offsets, _, sink, _ = reader()
    offsets._partitions = 2
    gone, live = sample_group(3), replace(sample_group(3), group="billing")
    for message in (metadata_record(gone), metadata_record(replace(gone, generation=43)),
                    Record(group_key(gone.group), None),
                    metadata_record(live), metadata_record(replace(live, generation=44))):
        offsets.handle(message)  # type: ignore[arg-type]
    offsets.handle(Record(None, None, error_=EOF, partition_=1))  # type: ignore[arg-type]
    assert sink.events == []                    # partition 0 is not read to its end yet
    offsets.handle(Record(None, None, error_=EOF, partition_=0))  # type: ignore[arg-type]
    assert [(e.entity, e.op, e.data and e.data.generation) for e in sink.events] == [
        ("group:orders-app", "delete", None), ("group:billing", "upsert", 44)]
    handle_all(offsets, metadata_record(replace(live, generation=45)))
    assert sink.events[-1].data.generation == 45   # live from here on: every generation


class Metadata:
    """What list_topics answers for __consumer_offsets: absent (unknown topic), then its 2 partitions."""

    def __init__(self, exists: bool) -> None:
        error = None if exists else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        topic = type("Topic", (), {"error": error, "partitions": {0: None, 1: None} if exists else {}})()
        self.topics = {"__consumer_offsets": topic}


class AssigningConsumer:
    def __init__(self, *answers: Metadata) -> None:
        self.answers = list(answers)
        self.assigned: list[TopicPartition] = []

    def list_topics(self, topic: str, timeout: float) -> Metadata:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = partitions


@pytest.mark.parametrize("created_while_watched", [True, False])
def test_a_topic_created_while_kmon_watched_has_no_history_to_catch_up_on(created_while_watched: bool) -> None:
    """The first groups' first writes are emitted each (their first rebalances counted), not only
    their outcome at the partition's end: nothing there can be in the stream already."""
    offsets, _, sink, _ = reader(poll_interval_s=0.01)
    consumer = AssigningConsumer(*([Metadata(False)] if created_while_watched else []), Metadata(True))
    assert offsets._assign(consumer, threading.Event())  # type: ignore[arg-type]
    assert [tp.partition for tp in consumer.assigned] == [0, 1]
    group = sample_group(3)
    handle_all(offsets, metadata_record(group), metadata_record(replace(group, generation=group.generation + 1)))
    emitted = [e.data.generation for e in sink.events]
    assert emitted == ([group.generation, group.generation + 1] if created_while_watched else [])


def test_commits_update_the_book_without_events() -> None:
    offsets, book, sink, _ = reader(topics=NameFilter(exclude="payments"))
    commit = sample_offset(3)
    offsets.handle(Record(offset_key(commit.group, commit.topic, commit.partition), offset_value(commit)))  # type: ignore[arg-type]
    offsets.handle(Record(offset_key(commit.group, "payments", 0), offset_value(commit)))  # type: ignore[arg-type]
    assert book.committed([commit.group]) == {commit.group: {("orders", 7): commit.offset}}
    offsets.handle(Record(offset_key(commit.group, commit.topic, commit.partition), None))  # type: ignore[arg-type]
    assert book.committed([commit.group]) == {} and sink.events == []


def test_filtered_groups_are_ignored() -> None:
    offsets, _, sink, _ = reader(groups=NameFilter(exclude="orders-.*"))
    offsets.handle(Record(None, None, error_=EOF))  # type: ignore[arg-type]
    handle_all(offsets, metadata_record(sample_group(2)))
    assert sink.events == []


@pytest.mark.parametrize(("key", "value", "kind"), [
    (b"\x00", b"", "malformed"),                                   # truncated key
    (group_key("g"), b"\xff\xffgarbage", "malformed"),             # negative value version
    (group_key("g"), b"\x00\x63garbage", "unknown_record_2"),      # a newer value version
    (None, b"x", "malformed"),                                     # no key
    (b"\x00\x19\x00\x01g", b"\x00\x00", "unknown_record_25"),       # a newer record type (25)
])
def test_bad_records_are_counted_and_skipped(key: bytes | None, value: bytes, kind: str) -> None:
    offsets, _, sink, telemetry = reader()
    offsets.handle(Record(None, None, error_=EOF))  # type: ignore[arg-type]
    handle_all(offsets, Record(key, value, offset_=17), metadata_record(sample_group(4)))
    assert sample(telemetry, "kmon_collector_malformed_total", kind=kind) == 1
    assert len(sink.events) == 1  # the reader went on


WRITES = itertools.count(2_000_000_000_000)


def write(*records: object) -> list[Record]:
    """The records of one write of the group coordinator: one timestamp."""
    at = next(WRITES)
    return [Record(*(tombstone(r) if isinstance(r, GroupTombstone | SubRecordTombstone) else encode_record(r)),
                   timestamp_=at) for r in records]


def test_a_consumer_protocol_group_is_one_event_per_write_with_its_epochs_and_reconciling_members() -> None:
    offsets, _, sink, _ = reader()
    offsets.handle(Record(None, None, error_=EOF))  # type: ignore[arg-type]
    handle_all(offsets, *write(*join("a", 1, 0, 1, 2, 3)))
    # b joins: epoch 2, the new target gives b half of a's partitions, a still has to revoke them
    handle_all(offsets, *write(member("b"), epoch(2), target("a", 0, 1), target("b", 2, 3), target_epoch(2),
                               current("a", 2, 0, 1, state=1, revoking=(2, 3)), current("b", 2)))
    assert [(e.op, e.data.group_type, e.data.state, e.data.generation, e.data.assignment_epoch, e.data.reconciling)
            for e in sink.events] == [("upsert", "consumer", "Stable", 1, 1, 0),
                                      ("upsert", "consumer", "Reconciling", 2, 2, 1)]
    a, b = sink.events[-1].data.members
    assert (a.member_id, a.assignment, a.pending_revocation, a.member_state) == (
        "a", ("orders:0", "orders:1"), ("orders:2", "orders:3"), "UNREVOKED_PARTITIONS")
    assert (b.member_epoch, b.assignment, b.subscribed_topics, b.rack) == (2, (), ("orders",), "rack-a")
    assert sink.events[-1].data.protocol == "uniform"
    handle_all(offsets, *write(*deletion("a", "b")))
    assert [e.op for e in sink.events] == ["upsert", "upsert", "delete"]


def test_an_upgrade_from_the_classic_protocol_is_one_group_throughout() -> None:
    """Kafka writes the classic group's tombstone and the consumer group's records in one write."""
    offsets, _, sink, _ = reader()
    offsets.handle(Record(None, None, error_=EOF))  # type: ignore[arg-type]
    classic = replace(sample_group(3), group=G, generation=7)
    handle_all(offsets, metadata_record(classic))
    handle_all(offsets, Record(group_key(G), None, timestamp_=99), *[
        replace(r, timestamp_=99) for r in write(*join("a", 8, 0, 1, classic=True))])
    assert [(e.op, e.data.group_type, e.data.generation) for e in sink.events] == [
        ("upsert", "classic", 7), ("upsert", "consumer", 8)]
    assert sink.events[-1].data.members[0].classic_protocol


def test_records_of_a_newer_kafka_are_counted_by_type_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    offsets, _, sink, telemetry = reader()
    offsets.handle(Record(None, None, error_=EOF))  # type: ignore[arg-type]
    newer = Record(b"\x00\x1e\x00\x01g", b"\x00\x00")   # type 30
    with caplog.at_level("WARNING", "kmon.collector.groups"):
        handle_all(offsets, newer, Record(newer.key_, newer.value_), *write(*join("a", 1, 0)))
    assert sample(telemetry, "kmon_collector_malformed_total", kind="unknown_record_30") == 2
    assert len([r for r in caplog.records if "record type 30" in r.getMessage()]) == 1
    assert [e.op for e in sink.events] == ["upsert"]


def test_a_share_groups_start_offsets_are_its_committed_offsets() -> None:
    """Read from __share_group_state: a snapshot, an update moving the start on, one keeping it."""
    offsets, book, _, _ = reader()
    snapshot = ShareSnapshot("jobs", T, 0, 1, 1, 3, 100, 1, 2, -1, ())
    state = lambda r: Record(*encode_share_state(r), topic_="__share_group_state")  # noqa: E731
    handle_all(offsets, state(snapshot), state(ShareSnapshot("jobs", T, 1, 1, 1, 3, -1, 1, 2, -1, ())))
    assert book.committed(["jobs"]) == {"jobs": {("orders", 0): 100}}   # partition 1: no start offset yet
    handle_all(offsets, state(ShareUpdate("jobs", T, 0, 1, -1, 140, -1, ())),
               state(ShareUpdate("jobs", T, 0, 1, -1, -1, -1, ())))
    assert book.committed(["jobs"]) == {"jobs": {("orders", 0): 140}}
    handle_all(offsets, Record(share_state_key(0, "jobs", T, 0), None, topic_="__share_group_state"))
    assert book.committed(["jobs"]) == {}


def test_a_share_partition_of_a_topic_not_named_yet_is_booked_once_its_name_is_known() -> None:
    book, sink, telemetry = GroupBook(), ListSink(), Telemetry("c")
    emitter = Emitter("c", sink, telemetry)
    names: dict[str, str] = {}
    offsets = OffsetsReader(GroupsConfig("h:9092", "c"), book, emitter, ModernStates(emitter),
                            lambda ids: {i: names.get(i, i) for i in ids})
    record = Record(*encode_share_state(ShareSnapshot("jobs", T, 0, 1, 1, 3, 100, 1, 2, -1, ())),
                    topic_="__share_group_state")
    handle_all(offsets, record)
    assert book.committed(["jobs"]) == {}, "not under its topic id"
    names[T] = "orders"   # the topic described since
    offsets.flush()
    assert book.committed(["jobs"]) == {"jobs": {("orders", 0): 100}}


def test_modern_groups_get_their_lag_from_the_poller_never_an_older_state() -> None:
    sink = ListSink()
    modern = ModernStates(Emitter("c", sink, Telemetry("c")))
    modern.upsert(GroupState("m", "Reconciling", 2, group_type="consumer", origin="offsets", assignment_epoch=2))
    modern.emit_offsets({"m": Offsets({"orders": TopicLag(5, 1.0)}, "stalled", {"orders:0": "stalled"})})
    modern.upsert(GroupState("m", "Stable", 2, group_type="consumer", origin="offsets", assignment_epoch=2))
    assert [(e.data.state, e.data.lag, e.data.status) for e in sink.events] == [
        ("Reconciling", {}, None), ("Reconciling", {"orders": TopicLag(5, 1.0)}, "stalled"),
        ("Stable", {"orders": TopicLag(5, 1.0)}, "stalled")]
    assert sink.events[-1].data.partition_status == {"orders:0": "stalled"}
    assert modern.groups() == {"m": "consumer"}
    assert modern.forget("m") and modern.groups() == {}


def test_end_of_every_partition_means_caught_up() -> None:
    offsets, _, _, _ = reader()
    offsets._partitions = 2
    offsets.handle(Record(None, None, error_=EOF, partition_=0))  # type: ignore[arg-type]
    assert not offsets.caught_up.is_set()
    offsets.handle(Record(None, None, error_=EOF, partition_=1))  # type: ignore[arg-type]
    assert offsets.caught_up.is_set()


def test_collector_events_survive_the_wire_format() -> None:
    """What the collector emits is what the stream decodes (lag keyed by int partitions)."""
    sink = ListSink()
    emitter = Emitter("c", sink, Telemetry("c"))
    lag = {"t": TopicLag(lag=5, lag_seconds=1.5, partitions={0: 2, 1: 3})}
    emitter.upsert(replace(state_from_metadata(sample_group(4)), lag=lag))
    emitter.delete("orders-app")
    assert [decode(encode(e)) for e in sink.events] == sink.events


def test_the_first_poll_waits_for_the_history_until_it_is_read_stopped_or_late() -> None:
    history, stop = threading.Event(), threading.Event()
    started = time.monotonic()
    assert not wait_for(history, stop, timeout_s=0.3)
    assert time.monotonic() - started >= 0.3
    threading.Timer(0.1, history.set).start()
    assert wait_for(history, stop, timeout_s=30)
    history.clear()
    threading.Timer(0.1, stop.set).start()
    started = time.monotonic()
    assert not wait_for(history, stop, timeout_s=30)
    assert time.monotonic() - started < 10
