"""A KRaft metadata log followed from the collector's start to the whole picture on /metrics.

The synthetic metadata log of bench.kraft (a healthy :class:`bench.synthetic.Shape` cluster, then
broker 1's failure: its fencing and a PartitionChangeRecord for each partition it held) is read by
the KRaft collector's own code in a process of its own, as `kmon collect` runs: its fetches are
answered from memory (no controller at that size on this machine), its events go through kmon's
real publisher to a real events topic, and a stream app (already running, idle) folds them into its
views. The clock starts when the collector starts and stops when the published exposition has every
event it sent; then /metrics is scraped and checked: every partition there, the failed broker's
partitions under-replicated.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import statistics
import time
import urllib.request
from typing import Callable

from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from bench.support.harness import local_stack
from bench.support.measure import wait
from bench.synthetic import Shape
from streaming.app import StreamApp
from streaming.config import StreamConfig
from streaming.gc_tuning import release_freed_memory

TOPIC = "kmon-bench-events"
SCRAPES = 5


def run(partitions: int, driver_memory: str, progress: Callable[[str], None]) -> dict:
    from bench import stream   # its memory and progress helpers
    with local_stack() as stack:
        assert stack.state
        boot = stack.state.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": boot})
        admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
        cfg = StreamConfig(bootstrap_servers=boot, events_topic=TOPIC, checkpoint=stack.dir.parent / "checkpoint",
                           metrics_host="127.0.0.1", metrics_port=0, driver_memory=driver_memory,
                           spark_jars=tuple(stack.tools.spark_jar_list()))
        ctx = multiprocessing.get_context("spawn")   # a process of its own, as `kmon collect` is; no fork of a JVM's client
        ready, go, results = ctx.Event(), ctx.Event(), ctx.Queue()
        collector = ctx.Process(target=_collect, args=(partitions, boot, ready, go, results), daemon=True)
        collector.start()
        try:
            progress(f"{partitions} partitions: the collector encodes its metadata log (not timed); the app starts")
            gc.collect()
            release_freed_memory()
            before_app_mb = stream.rss_mb(os.getpid())
            app = StreamApp(cfg)
            app.start()
            try:
                wait(lambda: stream._last_batch(app) >= 0 or app.failure() is not None, 600, "the app's first batch")
                wait(lambda: ready.is_set() or not collector.is_alive(), 3600, "the collector's log")
                if not collector.is_alive():
                    raise RuntimeError(f"the collector's process exited ({collector.exitcode})")
                progress("the collector starts: from offset 0 to the whole picture on /metrics")
                go.set()
                done: dict = {}

                def caught_up() -> bool:
                    if not done:
                        try:
                            done.update(results.get_nowait())
                        except queue.Empty:
                            if not collector.is_alive():
                                raise RuntimeError(f"the collector's process exited ({collector.exitcode})")
                            return False
                        progress(f"the collector published {done['events']} events in {done['wall_s']:.1f} s "
                                 f"({done['cpu_s']:.1f} CPU-s)")
                    return stream._rows(app) >= done["events"]
                picture_s = wait(caught_up, 3600, "the whole picture", interval=0.2)
                progress(f"the whole picture after {picture_s:.1f} s; scraping /metrics {SCRAPES} times")
                scrapes, body = _scrapes(app.metrics_port)
                got = _cluster_figures(body)
                memory = stream._memory()
            finally:
                app.stop()
        finally:
            collector.join(30)
            if collector.is_alive():
                collector.kill()
    want = _expected(Shape(partitions=partitions, cluster="bench"))
    if got != want:
        raise RuntimeError(f"/metrics does not show the whole picture: {got} against {want}")
    return {"partitions": partitions, "records": done["records"], "events": done["events"],
            "driver_memory": driver_memory, "picture_s": picture_s, "collector_wall_s": done["wall_s"],
            "collector_cpu_s": done["cpu_s"], "collector_records_per_cpu_s": done["records"] / done["cpu_s"],
            "scrape_p50_s": statistics.median(scrapes), "scrape_max_s": max(scrapes), "scrape_mb": len(body) / 1e6,
            **memory, "driver_python_app_mb": memory["driver_python_rss_mb"] - before_app_mb}


def _collect(partitions: int, boot: str, ready, go, results) -> None:
    """The collector's process: the log made, then (on ``go``) read from offset 0 and published."""
    from bench import kraft
    from collectors.publisher import Publisher, PublisherConfig
    from collectors.telemetry import Telemetry
    from kmon.gc_tuning import collect_less_often

    log = kraft.metadata_log(Shape(partitions=partitions, cluster=kraft.CLUSTER))
    chunks = kraft.fetches(log, kraft.KraftCollectorConfig(controllers=(("memory", 0),), cluster=kraft.CLUSTER).max_bytes)
    publisher = _Counted(Publisher(PublisherConfig(boot, topic=TOPIC), Telemetry(kraft.CLUSTER)))
    publisher.start()
    collect_less_often()   # as `kmon collect` does
    gc.collect()
    ready.set()
    go.wait()
    wall, cpu = time.perf_counter(), time.process_time()
    kraft.kraft_log(log, chunks, publisher)   # type: ignore[arg-type]
    left = publisher.flush(600)
    results.put({"records": log.records, "events": publisher.events, "left": left,
                 "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu})
    publisher.close()


class _Counted:
    """The publisher, counting the messages it was given: a delete's tombstone is a row the app reads too."""

    def __init__(self, publisher) -> None:
        self.publisher, self.events = publisher, 0
        self.start, self.flush, self.close = publisher.start, publisher.flush, publisher.close

    def publish(self, event) -> None:
        self.publisher.publish(event)
        self.events += 1 + (event.op == "delete")


def _scrapes(port: int) -> tuple[list[float], bytes]:
    times, body = [], b""
    for _ in range(SCRAPES):
        started = time.perf_counter()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120).read()
        times.append(time.perf_counter() - started)
    return times, body


_CHECKED = ("kmon_partitions", "kmon_under_replicated_partitions", "kmon_offline_partitions")


def _cluster_figures(body: bytes) -> dict[str, float]:
    """The checked families' sums for the bench's cluster."""
    sums = dict.fromkeys(_CHECKED, 0.0)
    for family in text_string_to_metric_families(body.decode()):
        if family.name in sums:
            sums[family.name] += sum(s.value for s in family.samples if s.labels.get("cluster") == "bench")
    return sums


def _expected(shape: Shape) -> dict[str, float]:
    from bench.kraft import FAILED
    held = sum(FAILED in shape.replicas(t, p) for t in range(shape.topics) for p in range(shape.partitions_per_topic))
    return {"kmon_partitions": float(shape.partitions), "kmon_under_replicated_partitions": float(held),
            "kmon_offline_partitions": 0.0}
