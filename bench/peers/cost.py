"""What each system costs at a cluster size: series, scrape bytes and time, CPU, memory.

kmon is its three processes (both collectors, the stream app with its Spark JVM and Python
workers). The JMX exporter lives inside each broker's JVM, so its CPU is measured per scrape:
the brokers' CPU while the bench scrapes every agent back to back, less their CPU over as
long a time without those scrapes; its memory cannot be told apart from the broker's.
Burrow exports no Prometheus metrics (1.2.1): only its CPU and memory.
"""
from __future__ import annotations

import statistics
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from bench.support.measure import tree_cpu_seconds, tree_rss_mb
from bench.peers.faults import Ctx, wait
from bench.peers.parts import JMX_JOB, PEER_SCRAPE, PEER_SCRAPE_S, prom_value
from bench.peers.watch import BURROW, JMX, KLAG, KMON

PER_TOPIC = 50
SCRAPES = 3
WINDOW_S = 60.0


@dataclass(frozen=True)
class Body:
    series: int
    bytes: int
    seconds: float


def scrape(url: str) -> Body:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
    seconds = time.perf_counter() - started
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return Body(series, len(body), seconds)


def scrape_all(urls: list[str]) -> Body:
    """One scrape of every target, SCRAPES times: summed series and bytes, median summed seconds."""
    rounds = [[scrape(u) for u in urls] for _ in range(SCRAPES)]
    last = rounds[-1]
    return Body(sum(b.series for b in last), sum(b.bytes for b in last),
                statistics.median(sum(b.seconds for b in r) for r in rounds))


def grow(ctx: Ctx, partitions: int, progress: Callable[[str], None]) -> int:
    """Topics of PER_TOPIC partitions (RF 3) until the size topics hold ``partitions``; returns the
    cluster's partitions in all. Ten topics a request: a loaded controller answers a bigger one
    after the client gave up, and then the bench checks what exists instead of failing."""
    def existing() -> set[str]:
        return {t for t in ctx.admin.list_topics(timeout=60).topics if t.startswith("peers-size-")}
    names = [f"peers-size-{i:04d}" for i in range(partitions // PER_TOPIC)]
    missing = [n for n in names if n not in existing()]   # the smaller sizes' topics stay
    for i in range(0, len(missing), 10):
        batch = missing[i:i + 10]
        for f in ctx.admin.create_topics([NewTopic(n, PER_TOPIC, 3) for n in batch],
                                         request_timeout=300, operation_timeout=300).values():
            try:
                f.result(320)
            except KafkaException as e:
                if e.args[0].code() not in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
                                            KafkaError.TOPIC_ALREADY_EXISTS):
                    raise
        wait(lambda: set(batch) <= existing(), 600, f"topics {batch[0]}.. created", interval=5)
        if (i // 10) % 10 == 9 or i + 10 >= len(missing):
            progress(f"  {(len(names) - len(missing) + min(len(missing), i + 10)) * PER_TOPIC} partitions created")

    def led() -> bool:
        md = ctx.admin.list_topics(timeout=60)
        return all(p.leader >= 0 for t in md.topics.values() for p in t.partitions.values())
    wait(led, 1800, f"{partitions} partitions led", interval=5)
    return sum(len(t.partitions) for t in ctx.admin.list_topics(timeout=60).topics.values())


def measure(ctx: Ctx, prometheus: str, kmon_urls: list[str], agent_urls: list[str], pids: dict[str, list[int]],
            kmon_partitions: Callable[[], float], partitions: int) -> list[dict]:
    """One row per system at the cluster's present size (``partitions``); Burrow's where ``pids`` has it."""
    wait(lambda: kmon_partitions() >= partitions, 600, f"kmon showing {partitions} partitions", interval=2)
    time.sleep(2 * WINDOW_S / 3)   # Prometheus' view of the scrapes at this size
    k, j = scrape_all(kmon_urls), scrape_all(agent_urls)
    # CPU and memory over a window in which only Prometheus scrapes
    cpu0 = {s: sum(tree_cpu_seconds(p) for p in ps) for s, ps in pids.items()}
    time.sleep(WINDOW_S)
    cores = {s: (sum(tree_cpu_seconds(p) for p in ps) - cpu0[s]) / WINDOW_S for s, ps in pids.items()}
    rss = {s: sum(tree_rss_mb(p) for p in ps) for s, ps in pids.items()}
    # the agents' own CPU: the brokers' CPU during back-to-back scrapes beyond their rate above
    started, before = time.perf_counter(), sum(tree_cpu_seconds(p) for p in pids["brokers"])
    scrape_all(agent_urls)
    spent = time.perf_counter() - started
    per_scrape = max(0.0, sum(tree_cpu_seconds(p) for p in pids["brokers"]) - before - cores["brokers"] * spent) / SCRAPES
    prom_jmx = {"up_min_1m": prom_value(prometheus, f'min(min_over_time(up{{job="{JMX_JOB}"}}[1m]))'),
                "prom_scrape_s": prom_value(prometheus, f'max(avg_over_time(scrape_duration_seconds{{job="{JMX_JOB}"}}[1m]))')}
    prom_kmon = {"up_min_1m": prom_value(prometheus, 'min(min_over_time(up{job=~"kmon-.*"}[1m]))'),
                 "prom_scrape_s": prom_value(prometheus, 'max(avg_over_time(scrape_duration_seconds{job=~"kmon-.*"}[1m]))')}
    rows = [
        {"partitions": partitions, "system": KMON, "series": k.series, "scrape_bytes": k.bytes, "scrape_s": k.seconds,
         **prom_kmon, "cpu_cores": cores[KMON], "rss_mb": rss[KMON],
         "note": "collectors + stream app (driver, Spark JVM, Python workers)"},
        {"partitions": partitions, "system": JMX, "series": j.series, "scrape_bytes": j.bytes, "scrape_s": j.seconds,
         **prom_jmx, "cpu_cores": per_scrape / PEER_SCRAPE_S, "rss_mb": rss["brokers"],
         "note": f"3 agents; CPU: {per_scrape:.2f} CPU-s per scrape of all agents, at one scrape per {PEER_SCRAPE}; "
                 "RSS: the brokers' JVMs with their agents"},
    ]
    if BURROW in pids:   # not on a KRaft cluster
        rows.append({"partitions": partitions, "system": BURROW, "series": None, "scrape_bytes": None,
                     "scrape_s": None, "up_min_1m": None, "prom_scrape_s": None, "cpu_cores": cores[BURROW],
                     "rss_mb": rss[BURROW], "note": "no Prometheus endpoint in 1.2.1"})
    if KLAG in pids:
        rows.append({"partitions": partitions, "system": KLAG,
                     "series": prom_value(prometheus, 'sum(scrape_samples_scraped{job=~"klag.*"})'),
                     "scrape_bytes": None, "scrape_s": None,
                     "up_min_1m": prom_value(prometheus, 'min(min_over_time(up{job=~"klag.*"}[1m]))'),
                     "prom_scrape_s": prom_value(prometheus, 'max(avg_over_time(scrape_duration_seconds{job=~"klag.*"}[1m]))'),
                     "cpu_cores": cores[KLAG], "rss_mb": rss[KLAG], "note": "its two instances (message and rate mode)"})
    return rows
