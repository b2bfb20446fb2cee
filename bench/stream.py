"""The Spark app on a real broker: backlog drain, storm absorption, event -> export delay."""
from __future__ import annotations

import statistics
import time
import urllib.request
from typing import Callable, Iterable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import local_stack
from bench.measure import percentile, wait
from bench.synthetic import Shape, Zxids, broker_failure, healthy
from kmon.events import PartitionState, encode, entity_key
from streaming.app import StreamApp, StreamConfig

TOPIC = "kmon-bench-events"


def _produce(bootstrap: str, events: Iterable) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    n = 0
    for e in events:
        while True:
            try:
                p.produce(TOPIC, key=e.message_key, value=encode(e))
                break
            except BufferError:
                p.poll(0.1)
        n += 1
    p.flush(120)
    return n


def _rows(app: StreamApp) -> int:
    return sum(app.holder.get().stats.input_rows.values())


def run(partitions: int, backlog: int, delay_samples: int, trigger: float, progress: Callable[[str], None]) -> dict:
    with local_stack() as stack:
        assert stack.state
        boot = stack.state.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": boot})  # kept alive until the future resolves
        admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
        shape, zxid = Shape(partitions=partitions), Zxids()
        progress(f"producing a backlog: {partitions} partitions, then broker failures up to {backlog} events")

        def backlog_events():
            n = 0
            for e in healthy(shape, zxid):
                n += 1
                yield e
            broker = 1
            while n < backlog:
                for e in broker_failure(shape, zxid, broker % shape.brokers + 1):
                    n += 1
                    yield e
                    if n >= backlog:
                        return
                broker += 1
        produced = _produce(boot, backlog_events())
        app = StreamApp(StreamConfig(bootstrap_servers=boot, events_topic=TOPIC,
                                     checkpoint=stack.dir.parent / "checkpoint", metrics_host="127.0.0.1",
                                     metrics_port=0, master="local[2]", trigger_seconds=trigger,
                                     shuffle_partitions=4, spark_jars=tuple(stack.tools.spark_jar_list())))
        app.start()
        try:
            progress(f"draining {produced} events")
            drain_s = wait(lambda: _rows(app) >= produced, 3600, "backlog drain")
            before = _rows(app)
            storm = list(broker_failure(shape, zxid, broker=shape.brokers))
            progress(f"storm: {len(storm)} events (broker failure in {partitions} partitions)")
            t0 = time.perf_counter()
            _produce(boot, storm)
            wait(lambda: _rows(app) >= before + len(storm), 3600, "storm")
            storm_s = time.perf_counter() - t0  # produce + absorb: the app reads while we write
            progress(f"event -> export delay, {delay_samples} samples")
            delays, scrapes = _delays(app, boot, delay_samples, zxid)
        finally:
            app.stop()
    return {"partitions": partitions, "backlog_events": produced, "drain_s": drain_s,
            "drain_events_per_s": produced / drain_s, "storm_events": len(storm), "storm_s": storm_s,
            "storm_events_per_s": len(storm) / storm_s, "trigger_s": trigger,
            "delay_p50_s": statistics.median(delays), "delay_p99_s": percentile(delays, 0.99),
            "first_scrape_p50_s": statistics.median(scrapes), "first_scrape_max_s": max(scrapes)}


def _delays(app: StreamApp, boot: str, samples: int, zxid: Zxids) -> tuple[list[float], list[float]]:
    """One ISR flip at a time: produce, wait until the published snapshot has it, then scrape
    /metrics once (that scrape builds the views). Returns both delays and the scrape times."""
    from kmon.events import Event, ZnodeMeta
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
        urllib.request.urlopen(f"http://127.0.0.1:{app.metrics_port}/metrics", timeout=120).read()
        scrapes.append(time.perf_counter() - started)
        time.sleep(0.2)
    return delays, scrapes
