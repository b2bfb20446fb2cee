"""Broker deaths -> views -> alerts, with kmon's events on their own cluster and on the monitored one.

One monitored cluster (3 brokers, fast failure detection) and two complete monitors of it side
by side, each a ZooKeeper collector and a `kmon stream` app: one publishes its events to kmon's
own events cluster (one KRaft node), the other to the monitored cluster itself. One Prometheus
scrapes both and evaluates kmon's alert rules. Each round SIGKILLs a broker, cycling through
a follower, the broker leading most partitions of the monitored cluster's events topic, and the
controller; from the kill it times ZooKeeper showing it (Kafka's own detection), each monitor's
/metrics showing the broker down (and, for a controller, the new controller) and BrokerDown
firing in Prometheus; then restarts the broker
and waits until both monitors show it back and the alert is resolved.
"""
from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.support.harness import check_alive, kmon_argv, local_stack, process
from bench.support.measure import metric_sum, percentile, wait
from cli.monitor import MonitorOptions
from stack import configs
from stack.local import LocalStack
from stack.process import Spawned, free_port

BROKERS = 3
KINDS = ("follower", "leader", "controller")
PLACEMENTS = ("own", "monitored")   # where a monitor's events travel
ALERT = "BrokerDown"


@dataclass(frozen=True)
class Monitor:
    placement: str
    cluster: str          # the name it reports the monitored cluster under
    stream_port: int
    collector_port: int


@dataclass(frozen=True)
class Round:
    kind: str
    victim: int
    zk_s: float                 # kill -> ZooKeeper shows it (see _zk_shows_death)
    view_s: dict[str, float]    # placement -> kill -> its /metrics show the death
    alert_s: dict[str, float]   # placement -> kill -> BrokerDown firing for the victim

    def __str__(self) -> str:
        return f"{self.kind} {self.victim}: zookeeper {self.zk_s:.1f} s, " + ", ".join(
            f"{p} view {self.view_s[p]:.1f} s alert {self.alert_s[p]:.1f} s" for p in PLACEMENTS)


def _shows_death(m: Monitor, victim: int, kind: str, old_controller: int) -> bool:
    try:
        down = metric_sum(m.stream_port, "kmon_broker_up", cluster=m.cluster, broker=str(victim)) == 0
        if kind != "controller":
            return down
        controller = metric_sum(m.stream_port, "kmon_controller_id", cluster=m.cluster)
        return down and controller not in (-1, old_controller)
    except OSError:   # the app is restarting its HTTP server or still starting
        return False


def _zk_shows_death(zk: KazooClient, victim: int, kind: str, old_controller: int, killed_wall: float) -> float | None:
    """Seconds from the kill (wall clock) to Kafka's own record of it in ZooKeeper: the
    victim's registration gone (polled) and, for a controller, the new /controller (its
    creation time, as ZooKeeper stamped it); None while not yet."""
    if zk.exists(f"/brokers/ids/{victim}") is not None:
        return None
    gone = time.time() - killed_wall
    if kind != "controller":
        return gone
    try:
        data, stat = zk.get("/controller")
    except NoNodeError:
        return None
    if json.loads(data)["brokerid"] == old_controller:
        return None
    return max(gone, stat.ctime / 1000 - killed_wall)


def _shows_alive(m: Monitor, victim: int) -> bool:
    try:
        return metric_sum(m.stream_port, "kmon_broker_up", cluster=m.cluster, broker=str(victim)) == 1 \
            and metric_sum(m.stream_port, "kmon_brokers", cluster=m.cluster) == BROKERS
    except OSError:
        return False


def _firing(prometheus: str) -> set[tuple[str, str]]:
    """(cluster, broker) of every firing BrokerDown."""
    with urllib.request.urlopen(f"{prometheus}/api/v1/alerts", timeout=10) as r:
        alerts = json.loads(r.read())["data"]["alerts"]
    return {(a["labels"].get("cluster", ""), a["labels"].get("broker", "")) for a in alerts
            if a["labels"]["alertname"] == ALERT and a["state"] == "firing"}


def _pending_or_firing(prometheus: str) -> int:
    query = urllib.parse.urlencode({"query": f'ALERTS{{alertname="{ALERT}"}}'})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query?{query}", timeout=10) as r:
        return len(json.loads(r.read())["data"]["result"])


def _victim(stack: LocalStack, admin: AdminClient, kind: str) -> int:
    controller = stack.controller_id()
    if kind == "controller":
        return controller
    topic = MonitorOptions().events_topic   # the monitored cluster's copy of the events topic
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    by_leading = [b for b, _ in Counter(p.leader for p in partitions if p.leader >= 0).most_common()
                  if b != controller]
    leader = by_leading[0] if by_leading else next(b for b in stack.broker_ids() if b != controller)
    if kind == "leader":
        return leader
    return next(b for b in stack.broker_ids() if b not in (controller, leader))


