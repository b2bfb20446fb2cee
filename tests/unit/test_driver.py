"""The driver side of a micro-batch, without Spark: rows as entity_step.fold returns them."""
from pathlib import Path

import pytest

import streaming.views.isr
from kmon.codec import encode
from kmon.events import EVENTS_TOPIC, ControllerState, Event, PartitionState, TopicState
from streaming.driver import ViewDriver
from streaming.fold.arrow import table
from streaming.fold.entity_step import fold
from streaming.history_log import files, read
from streaming.published import LatestPublished
from streaming.record_log import RecordLog
from streaming.views import ViewOptions
from tests.unit.views_builders import batch, controller_row, history, row, scrape, value


def test_a_published_exposition_keeps_what_it_showed_while_later_batches_change_the_records(tmp_path: Path) -> None:
    holder = LatestPublished()
    driver = ViewDriver(RecordLog(tmp_path), history(tmp_path), holder, ViewOptions(), EVENTS_TOPIC)
    driver.on_batch(1, *batch([controller_row(1, 1, 1)]), started=0.0)
    before = holder.get()
    driver.on_batch(2, *batch([controller_row(2, 2, 2)]), started=0.0)
    assert value(scrape(holder), "kmon_controller_id") == 2
    holder.set(before)
    assert value(scrape(holder), "kmon_controller_id") == 1


def test_a_batch_renders_only_the_topics_it_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[str] = []
    real = streaming.views.isr._topic_text

    def counting(model, topic):
        rendered.append(topic)
        return real(model, topic)
    monkeypatch.setattr(streaming.views.isr, "_topic_text", counting)
    holder = LatestPublished()
    driver = ViewDriver(RecordLog(tmp_path), history(tmp_path), holder, ViewOptions(), EVENTS_TOPIC)
    topics = [f"t{i}" for i in range(20)]
    driver.on_batch(1, *batch([row("topic", f"topic:{t}", TopicState(t, None, {0: (1, 2)}), 1) for t in topics]),
                    started=0.0)
    assert sorted(rendered) == sorted(topics)
    rendered.clear()
    driver.on_batch(2, *batch([row("partition", "partition:t7:0", PartitionState("t7", 0, 1, 1, (1,), 1), 2)]),
                    started=0.0)
    assert rendered == ["t7"]
    assert value(scrape(holder), "kmon_under_replicated_partitions", topic="t7") == 1
    assert value(scrape(holder), "kmon_under_replicated_partitions", topic="t8") == 0


def test_a_batch_appends_its_transitions_to_the_history_and_counts_them(tmp_path: Path) -> None:
    holder = LatestPublished()
    driver = ViewDriver(RecordLog(tmp_path), history(tmp_path), holder, ViewOptions(), EVENTS_TOPIC)
    first = controller_row(1, 1, 1)   # a first sight: nothing changed that kmon saw
    changed = fold("c1/controller", first["record"], [(0, 2, encode(Event(
        cluster="c1", source="zk", kind="controller", entity="controller", op="upsert", observed_ms=2_000,
        data=ControllerState(2, 2), zxid=2)).decode())])
    driver.on_batch(1, *batch([first]), 0.0, [table(first["transitions"])])
    driver.on_batch(2, *batch([changed]), 0.0, [table(changed["transitions"])])
    [written] = files(tmp_path / "history")
    assert [(t.kind, t.old, t.new, t.time_ms) for t in read(written)] == [("controller_change", "1", "2", 2_000)]
    assert value(scrape(holder), "kmon_history_rows_total") == 1
    assert value(scrape(holder), "kmon_history_lost_rows_total") == 0


def self_counters(holder: LatestPublished) -> dict[str, float]:
    return {name: value(scrape(holder), name, **labels) for name, labels in (
        ("kmon_events_total", {"source": "zk", "kind": "controller"}), ("kmon_stream_input_rows_total", {}))}


def test_a_restarted_driver_goes_on_from_the_counters_and_does_not_count_a_replayed_batch(tmp_path: Path) -> None:
    first = LatestPublished()
    driver = ViewDriver(RecordLog(tmp_path), history(tmp_path), first, ViewOptions(), EVENTS_TOPIC)
    driver.on_batch(1, *batch([controller_row(1, 1, 1)]), started=0.0)
    driver.on_batch(2, *batch([controller_row(2, 2, 2)]), started=0.0)
    assert self_counters(first) == {"kmon_events_total": 2, "kmon_stream_input_rows_total": 2}
    # the app dies after batch 2 reached the record log, before Spark committed it: Spark runs it again
    again = LatestPublished()
    restarted = ViewDriver(RecordLog(tmp_path), history(tmp_path), again, ViewOptions(), EVENTS_TOPIC)
    assert self_counters(again) == {"kmon_events_total": 2, "kmon_stream_input_rows_total": 2}
    restarted.on_batch(2, *batch([controller_row(2, 2, 2)]), started=0.0)
    assert self_counters(again) == {"kmon_events_total": 2, "kmon_stream_input_rows_total": 2}
    restarted.on_batch(3, *batch([controller_row(3, 3, 3)]), started=0.0)
    assert self_counters(again) == {"kmon_events_total": 3, "kmon_stream_input_rows_total": 3}


@pytest.mark.parametrize("garbage", [b"{not json", b'{"batch_id": 4, "counters": {"events": [["c1", 5]]}}'])
def test_unreadable_counters_start_again_from_zero_and_are_said(tmp_path: Path, garbage: bytes,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "counters.json").write_bytes(garbage)
    holder = LatestPublished()
    driver = ViewDriver(RecordLog(tmp_path), history(tmp_path), holder, ViewOptions(), EVENTS_TOPIC)
    driver.on_batch(1, *batch([controller_row(1, 1, 1)]), started=0.0)
    assert self_counters(holder) == {"kmon_events_total": 1, "kmon_stream_input_rows_total": 1}
    assert "start again from 0" in caplog.text
