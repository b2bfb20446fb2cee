"""The consumer-group collector with 1k / 10k groups, beside Kafka's own kafka-consumer-groups.

Per size: N groups commit offsets on one 12-partition topic (Empty groups, as after their
consumers stopped: the Admin API describes them all the same), then `kmon collect groups`
runs as its own process. Measured: start -> every group on the events topic, then a steady
window of poll cycles (cycle time from its gauge, Admin API calls per cycle, events/s, CPU
per cycle, RSS). The peer, `kafka-consumer-groups --describe --all-groups` (what an on-call
engineer runs), does the same Admin API work once: wall time and peak RSS of the JVM.
"""
from __future__ import annotations

import contextlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.support.harness import TopicReader, check_alive, kmon_argv, local_stack, process
from bench.support.measure import cpu_seconds, metric_count, metric_sum, rss_mb, tree_cpu_seconds, tree_rss_mb, wait
from kmon.events import entity_key
from kmon.toolchain import Toolchain
from stack.process import free_port

CLUSTER = "bench"
TOPIC, PARTITIONS, MESSAGES = "bench-orders", 12, 12_000
POLL_INTERVAL, LAG_INTERVAL, CYCLES = 10.0, 30.0, 6   # the window holds two lag emissions


def group_name(i: int) -> str:
    return f"bench-group-{i:05d}"


