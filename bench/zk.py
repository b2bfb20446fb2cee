"""The ZooKeeper collector on synthetic Kafka trees written into a real ZooKeeper.

Per size: write the tree (Kafka's own znode formats) under its own chroot, measure the raw
pipelined read rate of a kazoo client on it (the practical limit of any ZooKeeper reader),
then start `kmon collect zk` as its own process and time start -> snapshot_end on the
events topic, then flip ISRs one at a time and time each znode write -> its event on the
topic. ZooKeeper reads come from the collector's /metrics, memory from /proc.
"""
from __future__ import annotations

import contextlib
import json
import random
import re
import statistics
import time
import uuid
from typing import Callable, Iterable

from kazoo.client import KazooClient

from bench.support.harness import TopicReader, kmon_argv, local_stack, process
from bench.support.measure import metric_sum, percentile, rss_mb, wait
from bench.synthetic import Shape
from collectors.zk.collector import READ_CHUNK
from collectors.zk.znodes import ZkPaths
from kmon.events import entity_key
from stack.local import LocalStack
from stack.process import free_port

CLUSTER = "bench"


def _state(leader: int, isr: Iterable[int], leader_epoch: int = 0) -> bytes:
    return json.dumps({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": leader_epoch,
                       "isr": list(isr)}).encode()


