"""Batched Admin API requests with bounded concurrency and per-request deadlines.

confluent-kafka's admin calls return one future per item (group, partition); a slow or
failing coordinator only delays or fails the futures of its own items. ``gather`` keeps
at most ``concurrency`` batches in flight, starts the next batch as soon as one is
settled, and gives every future ``timeout`` seconds from its batch's submission: a late
one is recorded as a TimeoutError and no longer waited for, so it stalls nothing else.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Hashable, Iterator, Mapping, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

STOP_CHECK_S = 0.25   # how often a wait looks at the stop event


class Stopped(BaseException):
    """The collector stops: the requests in flight are not waited for (one for a dead broker holds
    its answer for the whole request timeout). A BaseException, as KeyboardInterrupt is: no handler
    of a request's failure takes it for one."""


def settled(future: "Future[T]", timeout: float, stop: threading.Event | None = None) -> T:
    """``future``'s result within ``timeout`` (TimeoutError else), or Stopped once ``stop`` is set."""
    deadline = time.monotonic() + timeout
    while not future.done():
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer within {timeout:g} s")
        if stop is not None and stop.is_set():
            raise Stopped()
        wait([future], timeout=min(left, STOP_CHECK_S))
    return future.result()


@dataclass
class Gathered(Generic[K]):
    results: dict[K, Any] = field(default_factory=dict)
    failures: dict[K, BaseException] = field(default_factory=dict)
    requests: int = 0  # calls made (batches submitted)


def batches(items: Sequence[K], size: int) -> Iterator[list[K]]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


def gather(items: Sequence[K], submit: Callable[[list[K]], Mapping[K, Future]], *,
           batch_size: int, concurrency: int, timeout: float, stop: threading.Event | None = None) -> Gathered[K]:
    out: Gathered[K] = Gathered()
    queue = batches(items, batch_size)
    # future -> (item, batch number, deadline); batch number -> its unsettled futures
    pending: dict[Future, tuple[K, int, float]] = {}
    open_batches: dict[int, set[Future]] = {}

    def settle(future: Future, outcome: Any, failed: bool) -> None:
        item, number, _ = pending.pop(future)
        (out.failures if failed else out.results)[item] = outcome
        open_batches[number].discard(future)
        if not open_batches[number]:
            del open_batches[number]

    def launch() -> None:
        while len(open_batches) < concurrency:
            batch = next(queue, None)
            if batch is None:
                return
            number = out.requests
            out.requests += 1
            try:
                futures = submit(batch)
            except Exception as e:  # refused locally (bad input, client closed)
                out.failures.update((item, e) for item in batch)
                continue
            deadline = time.monotonic() + timeout
            if futures:
                open_batches[number] = set(futures.values())
                pending.update((f, (item, number, deadline)) for item, f in futures.items())

    launch()
    while pending:
        if stop is not None and stop.is_set():
            raise Stopped()
        next_deadline = min(deadline for _, _, deadline in pending.values())
        left = max(0.0, next_deadline - time.monotonic())
        done, _ = wait(list(pending), timeout=left if stop is None else min(left, STOP_CHECK_S),
                       return_when=FIRST_COMPLETED)
        for future in done:
            error = future.exception()
            settle(future, error if error is not None else future.result(), error is not None)
        now = time.monotonic()
        for future, (item, _, deadline) in list(pending.items()):
            if deadline <= now:
                settle(future, TimeoutError(f"no answer for {item!r} within {timeout}s"), True)
        launch()
    return out
