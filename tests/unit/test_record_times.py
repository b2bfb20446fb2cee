"""The record-time reader's choices (collectors/groups/record_times.py), on messages as the consumer hands
them over; reading real records is tested against a real cluster (test_groups_collector, test_kraft_secure)."""
from __future__ import annotations

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, KafkaError, TopicPartition

from collectors.groups.config import GroupsConfig
from collectors.groups.record_times import SEEK_GAP, RecordTimes


class Message:
    def __init__(self, topic: str, partition: int, offset: int = 0, ms: int = 0, error: int | None = None,
                 kind: int = TIMESTAMP_CREATE_TIME) -> None:
        self._args = topic, partition, offset, ms, kind
        self._error = KafkaError(error) if error is not None else None

    def error(self): return self._error
    def topic(self): return self._args[0]
    def partition(self): return self._args[1]
    def offset(self): return self._args[2]
    def timestamp(self): return self._args[4], self._args[3]


class Seeks:
    def __init__(self) -> None:
        self.to: list[tuple[str, int, int]] = []
        self.paused: list[tuple[str, int]] = []

    def seek(self, tp: TopicPartition) -> None:
        self.to.append((tp.topic, tp.partition, tp.offset))

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused += [(tp.topic, tp.partition) for tp in tps]


def reader() -> RecordTimes:
    return RecordTimes(GroupsConfig(bootstrap_servers="-", cluster="c"))


def test_a_record_is_the_time_of_every_wanted_offset_up_to_it_and_a_far_one_is_sought() -> None:
    times, consumer, answered = reader(), Seeks(), set()
    pending = {("t", 0): [5, 6, 9, 9 + SEEK_GAP + 50]}
    starts = {("t", 0): 5}
    # offset 7 missing (a control record or compacted away), 8 read through: 9's record is its own
    for offset, ms in ((5, 1000), (6, 2000), (8, 3000), (9, 4000)):
        assert times._take(consumer, Message("t", 0, offset, ms), pending, starts, answered) is None
    assert consumer.to == [("t", 0, 9 + SEEK_GAP + 50)]   # seeks past the records between
    assert times._known == {("t", 0, 5): 1.0, ("t", 0, 6): 2.0, ("t", 0, 9): 4.0}
    assert answered == {("t", 0)} and pending == {("t", 0): [9 + SEEK_GAP + 50]}
    assert consumer.paused == []
    times._take(consumer, Message("t", 0, 200, 9000), pending, starts, answered)
    assert pending == {} and times._known[("t", 0, 159)] == 9.0
    assert consumer.paused == [("t", 0)]   # read: no more fetched of it


def test_refusals_the_end_and_records_without_a_time() -> None:
    times, consumer, answered = reader(), Seeks(), set()
    pending = {("t", 0): [3], ("u", 0): [1], ("v", 0): [4], ("w", 0): [8]}
    starts = {k: offsets[0] for k, offsets in pending.items()}
    take = lambda message: times._take(consumer, message, pending, starts, answered)
    assert take(Message("u", 0, error=KafkaError.TOPIC_AUTHORIZATION_FAILED)) == "u"
    take(Message("t", 0, 3, error=KafkaError._PARTITION_EOF))
    take(Message("v", 0, 4, -1, kind=TIMESTAMP_NOT_AVAILABLE))
    take(Message("w", 0, 2, 5000))   # reset from beyond the end
    assert pending == {("u", 0): [1]} and times._known == {}