def _tree(shape: Shape, paths: ZkPaths) -> list[list[tuple[str, bytes]]]:
    """The znodes of a healthy cluster, in waves: every parent is in an earlier wave than its children."""
    fixed = [(paths.chroot + "/brokers", b""), (paths.broker_ids, b""), (paths.topics, b""),
             (paths.chroot + "/config", b""), (paths.config_topics, b""), (paths.chroot + "/admin", b""),
             (paths.delete_topics, b""), (paths.isr_change_notification, b"")]
    brokers = [(paths.broker(b), json.dumps({
        "version": 5, "host": "127.0.0.1", "port": 9000 + b, "jmx_port": -1, "timestamp": "1700000000000",
        "endpoints": [f"PLAINTEXT://127.0.0.1:{9000 + b}"], "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}}).encode()) for b in range(1, shape.brokers + 1)]
    controller = [(paths.controller, json.dumps({"version": 2, "brokerid": 1, "timestamp": "1700000000000",
                                                 "kraftControllerEpoch": -1}).encode()),
                  (paths.controller_epoch, b"1")]
    names = [shape.topic(t) for t in range(shape.topics)]
    ppt = range(shape.partitions_per_topic)
    topics = [(paths.topic(n), json.dumps({
        "version": 3, "topic_id": uuid.uuid4().hex[:22], "adding_replicas": {}, "removing_replicas": {},
        "partitions": {str(p): list(shape.replicas(t, p)) for p in ppt}}).encode()) for t, n in enumerate(names)]
    configs = [(paths.topic_config(n), b'{"version":1,"config":{"min.insync.replicas":"2"}}') for n in names]
    partitions_dirs = [(paths.topic(n) + "/partitions", b"") for n in names]
    partition_dirs = [(paths.topic(n) + f"/partitions/{p}", b"") for n in names for p in ppt]
    states = [(paths.partition_state(n, p), _state(shape.replicas(t, p)[0], shape.replicas(t, p)))
              for t, n in enumerate(names) for p in ppt]
    return [fixed, brokers + controller + topics + configs, partitions_dirs, partition_dirs, states]


def write_tree(client: KazooClient, shape: Shape, paths: ZkPaths, progress: Callable[[str], None]) -> int:
    """Create the tree under its (new) chroot with pipelined creates; returns the number of znodes."""
    client.ensure_path(paths.chroot or "/")
    n = 1   # the chroot
    for wave in _tree(shape, paths):
        for i in range(0, len(wave), 5000):
            for result in [client.create_async(path, data) for path, data in wave[i:i + 5000]]:
                result.get()
            n += len(wave[i:i + 5000])
        progress(f"  {n} znodes written")
    return n


def raw_read_rate(hosts: str, paths: list[str]) -> float:
    """Reads/s of one kazoo client getting ``paths`` pipelined in the collector's chunk size."""
    client = KazooClient(hosts=hosts)
    client.start(30)
    try:
        started = time.perf_counter()
        for i in range(0, len(paths), READ_CHUNK):
            for result in [client.get_async(p) for p in paths[i:i + READ_CHUNK]]:
                result.get()
        return len(paths) / (time.perf_counter() - started)
    finally:
        client.stop()
        client.close()


def run_size(stack: LocalStack, partitions: int, samples: int, progress: Callable[[str], None]) -> dict:
    assert stack.state
    shape, paths = Shape(partitions=partitions, cluster=CLUSTER), ZkPaths(f"/bench-{partitions}")
    hosts = stack.state.zk_address
    with stack.zk() as client:
        progress(f"{partitions} partitions: writing the tree under {paths.chroot}")
        t0 = time.perf_counter()
        znodes = write_tree(client, shape, paths, progress)
        write_s = time.perf_counter() - t0
        state_paths = [paths.partition_state(shape.topic(t), p)
                       for t in range(shape.topics) for p in range(shape.partitions_per_topic)]
        progress(f"  raw read rate over {len(state_paths)} partition states")
        raw = raw_read_rate(hosts, state_paths)

        topic, port = f"kmon-bench-zk-{partitions}-{uuid.uuid4().hex[:6]}", free_port()
        argv = kmon_argv("collect", "zk", "--zookeeper", hosts + paths.chroot, "--cluster", CLUSTER,
                         "--events-bootstrap-servers", stack.state.bootstrap_servers, "--events-topic", topic,
                         "--metrics-port", str(port), "--buffer-size", str(2 * znodes))
        with contextlib.closing(TopicReader(stack.state.bootstrap_servers, topic)) as reader:
            progress("  starting the collector")
            started = time.perf_counter()
            with process(argv, stack.dir / f"{topic}.log", "collect") as proc:
                end_key = f"{CLUSTER}/{entity_key('snapshot_end', 'zk')}".encode()
                # snapshot_begin and snapshot_end share their key (snapshot:zk)
                wait(lambda: getattr(reader.poll({end_key}).get(end_key), "kind", None) == "snapshot_end", 1800,
                     "snapshot_end on the events topic", 0.01)
                snapshot_s = time.perf_counter() - started
                snapshot_events = reader.messages
                snapshot_reads = metric_sum(port, "kmon_collector_zk_reads_total")
                progress(f"  snapshot on the topic after {snapshot_s:.1f}s: {snapshot_events} events, "
                         f"{snapshot_reads:.0f} reads; {samples} ISR flips, one at a time")
                delays = _delays(client, reader, shape, paths, samples)
                reads = metric_sum(port, "kmon_collector_zk_reads_total") - snapshot_reads
                rss_steady, rss_peak = rss_mb(proc.pid), rss_mb(proc.pid, "VmHWM")
    # the collector's own account of the snapshot: reads and events only, without its start-up
    own = re.search(r"snapshot \(start\):.* ([0-9.]+)s$", proc.log.read_text(), re.M)
    return {"partitions": partitions, "znodes": znodes, "write_znodes_per_s": znodes / write_s,
            "raw_reads_per_s": raw, "start_to_snapshot_end_s": snapshot_s, "snapshot_events": snapshot_events,
            "snapshot_reads": int(snapshot_reads), "collector_snapshot_s": float(own.group(1)) if own else float("nan"),
            "snapshot_reads_per_s": snapshot_reads / float(own.group(1)) if own else float("nan"),
            "delay_p50_ms": 1000 * statistics.median(delays), "delay_p99_ms": 1000 * percentile(delays, 0.99),
            "reads_per_change": reads / samples, "rss_mb": rss_steady, "peak_rss_mb": rss_peak}


def _delays(client: KazooClient, reader: TopicReader, shape: Shape, paths: ZkPaths, samples: int) -> list[float]:
    """Flip one random partition's ISR (drop its last replica, or restore it), time write -> event."""
    rng = random.Random(7)
    shrunk: set[tuple[int, int]] = set()
    out = []
    for _ in range(samples):
        t, p = rng.randrange(shape.topics), rng.randrange(shape.partitions_per_topic)
        name, replicas = shape.topic(t), shape.replicas(t, p)
        isr = replicas if (t, p) in shrunk else replicas[:-1]
        shrunk ^= {(t, p)}
        key = f"{CLUSTER}/{entity_key('partition', name, p)}".encode()
        sent = time.perf_counter()
        stat = client.set(paths.partition_state(name, p), _state(replicas[0], isr))

        def arrived() -> bool:
            event = reader.poll({key}).get(key)
            return event is not None and (event.zxid or 0) >= stat.mzxid
        wait(arrived, 60, f"the event of {name}-{p}", 0.001)
        out.append(time.perf_counter() - sent)
    return out


def run(sizes: list[int], samples: int, progress: Callable[[str], None]) -> list[dict]:
    """Every size on one stack (1 broker for the events topic); each tree under its own chroot."""
    with local_stack() as stack:
        return [run_size(stack, n, samples, progress) for n in sizes]
