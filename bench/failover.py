"""Broker death -> the views show it, while the dead broker led partitions of the events topic.

Two `kmon stream` apps read the same events topic side by side, one with Kafka's default
API timeout for Spark's Kafka source (60 s), one with kmon's (10 s). Each round SIGKILLs
the broker leading most events-topic partitions and times, from the kill, the broker's
delete event on the topic (the ZooKeeper session timeout, 6 s here) and each app's
/metrics showing one broker fewer; then restarts the broker and waits for both apps to
show it back.
"""
from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

from confluent_kafka.admin import AdminClient

from bench.harness import TopicReader, check_alive, kmon_argv, local_stack, process
from bench.measure import metric_sum, percentile, wait
from kmon.events import entity_key
from kmon.stack.local import LocalStack
from kmon.stack.process import Spawned, free_port

CLUSTER = "bench-failover"
TOPIC = "kmon-events"
BROKERS = 3
TIMEOUTS_S = (60.0, 10.0)   # Kafka's default.api.timeout.ms, kmon stream's --kafka-timeout


@dataclass(frozen=True)
class Round:
    event_s: float               # kill -> the broker's delete event on the topic (nan if not seen)
    shown_s: dict[float, float]  # Kafka timeout -> kill -> that app's /metrics showing the death

    def __str__(self) -> str:
        return f"event {self.event_s:.1f} s, " + ", ".join(f"{t:g} s app {s:.1f} s" for t, s in self.shown_s.items())


def _brokers_shown(port: int) -> float:
    try:
        return metric_sum(port, "kmon_brokers", cluster=CLUSTER)
    except OSError:   # the app is still starting
        return -1


def _busiest_leader(admin: AdminClient) -> int:
    """The broker leading most partitions of the events topic."""
    partitions = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.values()
    return Counter(p.leader for p in partitions if p.leader >= 0).most_common(1)[0][0]


@contextlib.contextmanager
def _apps(stack: LocalStack, progress: Callable[[str], None]) -> Iterator[dict[float, tuple[Spawned, int]]]:
    """The two stream apps, by Kafka timeout: (process, metrics port)."""
    assert stack.state
    with contextlib.ExitStack() as running:
        apps = {}
        for timeout in TIMEOUTS_S:
            port = free_port()
            argv = kmon_argv("stream", "--bootstrap-servers", stack.state.bootstrap_servers,
                             "--checkpoint", str(stack.dir / f"checkpoint-{timeout:g}"),
                             "--metrics-port", str(port), "--master", "local[1]", "--trigger-interval", "1",
                             "--kafka-timeout", str(timeout))
            apps[timeout] = running.enter_context(process(argv, stack.dir / f"stream-{timeout:g}.log", "stream")), port
        progress("starting two stream apps (Kafka timeout " + ", ".join(f"{t:g} s" for t in TIMEOUTS_S) + ")")
        for timeout, (proc, port) in apps.items():
            wait(lambda: check_alive(proc, f"stream ({timeout:g} s)") or _brokers_shown(port) == BROKERS, 300,
                 f"the {timeout:g} s app showing {BROKERS} brokers", 0.5)
        yield apps


def _round(stack: LocalStack, admin: AdminClient, reader: TopicReader,
           apps: dict[float, tuple[Spawned, int]]) -> Round:
    victim = _busiest_leader(admin)
    key = f"{CLUSTER}/{entity_key('broker', victim)}".encode()
    reader.poll({key})  # skip what is already there
    pending = {t: port for t, (_, port) in apps.items()}
    shown: dict[float, float] = {}
    killed = time.perf_counter()
    stack.kill_broker(victim)
    event_s = None
    while pending and time.perf_counter() - killed < 300:
        event = reader.poll({key}).get(key)
        if event_s is None and event is not None and event.op == "delete":
            event_s = time.perf_counter() - killed
        for timeout, port in list(pending.items()):
            if _brokers_shown(port) == BROKERS - 1:
                shown[timeout] = time.perf_counter() - killed
                del pending[timeout]
        time.sleep(0.1)
    if pending:
        raise TimeoutError(f"broker {victim}'s death not shown by the apps with timeout {sorted(pending)} in 300 s")
    stack.start_broker(victim)
    for _, port in apps.values():
        wait(lambda: _brokers_shown(port) == BROKERS, 300, f"broker {victim} back in the views", 0.5)
    return Round(event_s if event_s is not None else float("nan"), shown)


def run(rounds: int, progress: Callable[[str], None]) -> list[dict]:
    with local_stack(BROKERS) as stack:
        assert stack.state
        boot = stack.state.bootstrap_servers
        collector = kmon_argv("collect", "zk", "--zookeeper", stack.state.zk_address, "--cluster", CLUSTER,
                              "--events-bootstrap-servers", boot, "--events-topic", TOPIC,
                              "--metrics-port", str(free_port()))
        with process(collector, stack.dir / "collector-zk.log", "collect"), \
                contextlib.closing(TopicReader(boot, TOPIC)) as reader, _apps(stack, progress) as apps:
            admin = AdminClient({"bootstrap.servers": boot})
            results = []
            for n in range(rounds):
                results.append(_round(stack, admin, reader, apps))
                progress(f"round {n + 1}/{rounds}: {results[-1]}")
    return _rows(results)


def _rows(results: list[Round]) -> list[dict]:
    rows = []
    base = [r.shown_s[TIMEOUTS_S[-1]] for r in results]
    for timeout in TIMEOUTS_S:
        times = [r.shown_s[timeout] for r in results]
        rows.append({"kafka_timeout_s": timeout, "rounds": len(results),
                     "kill_to_event_on_topic_p50_s": percentile([r.event_s for r in results], 0.5),
                     "kill_to_views_p50_s": percentile(times, 0.5), "kill_to_views_max_s": max(times),
                     "rounds_over_30s": sum(t > 30 for t in times),
                     "p50_ratio": percentile(times, 0.5) / percentile(base, 0.5), "max_ratio": max(times) / max(base)})
    return rows
