"""/metrics cost at scale, without Spark: records -> views -> one scrape."""
from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, generate_latest

from bench.synthetic import Shape, Zxids, broker_failure, healthy
from streaming.exporter import SelfStats, Snapshot, SnapshotHolder, ViewsCollector
from streaming.records import apply_event
from streaming.views import build_views


def run(partitions: int) -> dict[str, float]:
    shape = Shape(partitions=partitions)
    zxid = Zxids()
    records: dict = {}
    started = time.perf_counter()
    events = list(healthy(shape, zxid)) + list(broker_failure(shape, zxid, broker=1))
    for e in events:
        records[e.entity], _ = apply_event(records.get(e.entity), e)
    fold_s = time.perf_counter() - started
    started = time.perf_counter()
    views = build_views(records.values(), int(time.time() * 1000))
    views_s = time.perf_counter() - started
    holder = SnapshotHolder(Snapshot.of(views, SelfStats()))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ViewsCollector(holder))
    started = time.perf_counter()
    body = generate_latest(registry)
    scrape_s = time.perf_counter() - started
    return {"partitions": partitions, "events": len(events), "fold_us_per_event": fold_s / len(events) * 1e6,
            "build_views_s": views_s, "scrape_s": scrape_s, "scrape_bytes": len(body),
            "series": body.count(b"\n") - body.count(b"\n#")}
