"""The Spark app on a real broker: backlog drain, storm absorption, event -> export delay;
and, on the same backlog, the limits the drain is held against: a plain consumer (the
transport) and the pure fold (the logic)."""
from __future__ import annotations

import gc
import json
import os
import statistics
import time
import urllib.request
from collections import defaultdict
from typing import Callable, Iterable, Iterator

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.support.harness import TopicReader, local_stack
from bench.support.measure import command, descendants, percentile, rss_mb, wait
from bench.synthetic import Shape, Zxids, broker_failure, healthy
from kmon.codec import decode, encode
from kmon.events import Event, PartitionState, ZnodeMeta, entity_key
from streaming.app import StreamApp
from streaming.config import StreamConfig
from streaming.fold.entity_step import fold
from kmon.gc_tuning import collect_less_often
from streaming.gc_tuning import release_freed_memory

TOPIC = "kmon-bench-events"
STORMS = 5   # broker failures absorbed one after the other, each a storm measured (their spread is wide)
# The ZooKeeper collector's read rate over a 100k-partition tree (bench/README.md, "The ZooKeeper
# collector"): how fast a broker failure's changed partition states reach the events topic.
COLLECTOR_READS_PER_S = 3200
PACED_STORMS = 3


def _produce(bootstrap: str, messages: Iterable[tuple[str, bytes]]) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    n = 0
    for key, value in messages:
        while True:
            try:
                p.produce(TOPIC, key=key, value=value)
                break
            except BufferError:
                p.poll(0.1)
        n += 1
    p.flush(120)
    return n


def _encoded(events: Iterable[Event]) -> Iterator[tuple[str, bytes]]:
    return ((e.message_key, encode(e)) for e in events)


def _rows(app: StreamApp) -> int:
    """Events the app has folded so far; raises if its query died (a wait would last its whole timeout)."""
    if (why := app.failure()) is not None:
        raise RuntimeError(f"the streaming query stopped: {why[:2000]}")
    return sum(app.holder.get().stats.input_rows.values())


