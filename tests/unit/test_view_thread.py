"""The views' thread (streaming/view_thread.py) with a real ViewDriver, without Spark."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import pytest

from kmon.events import EVENTS_TOPIC
from streaming.driver import Persisted, ViewDriver
from streaming.published import LatestPublished
from streaming.record_log import RecordLog
from streaming.view_thread import ViewsFailed, ViewThread
from streaming.views import ViewOptions
from tests.unit.views_builders import batch, controller_row, history, scrape, value

WAIT_S = 30.0   # a bound for a wait that ends at once when the code is right


class HeldDriver(ViewDriver):
    """A driver whose present() waits for ``release`` and records which batches it was given."""

    def __init__(self, directory: Path, holder: LatestPublished):
        super().__init__(RecordLog(directory), history(directory), holder, ViewOptions(), EVENTS_TOPIC)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.presented: list[list[int]] = []

    def present(self, batches: Sequence[Persisted]) -> None:
        self.entered.set()
        assert self.release.wait(WAIT_S)
        self.presented.append([b.batch_id for b in batches])
        super().present(batches)


@pytest.fixture
def held(tmp_path: Path):
    holder = LatestPublished()
    driver = HeldDriver(tmp_path, holder)
    views = ViewThread(driver, max_behind=2)
    views.start()
    yield driver, views, holder
    driver.release.set()
    views.stop()


def persist(driver: ViewDriver, batch_id: int, broker: int) -> Persisted:
    return driver.persist(batch_id, *batch([controller_row(broker, batch_id, batch_id)]), started=0.0)


def test_batches_that_queue_while_the_views_render_are_presented_together(held) -> None:
    driver, views, holder = held
    views.submit(persist(driver, 1, broker=1))
    assert driver.entered.wait(WAIT_S)
    views.submit(persist(driver, 2, broker=2))
    views.submit(persist(driver, 3, broker=3))
    assert driver.presented == []   # the first is still being presented
    driver.release.set()
    views.stop()
    assert driver.presented == [[1], [2, 3]]
    assert value(scrape(holder), "kmon_controller_id") == 3
    # every batch's events are counted, though two were presented at once
    assert sum(holder.get().stats.input_rows.values()) == 3


def test_the_sink_waits_while_the_views_are_too_far_behind(held) -> None:
    driver, views, _ = held
    views.submit(persist(driver, 1, broker=1))
    assert driver.entered.wait(WAIT_S)
    views.submit(persist(driver, 2, broker=2))
    views.submit(persist(driver, 3, broker=3))   # two pending: max_behind
    fourth = threading.Thread(target=views.submit, args=(persist(driver, 4, broker=4),))
    fourth.start()
    fourth.join(0.2)
    assert fourth.is_alive()
    driver.release.set()
    fourth.join(WAIT_S)
    assert not fourth.is_alive()
    views.stop()
    assert [b for batches in driver.presented for b in batches] == [1, 2, 3, 4]


def test_stop_presents_what_is_pending(held) -> None:
    driver, views, holder = held
    views.submit(persist(driver, 1, broker=1))
    assert driver.entered.wait(WAIT_S)
    views.submit(persist(driver, 2, broker=2))
    driver.release.set()
    views.stop()
    assert value(scrape(holder), "kmon_controller_id") == 2


def test_a_failure_of_the_views_fails_the_next_batch(tmp_path: Path) -> None:
    class Broken(ViewDriver):
        def present(self, batches: Sequence[Persisted]) -> None:
            raise ValueError("a bug")

    driver = Broken(RecordLog(tmp_path), history(tmp_path), LatestPublished(), ViewOptions(), EVENTS_TOPIC)
    views = ViewThread(driver)
    views.start()
    try:
        assert views.failure() is None
        views.submit(persist(driver, 1, broker=1))
        views.stop()   # after presenting batch 1, which fails
        assert "a bug" in (views.failure() or "")
        with pytest.raises(ViewsFailed, match="a bug"):
            views.submit(persist(driver, 2, broker=2))
    finally:
        views.stop()


def test_presenting_batches_together_equals_presenting_them_in_turn(tmp_path: Path) -> None:
    apart, together = LatestPublished(), LatestPublished()
    one = ViewDriver(RecordLog(tmp_path / "a"), history(tmp_path / "a"), apart, ViewOptions(), EVENTS_TOPIC)
    two = ViewDriver(RecordLog(tmp_path / "b"), history(tmp_path / "b"), together, ViewOptions(), EVENTS_TOPIC)
    for batch_id, broker in ((1, 1), (2, 2), (3, 1)):
        one.on_batch(batch_id, *batch([controller_row(broker, batch_id, batch_id)]), started=0.0)
    two.present([persist(two, batch_id, broker) for batch_id, broker in ((1, 1), (2, 2), (3, 1))])
    assert apart.get().stats.events == together.get().stats.events
    assert apart.get().stats.input_rows == together.get().stats.input_rows
    assert value(scrape(apart), "kmon_controller_id") == value(scrape(together), "kmon_controller_id") == 1
    assert value(scrape(together), "kmon_controller_epoch") == 3


def test_a_question_is_answered_between_presents_and_waits_for_the_one_running(held) -> None:
    driver, views, _ = held
    driver.release.set()
    views.submit(persist(driver, 1, broker=1))
    controller = lambda v: v.record("c1", "controller").state.broker_id   # noqa: E731
    assert views.ask(controller, WAIT_S) == 1
    driver.release.clear()
    driver.entered.clear()
    views.submit(persist(driver, 2, broker=2))
    assert driver.entered.wait(WAIT_S)
    with pytest.raises(TimeoutError):   # the views are busy with batch 2: the asker is told, not held
        views.ask(controller, 0.2)
    driver.release.set()
    assert views.ask(controller, WAIT_S) == 2
    with pytest.raises(KeyError):   # what a question raises is the asker's; the views go on
        views.ask(lambda v: {}["x"], WAIT_S)
    assert views.ask(controller, WAIT_S) == 2
    views.stop()
    with pytest.raises(TimeoutError, match="not running"):
        views.ask(controller, WAIT_S)
