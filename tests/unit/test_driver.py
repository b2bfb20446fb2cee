"""The driver side of a micro-batch, without Spark: rows as entity_step.fold returns them."""
from pathlib import Path

import pytest

import streaming.driver
from kmon.events import EVENTS_TOPIC, ControllerState, Event, ZnodeMeta, encode
from streaming.driver import ViewDriver, ViewOptions
from streaming.entity_step import fold
from streaming.exporter import SnapshotHolder
from streaming.record_log import RecordLog


def controller_row(broker: int, epoch: int, zxid: int) -> dict:
    event = Event(cluster="c1", source="zk", kind="controller", entity="controller", op="upsert",
                  observed_ms=1_000 * zxid, data=ControllerState(broker, epoch), zxid=zxid,
                  znode=ZnodeMeta("/controller", zxid, 0, 0))
    return fold("c1/controller", None, [(0, zxid, encode(event).decode())])


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times views were built (each call appends the number of records)."""
    calls: list[int] = []
    real = streaming.driver.build_views

    def counting(records, *args):
        calls.append(len(records))
        return real(records, *args)
    monkeypatch.setattr(streaming.driver, "build_views", counting)
    return calls


def test_batches_do_not_build_views_the_first_scrape_does_once(tmp_path: Path, builds: list[int]) -> None:
    holder = SnapshotHolder()
    driver = ViewDriver(RecordLog(tmp_path), holder, ViewOptions(), EVENTS_TOPIC)
    for zxid, broker in enumerate((1, 2, 3), start=1):
        driver.on_batch(zxid, [controller_row(broker, zxid, zxid)], started=0.0)
    assert builds == []
    snapshot = holder.get()
    assert snapshot.views.clusters["c1"].controller.broker_id == 3
    assert snapshot.views is holder.get().views
    assert builds == [1]


def test_a_snapshot_keeps_its_records_while_later_batches_change_them(tmp_path: Path, builds: list[int]) -> None:
    holder = SnapshotHolder()
    driver = ViewDriver(RecordLog(tmp_path), holder, ViewOptions(), EVENTS_TOPIC)
    driver.on_batch(1, [controller_row(1, 1, 1)], started=0.0)
    before = holder.get()
    driver.on_batch(2, [controller_row(2, 2, 2)], started=0.0)
    assert before.views.clusters["c1"].controller.broker_id == 1
    assert holder.get().views.clusters["c1"].controller.broker_id == 2
