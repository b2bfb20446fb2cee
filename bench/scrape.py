"""/metrics cost at scale, without Spark: records -> views -> scrapes, as the driver does it."""
from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Callable, Iterable

from bench.synthetic import Shape, Zxids, broker_failure, healthy
from kmon.events import Event
from streaming.fold.entity import EntityRecord, apply_event
from streaming.views import ViewOptions, Views
from streaming.views.stats import SelfStats

FLIPS = 20
SCRAPES = 5


def run(partitions: int, detail: str = "unhealthy") -> dict[str, float]:
    shape, zxid = Shape(partitions=partitions), Zxids()
    records: dict[str, EntityRecord] = {}

    def fold(events: Iterable[Event]) -> dict[str, EntityRecord]:
        changed = {}
        for e in events:
            records[e.message_key], *_ = apply_event(records.get(e.message_key), e)
            changed[e.message_key] = records[e.message_key]
        return changed

    views = Views(ViewOptions(detail))   # type: ignore[arg-type]

    def batch(changed: dict[str, EntityRecord]) -> float:
        """One micro-batch's driver work on the views: apply the changes, render what changed."""
        started = time.perf_counter()
        views.apply(changed)
        views.exposition(SelfStats())
        return time.perf_counter() - started

    started = time.perf_counter()
    first = fold(healthy(shape, zxid))
    failure = list(broker_failure(shape, zxid, broker=1))
    fold_s = time.perf_counter() - started
    initial_s = batch(first)
    storm_s = batch(fold(failure))
    flips = [batch(fold([_flip(e, zxid(), i)])) for i, e in enumerate(failure[1:FLIPS + 1])]
    exposition = views.exposition(SelfStats())
    scrapes, body = [], b""
    for _ in range(SCRAPES):
        scrape_s, body = _timed(lambda: exposition.body(int(time.time() * 1000)))
        scrapes.append(scrape_s)
    return {"partitions": partitions, "events": len(first) + len(failure),
            "fold_us_per_event": fold_s / (len(first) + len(failure)) * 1e6,
            "initial_batch_s": initial_s, "storm_batch_s": storm_s,
            "one_flip_batch_p50_s": statistics.median(flips), "one_flip_batch_max_s": max(flips),
            "scrape_p50_s": statistics.median(scrapes), "scrape_max_s": max(scrapes),
            "scrape_bytes": len(body), "series": body.count(b"\n") - body.count(b"\n#")}


def _flip(e: Event, zxid: int, i: int) -> Event:
    """The partition of ``e`` back in full ISR (even i) or not: one ISR change, one record."""
    isr = e.data.isr if i % 2 else (*e.data.isr, 1)
    return replace(e, zxid=zxid, data=replace(e.data, isr=isr))


def _timed(fn: Callable[[], bytes]) -> tuple[float, bytes]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out
