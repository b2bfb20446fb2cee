"""``__consumer_offsets`` and ``__share_group_state`` records, their folds, and the reader of both.

* ``offsets_record``: decode_record on a (key, value) of every record type 0-24 in every version
  and layout: a record or MalformedRecord, nothing else; a decoded record folds (modern_groups)
  into a new group and into a standing one, and what the fold shows maps to a GroupState.
* ``share_state_record``: decode_share_state likewise, folded (share_delivery) onto nothing and
  onto a held share-partition.
* ``reader``: OffsetsReader.handle on a sequence of messages of both topics, partitions' ends
  and fetches' ends among them: it never raises, counts each record it cannot decode, its events
  survive the events topic's codec, and it emits and books exactly what a reader that never saw
  the bad records does.
"""
from __future__ import annotations

from typing import Callable, Iterator, TypeVar

from confluent_kafka import KafkaError

from collectors.groups.modern_groups import ModernGroup, apply, fold_records, view
from collectors.groups.codec.offsets_codec import UnknownRecord, decode_record
from collectors.groups.offsets_reader import OFFSETS_TOPIC, SHARE_STATE_TOPIC
from collectors.groups.share_delivery import delivered_to, progress_after
from collectors.groups.codec.share_state_codec import decode_share_state
from collectors.groups.states import state_from_modern
from collectors.kafka_encoding import MalformedRecord
from kmon.codec import decode, encode
from kmon.events import Event, GroupState
from tests.fuzz.cases import Case, Message
from tests.fuzz.engine import Target
from tests.unit.group_record_samples import encoded_samples
from tests.unit.groups_builders import Record, deletion, join, named, reader, sample
from tests.unit.offsets_builders import encode as encode_record
from tests.unit.offsets_builders import all_valid_records, encode_share_state, tombstone
from tests.unit.share_state_samples import SAMPLES as SHARE_SAMPLES

R = TypeVar("R")
_EOF = KafkaError(KafkaError._PARTITION_EOF)


def _encoded(records: list[object]) -> list[tuple[bytes, bytes | None]]:
    return [tombstone(r) if type(r).__name__.endswith("Tombstone") else encode_record(r) for r in records]


def _offsets_records() -> list[tuple[bytes, bytes | None]]:
    return all_valid_records() + encoded_samples() + _encoded(deletion("a"))


def _share_records() -> list[tuple[bytes, bytes | None]]:
    return [encode_share_state(record, layout) for _, record, layout in SHARE_SAMPLES]


# ------------------------------------------------------------------ single records

_STANDING = fold_records([decode_record(*kv) for kv in _encoded(join("a", 1, 0, 1))])   # type: ignore[misc]


def _decoded(decoder: Callable[[bytes | None, bytes | None], R], case: Case) -> Iterator[R]:
    """The records of the case that decode; the decoder raises nothing but MalformedRecord."""
    for key, value in case:
        try:
            yield decoder(key, value)
        except MalformedRecord:
            pass


def check_offsets_record(case: Case) -> None:
    for record in _decoded(decode_record, case):
        for fold in (None, *_STANDING.values()):
            after = apply(fold, record)   # type: ignore[arg-type]
            shown = view(after) if after is not None else None
            if isinstance(shown, ModernGroup):
                _assert_publishable(state_from_modern(shown, named))


def _assert_publishable(state: GroupState) -> None:
    """What the events topic's codec writes, it reads back the same."""
    event = Event("c", "groups", "group", f"group:{state.group}", "upsert", 1, state)
    assert decode(encode(event)) == event, event


_HELD = progress_after(None, SHARE_SAMPLES[0][1])


def check_share_state_record(case: Case) -> None:
    for record in _decoded(decode_share_state, case):
        if isinstance(record, UnknownRecord):
            continue
        for held in (None, _HELD):
            progress = progress_after(held, record)
            if progress is not None:
                delivered_to(progress)


# ------------------------------------------------------------------ the reader

# a message's first field: bit 0 the topic (__share_group_state), bits 1-2 the partition, bit 3
# a partition's end (no record), bit 4 a fetch's end after it, bits 5-7 which write (timestamp)
_SHARE, _PARTITIONS, _END, _FETCH_END = 1, 6, 8, 16


def _reader_seeds() -> list[Case]:
    """Short logs (a case's cost is its length): groups joining and deleted, and every record
    type after a partition's end, eight at a time."""
    def messages(meta: int, records: list[tuple[bytes, bytes | None]]) -> tuple[Message, ...]:
        return tuple((bytes([meta]), k, v) for k, v in records)
    end = ((bytes([_END]), None, None),)
    groups = messages(0, _encoded(join("a", 1, 0, 1))) + messages(32 | _FETCH_END, _encoded(deletion("a")))
    records = _offsets_records()
    return [end + groups, end + messages(_SHARE, _share_records())] + [
        end + messages(_FETCH_END, records[i:i + 8]) for i in range(0, len(records), 8)]


def _message(meta_field: bytes | None, key: bytes | None, value: bytes | None) -> tuple[Record, bool]:
    meta = (meta_field or b"\0")[0]
    topic = SHARE_STATE_TOPIC if meta & _SHARE else OFFSETS_TOPIC
    record = Record(key, value, partition_=(meta & _PARTITIONS) >> 1, topic_=topic,
                    error_=_EOF if meta & _END else None, timestamp_=1_700_000_000_000 + (meta >> 5))
    return record, bool(meta & _FETCH_END)


def _decodes(record: Record) -> bool:
    if record.error_ is not None:
        return True
    decoder = decode_share_state if record.topic_ == SHARE_STATE_TOPIC else decode_record
    try:
        decoder(record.key_, record.value_)
        return True
    except MalformedRecord:
        return False


def check_reader(case: Case) -> None:
    everything, book, sink, telemetry = reader()
    clean, clean_book, clean_sink, _ = reader()
    for reader_ in (everything, clean):
        reader_._partitions = 3
    skipped = 0
    for fields in case:
        message, fetch_end = _message(*fields)
        everything.handle(message)   # type: ignore[arg-type]
        if _decodes(message):
            clean.handle(message)    # type: ignore[arg-type]
        else:
            skipped += 1
        if fetch_end:
            everything.flush()
            clean.flush()
    everything.flush()
    clean.flush()
    assert (sample(telemetry, "kmon_collector_malformed_total", kind="malformed") or 0) == skipped
    assert _told(sink.events) == _told(clean_sink.events)
    assert everything._modern._states == clean._modern._states
    assert book._committed == clean_book._committed
    for event in sink.events:
        assert decode(encode(event)) == event, event
    for state in everything._modern._states.values():
        _assert_publishable(state)


def _told(events: list[Event]) -> list[tuple[str, str, object]]:
    return [(e.entity, e.op, e.data) for e in events]   # not when: the two readers ran apart


TARGETS = (
    Target("offsets_record", 2, lambda: [(kv,) for kv in _offsets_records()], check_offsets_record),
    Target("share_state_record", 2, lambda: [(kv,) for kv in _share_records()], check_share_state_record),
    Target("reader", 3, _reader_seeds, check_reader, max_messages=24),
)