def _backlog_events(shapes: list[Shape], zxid: Zxids, backlog: int) -> Iterator[Event]:
    """Each healthy cluster, then broker failures (cluster after cluster) until ``backlog`` events."""
    n = 0
    for shape in shapes:
        for e in healthy(shape, zxid):
            n += 1
            yield e
    failure = 0
    while n < backlog:
        shape = shapes[failure % len(shapes)]
        for e in broker_failure(shape, zxid, (failure // len(shapes) + 1) % shape.brokers + 1):
            n += 1
            yield e
            if n >= backlog:
                return
        failure += 1


def fleet(partitions: int, clusters: int) -> list[Shape]:
    """``clusters`` synthetic clusters of ``partitions`` each; one is called "bench"."""
    return [Shape(partitions=partitions, cluster="bench" if i == 0 else f"bench-{i:02d}") for i in range(clusters)]


def run(partitions: int, backlog: int, delay_samples: int, trigger: float, progress: Callable[[str], None],
        clusters: int = 1, driver_memory: str = StreamConfig.driver_memory, master: str = "local[2]") -> dict:
    """``clusters`` clusters of ``partitions`` each into one app (a fleet); the storms and the delay
    samples are the first cluster's."""
    with local_stack() as stack:
        assert stack.state
        boot = stack.state.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": boot})  # kept alive until the future resolves
        admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
        shapes, zxid = fleet(partitions, clusters), Zxids()
        shape = shapes[0]
        progress(f"producing a backlog: {clusters} cluster(s) of {partitions} partitions, then broker failures up "
                 f"to {backlog} events")
        messages = list(_encoded(_backlog_events(shapes, zxid, backlog)))   # kept for the fold's limit
        produced = _produce(boot, messages)
        cfg = StreamConfig(bootstrap_servers=boot, events_topic=TOPIC, checkpoint=stack.dir.parent / "checkpoint",
                           metrics_host="127.0.0.1", metrics_port=0, master=master, trigger_seconds=trigger,
                           driver_memory=driver_memory,
                           spark_jars=tuple(stack.tools.spark_jar_list()))
        # Before the app starts, so that neither shares the two cores with Spark; under the
        # garbage collector's settings of the app's processes.
        collect_less_often()
        progress(f"limits: a plain consumer reading the {produced} events, then decode and fold alone")
        limits = {"transport_events_per_s": produced / _read_to_end(boot, produced),
                  **_logic_limits(messages, cfg.max_offsets_per_trigger)}
        del messages
        gc.collect()
        release_freed_memory()   # the C heap's pages the bench's data left, given back as the app gives its own
        # what the driver process holds before the app: the bench's own data and what it left behind
        before_app_mb = rss_mb(os.getpid())
        app = StreamApp(cfg)
        app.start()
        driver_s = _time_driver(app)
        try:
            progress(f"draining {produced} events")
            drain_s = wait(lambda: _rows(app) >= produced, 3600, "backlog drain")
            progress(_batch_phases(app, produced, driver_s))
            storms = [_storm(app, boot, shape, zxid, shape.brokers - i, driver_s, progress) for i in range(STORMS)]
            storm_s = [s for s, _ in storms]
            paced = [_paced_storm(app, boot, shape, zxid, shape.brokers - STORMS - i, progress)
                     for i in range(PACED_STORMS)]
            progress(f"event -> export delay, {delay_samples} samples")
            delays, scrapes, scrape_bytes = _delays(app, boot, delay_samples, zxid)
            memory = _memory()
            memory["driver_python_before_app_mb"] = before_app_mb
            memory["driver_python_app_mb"] = memory["driver_python_rss_mb"] - before_app_mb
        finally:
            app.stop()
    drain = produced / drain_s
    return {"master": master, "clusters": clusters, "driver_memory": driver_memory, "partitions": partitions, "backlog_events": produced, "drain_s": drain_s,
            "drain_events_per_s": drain, **limits,
            "drain_vs_transport": drain / limits["transport_events_per_s"],
            "drain_vs_fold": drain / limits["fold_events_per_s"],
            "storm_events": storms[0][1], "storm_s": statistics.median(storm_s), "storm_max_s": max(storm_s),
            "storm_events_per_s": storms[0][1] / statistics.median(storm_s),
            "paced_storm_events_per_s": COLLECTOR_READS_PER_S,
            "paced_storm_behind_s": statistics.median(behind for behind, _ in paced),
            "paced_storm_behind_max_s": max(behind for behind, _ in paced),
            "paced_storm_batches": statistics.median(batches for _, batches in paced), "trigger_s": trigger,
            "delay_p50_s": statistics.median(delays), "delay_p99_s": percentile(delays, 0.99),
            "first_scrape_p50_s": statistics.median(scrapes), "first_scrape_max_s": max(scrapes),
            "scrape_bytes": scrape_bytes, **memory}


def _storm(app: StreamApp, boot: str, shape: Shape, zxid: Zxids, broker: int, driver_s: dict[str, list[float]],
           progress: Callable[[str], None]) -> tuple[float, int]:
    """One broker failure (healing the one before) produced while the app runs: seconds from
    the first event produced to the last one in a published exposition, and its events."""
    before, last_batch = _rows(app), _last_batch(app)
    # encoded before the clock starts: a collector encodes in its own process, and here that
    # would take the GIL from the driver's views thread, which runs in this one
    storm = list(_encoded(broker_failure(shape, zxid, broker=broker)))
    t0 = time.perf_counter()
    _produce(boot, storm)
    produced_s = time.perf_counter() - t0
    wait(lambda: _rows(app) >= before + len(storm), 3600, "storm")
    seconds = time.perf_counter() - t0   # produce + absorb: the app reads while we write
    progress(f"storm: broker {broker} fails, {len(storm)} events, produced in {produced_s:.2f} s, absorbed "
             f"after {seconds:.2f} s; its batches: {_batch_phases(app, len(storm), driver_s, last_batch)}")
    return seconds, len(storm)


def _paced_storm(app: StreamApp, boot: str, shape: Shape, zxid: Zxids, broker: int,
                 progress: Callable[[str], None]) -> tuple[float, int]:
    """One broker failure produced as the ZooKeeper collector would send it, at
    COLLECTOR_READS_PER_S: seconds from its last event produced to that event in a published
    exposition (how far the views trail the collector), and the micro-batches it took."""
    before, last_batch = _rows(app), _last_batch(app)
    storm = list(_encoded(broker_failure(shape, zxid, broker=broker)))
    p = Producer({"bootstrap.servers": boot, "linger.ms": 5})
    chunk = COLLECTOR_READS_PER_S // 20   # paced every 50 ms
    started = time.perf_counter()
    for i in range(0, len(storm), chunk):
        if (early := started + i / COLLECTOR_READS_PER_S - time.perf_counter()) > 0:
            time.sleep(early)
        for key, value in storm[i:i + chunk]:
            p.produce(TOPIC, key=key, value=value)
        p.poll(0)
    p.flush(30)
    produced = time.perf_counter()
    wait(lambda: _rows(app) >= before + len(storm), 3600, "paced storm")
    behind = time.perf_counter() - produced
    batches = len(_batches_with(app, len(storm), last_batch))
    progress(f"paced storm: broker {broker} fails, {len(storm)} events at {COLLECTOR_READS_PER_S}/s over "
             f"{produced - started:.1f} s, absorbed {behind:.2f} s after the last one, in {batches} batches")
    return behind, batches


def _memory() -> dict[str, float]:
    """Resident MB of the driver's two halves: this process (pyspark's driver side, where the
    views and the record log live) and Spark's JVM; and the executors' Python workers."""
    under = [(pid, command(pid)) for pid in descendants(os.getpid())]
    def total(match: Callable[[str], bool]) -> float:
        return sum(rss_mb(pid) for pid, cmd in under if match(cmd))
    return {"driver_python_rss_mb": rss_mb(os.getpid()),
            "spark_jvm_rss_mb": total(lambda cmd: cmd.split(" ", 1)[0].endswith("java")),
            "python_workers_rss_mb": total(lambda cmd: "pyspark.worker" in cmd)}


def _read_to_end(boot: str, n: int) -> float:
    """Seconds a plain consumer (own group, from the earliest offset, no commits) takes to read
    the ``n`` events of the topic: the most the transport gives any reader on this machine."""
    reader = TopicReader(boot, TOPIC)

    def read_all() -> bool:
        reader.poll(set())   # no keys asked about: it counts what it reads, and decodes nothing
        return reader.messages >= n
    try:
        return wait(read_all, 600, "reading the backlog", interval=0)
    finally:
        reader.close()


def _logic_limits(messages: list[tuple[str, bytes]], batch_events: int) -> dict:
    """Events/s of decode alone, and of the fold alone, single-threaded on the backlog's values.

    The fold sees what the app's executors see, without Spark: batches of ``batch_events`` in
    produce order, grouped by key, each key's record carried into its next batch as its
    state. Grouping (Spark's shuffle and sort) is done before the clock starts."""
    values = [v.decode() for _, v in messages]   # the app casts Kafka's value to a string
    started = time.perf_counter()
    for v in values:
        decode(v)
    decode_s = time.perf_counter() - started
    batches = []
    for first in range(0, len(messages), batch_events):
        keys: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
        for offset in range(first, min(first + batch_events, len(messages))):
            keys[messages[offset][0]].append((0, offset, values[offset]))
        batches.append(keys)
    state: dict[str, str | None] = {}
    started = time.perf_counter()
    for keys in batches:
        for key, rows in keys.items():
            state[key] = fold(key, state.get(key), rows)["record"]
    fold_s = time.perf_counter() - started
    return {"decode_events_per_s": len(values) / decode_s, "fold_events_per_s": len(values) / fold_s,
            "fold_calls": sum(map(len, batches))}


def _time_driver(app: StreamApp) -> dict[str, list[float]]:
    """Seconds of each batch's driver side: the sink's half (record log, history), the views'
    half on their thread (one call may present several batches) and the record-log append, by
    wrapping the methods on their instances (streaming/ stays untouched). Wrapped after
    start(): a first batch that ends before this would go untimed, and the phase summary
    would show one call fewer than batches."""
    assert app.driver is not None
    spent: dict[str, list[float]] = {"driver persist (sink)": [], "driver present (views thread)": [],
                                     "record log append": []}
    app.driver.persist = _timer(app.driver.persist, spent["driver persist (sink)"])  # type: ignore[method-assign]
    app.driver.present = _timer(app.driver.present, spent["driver present (views thread)"])  # type: ignore[method-assign]
    app.driver._log.append = _timer(app.driver._log.append, spent["record log append"])  # type: ignore[method-assign]
    return spent


def _timer(f: Callable, spent: list[float]) -> Callable:
    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)
    return timed


def _last_batch(app: StreamApp) -> int:
    recent = app._query.recentProgress
    return json.loads(recent[-1].json)["batchId"] if recent else -1


def _batches_with(app: StreamApp, rows: int, after: int) -> list[dict]:
    """The query progress of the batches with input after batch ``after``, once they hold
    ``rows`` events: a batch's progress comes after its sink (which ended the caller's wait)
    returns. Spark keeps the last 100 batches."""
    def batches() -> list[dict]:
        return [p for p in map(json.loads, (p.json for p in app._query.recentProgress))
                if p["numInputRows"] and p["batchId"] > after]
    wait(lambda: sum(p["numInputRows"] for p in batches()) >= rows, 120, "the batches' query progress", 0.5)
    return batches()


def _batch_phases(app: StreamApp, rows: int, driver_s: dict[str, list[float]], after: int = -1) -> str:
    """Where the ``rows`` events of the batches after batch ``after`` spent their time, from
    Spark's query progress and the driver timers (emptied here): a Markdown table of sum /
    median / max in ms. State-store times are summed over the shuffle partitions' tasks, which
    run in parallel."""
    drained = _batches_with(app, rows, after)
    phases: dict[str, list[float]] = defaultdict(list)
    for p in drained:
        phases["input rows"].append(p["numInputRows"])
        for k, v in p["durationMs"].items():
            phases[k].append(v)
        for op in p["stateOperators"]:
            for k in ("numRowsTotal", "numRowsUpdated", "allUpdatesTimeMs", "commitTimeMs"):
                phases[f"state {k}"].append(op[k])
            for k, v in op.get("customMetrics", {}).items():
                if k.startswith("rocksdbCommit") or k in ("rocksdbGetLatency", "rocksdbPutLatency"):
                    phases[f"state {k}"].append(v)
    for what, seconds in driver_s.items():
        phases[what] = [s * 1000 for s in seconds]
        seconds.clear()
    lines = [f"{len(drained)} batches with input; ms unless a count", "| phase | n | sum | median | max |",
             "|---|---|---|---|---|"]
    lines += [f"| {k} | {len(v)} | {sum(v):.0f} | {statistics.median(v):.0f} | {max(v):.0f} |"
              for k, v in sorted(phases.items()) if v]
    return "\n".join(lines)


def _delays(app: StreamApp, boot: str, samples: int, zxid: Zxids) -> tuple[list[float], list[float], int]:
    """One ISR flip at a time: produce, wait until the published exposition has it (polled every
    50 ms), then scrape /metrics once. Returns both delays, the scrape times and the last
    scrape's size."""
    p = Producer({"bootstrap.servers": boot, "linger.ms": 0})
    delays, scrapes = [], []
    for i in range(samples):
        z = zxid()
        sent = time.time()
        isr = (1, 2, 3) if i % 2 else (1, 2)
        e = Event(cluster="bench", source="zk", kind="partition", entity=entity_key("partition", Shape.topic(0), 0),
                  op="upsert", observed_ms=int(sent * 1000),
                  data=PartitionState(Shape.topic(0), 0, 1, 5, isr, 1), zxid=z, znode=ZnodeMeta("/x", z, 0, 0))
        p.produce(TOPIC, key=e.message_key, value=encode(e))
        p.flush(10)
        wait(lambda: app.holder.get().stats.last_event_ms.get(("bench", "zk"), 0) >= e.observed_ms, 120, "delay sample")
        delays.append(time.time() - sent)
        started = time.perf_counter()
        body = urllib.request.urlopen(f"http://127.0.0.1:{app.metrics_port}/metrics", timeout=120).read()
        scrapes.append(time.perf_counter() - started)
        time.sleep(0.2)
    return delays, scrapes, len(body)