def make_groups(admin: AdminClient, first: int, end: int, progress: Callable[[str], None]) -> None:
    """Groups ``first`` .. ``end - 1``, each with a committed offset on every partition (lag between 0 and the end)."""
    rng = random.Random(first)
    names = [group_name(i) for i in range(first, end)]
    for i in range(0, len(names), 500):
        futures = [f for g in names[i:i + 500] for f in admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g, [TopicPartition(TOPIC, p, rng.randrange(MESSAGES // PARTITIONS))
                                              for p in range(PARTITIONS)])]).values()]
        for f in futures:
            f.result(60)
        if (i // 500) % 4 == 3 or i + 500 >= len(names):
            progress(f"  {first + min(len(names), i + 500)} groups committed")


def kmon_side(boot: str, n: int, workdir: Path, progress: Callable[[str], None]) -> dict:
    topic, port = f"kmon-bench-groups-{n}-{uuid.uuid4().hex[:6]}", free_port()
    argv = kmon_argv("collect", "groups", "--bootstrap-servers", boot, "--cluster", CLUSTER,
                     "--events-bootstrap-servers", boot, "--events-topic", topic, "--metrics-port", str(port),
                     "--poll-interval", str(POLL_INTERVAL), "--lag-interval", str(LAG_INTERVAL))
    keys = {f"{CLUSTER}/{entity_key('group', group_name(i))}".encode() for i in range(n)}
    seen: set[bytes] = set()
    with contextlib.closing(TopicReader(boot, topic)) as reader:
        started = time.perf_counter()
        with process(argv, workdir / f"{topic}.log", "collect") as proc:
            def all_seen() -> bool:
                check_alive(proc, "kmon collect groups")
                seen.update(reader.poll(keys))
                return len(seen) >= n
            wait(all_seen, 900, f"all {n} groups on the topic")
            first_s = time.perf_counter() - started
            first_events = reader.messages
            progress(f"  kmon: every group on the topic after {first_s:.1f}s; "
                     f"{CYCLES} poll cycles of {POLL_INTERVAL:g}s")

            def totals() -> tuple[float, float, float, float]:
                return (metric_sum(port, "kmon_collector_admin_calls_total", call="list_consumer_groups"),
                        metric_sum(port, "kmon_collector_admin_calls_total"),
                        metric_sum(port, "kmon_collector_events_total"), tree_cpu_seconds(proc.pid))

            def next_cycle_end(previous: float) -> float:
                wait(lambda: metric_sum(port, "kmon_collector_poll_duration_seconds") != previous, 300,
                     "a poll cycle's end", 0.1)
                return metric_sum(port, "kmon_collector_poll_duration_seconds")
            durations = [next_cycle_end(metric_sum(port, "kmon_collector_poll_duration_seconds"))]
            lists0, calls0, events0, cpu0 = totals()   # from one cycle's end to another's
            t0 = time.perf_counter()
            for _ in range(CYCLES):
                durations.append(next_cycle_end(durations[-1]))
            lists, calls, events, cpu = totals()
            window = time.perf_counter() - t0
            rss, peak = tree_rss_mb(proc.pid), tree_rss_mb(proc.pid, "VmHWM")
    cycles = lists - lists0
    return {"first_picture_s": first_s, "first_events_per_s": first_events / first_s,
            "poll_cycle_s": statistics.median(durations[1:]), "poll_cycle_max_s": max(durations[1:]),
            "admin_calls_per_cycle": (calls - calls0) / cycles, "events_per_s": (events - events0) / window,
            "cpu_s_per_cycle": (cpu - cpu0) / cycles, "rss_mb": rss, "peak_rss_mb": peak}


def peer_side(tools: Toolchain, boot: str, n: int) -> dict:
    """kafka-consumer-groups --describe --all-groups: one full Admin API pass, as the CLI does it."""
    argv = [tools.java, "-Xmx1g", "-cp", tools.kafka_classpath, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server", boot, "--describe", "--all-groups", "--timeout", "600000"]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode(errors="replace")
    rows = sum(1 for line in text.splitlines() if line.startswith("bench-group-"))
    if p.returncode != 0 or rows < n * PARTITIONS:
        raise RuntimeError(f"kafka-consumer-groups exited {p.returncode} with {rows} rows of "
                           f"{n * PARTITIONS}: {text[-2000:]}")
    return {"peer_describe_all_s": wall, "peer_cpu_s": usage.ru_utime + usage.ru_stime,
            "peer_peak_rss_mb": usage.ru_maxrss / 1024}


# kafka-python 2.1 moved the protocol modules the exporter imports
PEER_EXPORTER = ("prometheus-kafka-consumer-group-exporter==0.5.5", "kafka-python==2.0.2")


def peer_exporter(tools: Toolchain, progress: Callable[[str], None]) -> Path:
    """A Python peer exporter from PyPI (reads __consumer_offsets), in its own venv in the cache.
    The Go exporters (kafka_exporter, Burrow, kminion) are refused by the Go module proxy here."""
    venv = tools.cache / "peers" / "consumer-group-exporter"
    exe = venv / "bin" / "prometheus-kafka-consumer-group-exporter"
    if not exe.exists():
        progress(f"installing the peer exporter {' '.join(PEER_EXPORTER)} into {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *PEER_EXPORTER],
                       check=True)
    return exe


def exporter_side(exe: Path, boot: str, n: int, workdir: Path) -> dict:
    """The peer exporter from its start: until its /metrics has the lag of every group and partition,
    then one window as long as kmon's (CPU, RSS)."""
    port, started = free_port(), time.perf_counter()
    argv = [str(exe), "-b", boot, "-p", str(port), "--from-start", "--high-water-interval", str(POLL_INTERVAL)]
    with process(argv, workdir / f"peer-exporter-{n}.log", "consumer-group-exporter") as proc:
        def complete() -> bool:
            check_alive(proc, "the peer exporter")
            try:
                return metric_count(port, "kafka_consumer_group_lag") >= n * PARTITIONS
            except OSError:   # not serving yet
                return False
        wait(complete, 900, f"the peer exporter's lag for {n} groups", 0.25)
        first_s = time.perf_counter() - started
        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        time.sleep(CYCLES * POLL_INTERVAL)
        cpu_per_interval = (cpu_seconds(proc.pid) - cpu0) / ((time.perf_counter() - t0) / POLL_INTERVAL)
        scrape_started = time.perf_counter()
        metric_count(port, "kafka_consumer_group_lag")
        return {"exporter_first_picture_s": first_s, "exporter_cpu_s_per_10s": cpu_per_interval,
                "exporter_scrape_s": time.perf_counter() - scrape_started, "exporter_rss_mb": rss_mb(proc.pid)}


def run(sizes: list[int], progress: Callable[[str], None]) -> list[dict]:
    """Sizes in ascending order on one 1-broker stack; each size adds groups to the previous ones."""
    rows = []
    with local_stack() as stack:
        assert stack.state
        boot = stack.state.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": boot})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": boot, "linger.ms": 20})
        for i in range(MESSAGES):
            producer.produce(TOPIC, value=b"x" * 100, partition=i % PARTITIONS)
            producer.poll(0)
        producer.flush(60)
        exporter = peer_exporter(stack.tools, progress)
        made = 0
        for n in sorted(sizes):
            progress(f"{n} groups: committing offsets")
            make_groups(admin, made, n, progress)
            made = n
            progress("  kafka-consumer-groups --describe --all-groups")
            peer = peer_side(stack.tools, boot, n)
            ours = kmon_side(boot, n, stack.dir, progress)
            progress("  the peer exporter")
            rows.append({"groups": n, **ours, **peer, **exporter_side(exporter, boot, n, stack.dir)})
    return rows
