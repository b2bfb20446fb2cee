"""The views' half of each micro-batch (ViewDriver.present) on a thread of its own.

Spark starts the next micro-batch only when the sink returns. While the driver rendered a
batch's changes (a second of one core after a broker failure at 100k partitions), the
executors' cores waited; now the sink persists the batch and returns, and the views catch up
while the next batch runs. Batches that arrive while the views render are presented together
(each record parsed, each topic rendered once), so a backlog makes the views refresh less often
instead of falling behind. The exposition is still published only once the views hold a batch:
what the delay and batch-duration metrics measure is unchanged.

The views are this thread's alone: a question about them (the API's) is asked of it, and answered
between two presents (:meth:`ViewThread.ask`).
"""
from __future__ import annotations

import contextlib
import logging
import threading
from concurrent.futures import Future
from typing import Callable, ContextManager, TypeVar

from streaming.driver import Persisted, ViewDriver
from streaming.views import Views

T = TypeVar("T")

log = logging.getLogger("kmon.stream")
MAX_BEHIND = 4   # batches persisted but not presented before the sink waits for the views


class ViewsFailed(RuntimeError):
    """The views' thread stopped on an error; the query fails with it, as when the sink raised."""


class ViewThread:
    """start(), then submit() per persisted batch; stop() presents what is pending and ends."""

    def __init__(self, driver: ViewDriver, max_behind: int = MAX_BEHIND,
                 around: Callable[[], ContextManager[None]] = contextlib.nullcontext):
        self._driver = driver
        self._max_behind = max_behind
        self._around = around   # what each present() runs in (the app's: gc_tuning.FrozenAfterUse)
        self._pending: list[Persisted] = []
        self._questions: list[tuple[Callable[[Views], object], Future]] = []
        self._failure: BaseException | None = None
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="kmon-views", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, batch: Persisted) -> None:
        """Queue a persisted batch; waits while the views are ``max_behind`` batches behind."""
        with self._changed:
            self._changed.wait_for(lambda: self._failure is not None or len(self._pending) < self._max_behind)
            self._raise_failure()
            self._pending.append(batch)
            self._changed.notify_all()

    def ask(self, question: Callable[[Views], T], timeout: float) -> T:
        """``question(views)`` on this thread, between presents; TimeoutError when the views are busy
        longer than ``timeout`` (a backlog's batches) or stopped, or what the question raised."""
        answer: Future = Future()
        with self._changed:
            if self._stopping or self._failure is not None or not self._thread.is_alive():
                raise TimeoutError("the views are not running")
            self._questions.append((question, answer))
            self._changed.notify_all()
        return answer.result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def failure(self) -> str | None:
        """Why the views stopped, if they did (the app exits on it even when no batch follows)."""
        with self._changed:
            return None if self._failure is None else f"the views stopped: {self._failure!r}"

    def _raise_failure(self) -> None:
        if (why := self.failure()) is not None:
            raise ViewsFailed(why) from self._failure

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._questions or self._stopping)
                questions, self._questions = self._questions, []
                if not self._pending and not questions:
                    return
                batches, self._pending = self._pending, []
                self._changed.notify_all()
            if batches:
                try:
                    with self._around():
                        self._driver.present(batches)
                except Exception as e:   # a bug: the next submit fails the query with it
                    log.exception("bringing the views up to date with batches %s failed",
                                  ",".join(str(b.batch_id) for b in batches))
                    with self._changed:
                        self._failure = e
                        questions += self._questions
                        self._questions = []
                        self._changed.notify_all()
                    for _, answer in questions:
                        answer.set_exception(TimeoutError("the views are not running"))
                    return
            for question, answer in questions:   # after the batches taken with them: the freshest views
                try:
                    answer.set_result(self._driver.ask(question))
                except Exception as e:   # the asker's to tell; the views go on
                    answer.set_exception(e)