@contextlib.contextmanager
def _monitors(stack: LocalStack, trigger_s: float,
              progress: Callable[[str], None]) -> Iterator[tuple[list[Monitor], str]]:
    """Both monitors and a Prometheus scraping them; yields them and Prometheus' URL."""
    assert stack.state
    topic = MonitorOptions().events_topic
    events = {"own": stack.state.events_bootstrap_servers, "monitored": stack.state.bootstrap_servers}
    monitors = [Monitor(p, f"bench-{p}", free_port(), free_port()) for p in PLACEMENTS]
    with contextlib.ExitStack() as running:
        procs: list[tuple[Spawned, str]] = []
        for m in monitors:
            collector = kmon_argv("collect", "zk", "--zookeeper", stack.state.zk_connect, "--cluster", m.cluster,
                                  "--events-bootstrap-servers", events[m.placement], "--events-topic", topic,
                                  "--metrics-port", str(m.collector_port))
            stream = kmon_argv("stream", "--bootstrap-servers", events[m.placement], "--events-topic", topic,
                               "--checkpoint", str(stack.dir / f"checkpoint-{m.placement}"),
                               "--metrics-host", "127.0.0.1", "--metrics-port", str(m.stream_port),
                               "--master", "local[1]", "--trigger-interval", str(trigger_s))
            for argv, name in ((collector, "collect"), (stream, "stream")):
                log = stack.dir / f"{name}-{m.placement}.log"
                procs.append((running.enter_context(process(argv, log, name)), f"{name} ({m.placement})"))
        port = free_port()
        cfg = stack.dir / "bench-prometheus.yml"
        cfg.write_text(configs.prometheus_config([f"127.0.0.1:{m.stream_port}" for m in monitors],
                                                 [f"127.0.0.1:{m.collector_port}" for m in monitors],
                                                 "127.0.0.1:9"))   # alerts are read from Prometheus itself
        prometheus = [stack.tools.prometheus, f"--config.file={cfg}",
                      f"--storage.tsdb.path={stack.dir / 'bench-prometheus-data'}",
                      f"--web.listen-address=127.0.0.1:{port}"]
        procs.append((running.enter_context(process(prometheus, stack.dir / "prometheus.log", str(cfg))),
                      "prometheus"))
        progress("starting two monitors (events on their own cluster / on the monitored one) and Prometheus")
        for m in monitors:
            wait(lambda: [check_alive(p, what) for p, what in procs] and all(
                _shows_alive(m, b) for b in stack.broker_ids()), 300, f"the {m.placement} monitor up", 0.5)
        yield monitors, f"http://127.0.0.1:{port}"


def _round(stack: LocalStack, zk: KazooClient, admin: AdminClient, monitors: list[Monitor], prometheus: str,
           kind: str) -> Round:
    victim = _victim(stack, admin, kind)
    old_controller = stack.controller_id()
    views: dict[str, float] = {}
    alerts: dict[str, float] = {}
    zk_s = None
    killed, killed_wall = time.perf_counter(), time.time()
    stack.kill_broker(victim)
    while (len(views) < len(monitors) or len(alerts) < len(monitors)) and time.perf_counter() - killed < 300:
        if zk_s is None:
            zk_s = _zk_shows_death(zk, victim, kind, old_controller, killed_wall)
        firing = _firing(prometheus)
        for m in monitors:
            if m.placement not in views and _shows_death(m, victim, kind, old_controller):
                views[m.placement] = time.perf_counter() - killed
            if m.placement not in alerts and (m.cluster, str(victim)) in firing:
                alerts[m.placement] = time.perf_counter() - killed
        time.sleep(0.1)
    missing = [m.placement for m in monitors if m.placement not in views or m.placement not in alerts]
    if zk_s is None:
        missing.append("ZooKeeper")
    if missing:
        raise TimeoutError(f"broker {victim} ({kind}) death not shown or alerted by {missing} in 300 s")
    stack.start_broker(victim)
    for m in monitors:
        wait(lambda: _shows_alive(m, victim), 300, f"broker {victim} back in the {m.placement} views", 0.5)
    wait(lambda: _pending_or_firing(prometheus) == 0, 300, f"{ALERT} resolved", 0.5)
    return Round(kind, victim, zk_s, views, alerts)


def run(rounds: int, trigger_s: float, progress: Callable[[str], None]) -> list[dict]:
    with local_stack(BROKERS, events_cluster=True) as stack:
        assert stack.state
        admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers})
        with _monitors(stack, trigger_s, progress) as (monitors, prometheus), stack.zk() as zk:
            results = []
            for n in range(rounds):
                results.append(_round(stack, zk, admin, monitors, prometheus, KINDS[n % len(KINDS)]))
                progress(f"round {n + 1}/{rounds}: {results[-1]}")
    return _rows(results)


def _rows(results: list[Round]) -> list[dict]:
    rows = []
    for placement in PLACEMENTS:
        for kind in (*KINDS, "all"):
            chosen = [r for r in results if kind in ("all", r.kind)]
            if not chosen:
                continue
            views = [r.view_s[placement] for r in chosen]
            alerts = [r.alert_s[placement] for r in chosen]
            after = [r.alert_s[placement] - r.view_s[placement] for r in chosen]
            kmon = [r.view_s[placement] - r.zk_s for r in chosen]
            rows.append({"events_on": placement, "kills": kind, "n": len(chosen),
                         "kill_to_zk_p50_s": percentile([r.zk_s for r in chosen], 0.5),
                         "kill_to_zk_max_s": max(r.zk_s for r in chosen),
                         "kill_to_view_p50_s": percentile(views, 0.5), "kill_to_view_p99_s": percentile(views, 0.99),
                         "kill_to_view_max_s": max(views),
                         "zk_to_view_p50_s": percentile(kmon, 0.5), "zk_to_view_max_s": max(kmon),
                         "kill_to_alert_p50_s": percentile(alerts, 0.5),
                         "kill_to_alert_p99_s": percentile(alerts, 0.99), "kill_to_alert_max_s": max(alerts),
                         "view_to_alert_max_s": max(after)})
    return rows
