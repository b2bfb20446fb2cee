"""/metrics cost at scale, without Spark: records -> views -> scrapes, as the driver does it; then what the
API's /api/v1/health costs (the question on the views, the answer's size) and what it does to scrapes
over HTTP while someone asks it again and again."""
from __future__ import annotations

import statistics
import tempfile
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

from bench.synthetic import Shape, Zxids, broker_failure, healthy
from kmon import http
from kmon.events import Event
from streaming.api import Api
from streaming.exporter import serve_metrics
from streaming.fold.entity import EntityRecord, apply_event
from streaming.history_query import HistoryReader
from streaming.published import LatestPublished, Published
from streaming.views import ViewOptions, Views
from streaming.views.stats import SelfStats

FLIPS = 20
SCRAPES = 5
HTTP_SCRAPES = 20   # scrapes over HTTP, alone and then while the API's health is asked without a pause


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
            "scrape_bytes": len(body), "series": body.count(b"\n") - body.count(b"\n#"),
            **_api(views, exposition)}


def _api(views: Views, exposition) -> dict[str, float]:
    """The views after the storm (a broker down: a quarter of the partitions under-replicated) behind a
    real server, the question asked on the requesting thread under a lock (the app asks the views'
    thread: the same work, the same interpreter)."""
    lock = threading.Lock()

    def ask(question, timeout):
        with lock:
            return question(views)
    health_s = _timed(lambda: b"%d" % len(views.health()))[0]   # the first ask after a change: not cached
    with tempfile.TemporaryDirectory() as history:
        api = Api(ask, HistoryReader(Path(history)))
        server = serve_metrics("127.0.0.1", 0, LatestPublished(Published(exposition, SelfStats())), more=api.routes())
        url = f"http://127.0.0.1:{server.server_address[1]}"
        get = lambda path: urllib.request.urlopen(url + path, timeout=60).read()   # noqa: E731
        try:
            answer_s, answer = _timed(lambda: get("/api/v1/health?limit=100000"))
            alone = [_timed(lambda: get("/metrics"))[0] for _ in range(HTTP_SCRAPES)]
            stop, asked = threading.Event(), []

            def asking() -> None:
                while not stop.is_set():
                    asked.append(_timed(lambda: get("/api/v1/health"))[0])
            asker = threading.Thread(target=asking)
            asker.start()
            try:
                beside = [_timed(lambda: get("/metrics"))[0] for _ in range(HTTP_SCRAPES)]
            finally:
                stop.set()
                asker.join()
        finally:
            http.stop(server)
    return {"health_views_s": health_s, "health_http_s": answer_s, "health_bytes": len(answer),
            "health_asked": len(asked), "scrape_http_p50_s": statistics.median(alone),
            "scrape_http_while_asked_p50_s": statistics.median(beside), "scrape_http_while_asked_max_s": max(beside)}


def _flip(e: Event, zxid: int, i: int) -> Event:
    """The partition of ``e`` back in full ISR (even i) or not: one ISR change, one record."""
    isr = e.data.isr if i % 2 else (*e.data.isr, 1)
    return replace(e, zxid=zxid, data=replace(e.data, isr=isr))


def _timed(fn: Callable[[], bytes]) -> tuple[float, bytes]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out
