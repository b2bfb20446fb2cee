"""`python -m bench peers`: kmon beside what operators run today, on one cluster, in one run.

One monitored cluster (3 brokers in ZooKeeper mode, Kafka's default 18 s ZooKeeper session,
replica.lag.time.max.ms 5 s) with Prometheus' JMX exporter in every broker; kmon as `kmon run`
starts it (both collectors and the stream app, events on kmon's own cluster); Burrow on the
same cluster; one Prometheus scraping kmon (every 2 s) and the agents (every 10 s, the most the
agents sustain here: parts.PEER_SCRAPE) and evaluating kmon's rules and the peer's (alerts.yml,
the ZooKeeper-era Strimzi rule set); klag-exporter, a lag exporter, in its exact and its default
time-lag mode, scraped as the agents are and evaluated with alerts-klag.yml.

Then a quiet baseline, the scripted faults one after the other (faults.py), each followed by
the alerts settling and a quiet period, and the cost of each system at growing sizes. A steady
produce/consume load (bench/support/load.py) runs from the baseline to the end of the faults:
quiet is a cluster at work, not an idle one. Every alert instance and Burrow status is recorded
from outside (watch.py); report.py attributes them to the fault or quiet period in which they began.

``--kraft``: the monitored cluster is a KRaft cluster instead (Kafka 4, three nodes each broker and
controller, KRAFT_PROFILE), the peer's rules and alerts its KRaft-era ones (jmx-exporter-kraft.yaml,
alerts-kraft.yml), no Burrow (1.2.1 keeps its own coordination in ZooKeeper), and one more table:
the controller as the Admin API names it, beside the quorum's elections and kmon's count of
controller changes (controllers.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kazoo.exceptions import KazooException

from bench.support.load import RATE_PER_S, Load
from bench.support.measure import metric_sum, wait
from bench.peers import controllers, cost, faults, lag_faults, report
from bench.peers.parts import (KAFKA_CLUSTER, KLAG_MODES, PeerTools, burrow, get_json, jmx_agent_option, klag,
                               peer_tools, prometheus)
from bench.peers.watch import BURROW, SYSTEMS, Recorder
from cli.monitor import MonitorOptions, start_monitor
from kmon.toolchain import find_toolchain
from stack import configs
from stack.local import LocalStack
from stack.state import collector_sources, StackRequest
from stack.process import PortPicker

BROKERS = 3
# Kafka's default session (18 s), so that a SIGSTOP can outlast replica.lag.time.max.ms without
# a death (STALL_S); ZooKeeper's tick of 1 s lets it grant up to 20 s. 1 GB heaps for 10k partitions.
PROFILE = configs.Profile(zk_tick_ms=1000, zk_session_timeout_ms=18000, replica_lag_time_max_ms=5000,
                          broker_heap="1g", extra_broker_props=configs.Profile.fast().extra_broker_props)
# KRaft: Kafka's own failure detection (a broker fenced 9 s after its last heartbeat, sent every 2 s;
# a voter calls an election 2 s after it last heard from the quorum's leader, an election times out
# after 1 s: Kafka's defaults), replica.lag.time.max.ms 4 s so that a SIGSTOP can outlast it and not
# the broker session (STALL_KRAFT_S), 1 GB heaps as above, and the controller undoing no election
# the faults make (auto.leader.rebalance off, as in PROFILE).
KRAFT_PROFILE = configs.KraftProfile(broker_session_timeout_ms=9000, broker_heartbeat_interval_ms=2000,
                                     election_timeout_ms=1000, fetch_timeout_ms=2000, replica_lag_time_max_ms=4000,
                                     node_heap="1g", extra_props={"auto.leader.rebalance.enable": "false"})
# the steady load (bench/support/load.py, RATE_PER_S messages a second) over these topics, read by one
# group per protocol
LOAD_TOPICS = ("peers-load-a", "peers-load-b")
LOAD_GROUPS = {"peers-load": "classic"}
LOAD_GROUPS_KRAFT = {**LOAD_GROUPS, "peers-load-848": "consumer"}
# every fault the bench can stage, by name, in the default order
FAULTS = {**faults.FAULTS, **lag_faults.FAULTS}
# the lag faults' brokers delete and compact within seconds (lag_faults.py): retention checked and
# the cleaner woken every second (Kafka's defaults: 5 minutes, 15 s)
LAG_FAULT_PROPS = {"log.retention.check.interval.ms": "1000", "log.cleaner.backoff.ms": "1000"}
# alerts that stay firing for their window (10 min) after what they count: not waited out
WINDOWED = {"ControllerFlapping", "UncleanLeaderElection", "ConsumerGroupRebalanceStorm", "IsrShrinking",
            "ConsumerGroupDataLoss"}
SETTLE_CAP_S = 240.0


def run(chosen: list[str], sizes: list[int], baseline_s: float, quiet_s: float, progress: Callable[[str], None],
        workdir: Path | None = None, kraft: bool = False) -> dict[str, list[dict]]:
    """``workdir``: where the stack and every log go, kept afterwards (default: a temporary directory);
    ``kraft``: the monitored cluster in KRaft mode (see the module's docstring)."""
    if kraft and (refused := [f for f in chosen if f in faults.NOT_ON_KRAFT]):
        raise ValueError(f"not on a KRaft cluster: {refused[0]}: {faults.NOT_ON_KRAFT[refused[0]]}")
    toolchain = find_toolchain()
    tools = peer_tools(toolchain.cache, progress, with_burrow=not kraft)
    profile, kraft_profile = PROFILE, KRAFT_PROFILE
    if any(f in lag_faults.FAULTS for f in chosen):   # the other faults' runs and costs as they were
        profile = dataclasses.replace(PROFILE, extra_broker_props={**PROFILE.extra_broker_props, **LAG_FAULT_PROPS})
        kraft_profile = dataclasses.replace(KRAFT_PROFILE, extra_props={**KRAFT_PROFILE.extra_props, **LAG_FAULT_PROPS})
    pick = PortPicker().pick
    agent_ports = {b: pick() for b in range(1, BROKERS + 1)}
    with contextlib.ExitStack() as keep:
        root = workdir or Path(keep.enter_context(tempfile.TemporaryDirectory(prefix="kmon-bench-peers-")))
        stack = LocalStack(root / "stack", toolchain, die_with_parent=True)
        progress(f"logs in {stack.dir / 'logs'}" + ("" if kraft else f" and {stack.dir / 'burrow'}"))
        progress(f"starting the cluster (3 {'KRaft nodes, each broker and controller' if kraft else 'brokers'}, each "
                 "with the JMX exporter agent) and kmon's events cluster")
        stack.up(StackRequest(brokers=BROKERS, prometheus=False, events_cluster=True, profile=profile,
                              kraft=kraft, kraft_profile=kraft_profile,
                              broker_jvm_options=lambda b: [jmx_agent_option(tools, agent_ports[b], kraft)],
                              reserved_ports=frozenset(agent_ports.values())))
        try:
            progress(f"starting kmon as `kmon run` does: both collectors ({', '.join(collector_sources(kraft))}) "
                     "and the stream app")
            start_monitor(stack, MonitorOptions(cluster=KAFKA_CLUSTER))
            with klag(stack, tools) as klags, \
                    prometheus(stack, agent_ports, {job: port for job, (port, _) in klags.items()}) as prom, \
                    _burrow(stack, tools, kraft) as (burrow_url, burrow_pid), \
                    Recorder(prom, burrow_url) as recorder, _controller_watch(stack, kraft) as watch:
                assert stack.state
                ctx = faults.Ctx(stack, AdminClient({"bootstrap.servers": stack.state.bootstrap_servers, "log_level": 0}),
                                 recorder, progress)
                systems = tuple(s for s in SYSTEMS if s != BURROW or not kraft)
                _wait_ready(ctx, prom)
                phases = _faults(ctx, chosen, baseline_s, quiet_s)
                alerts, groups = recorder.recorded(), dict(recorder.groups)
                tables = {"faults": report.fault_rows(phases, alerts, groups, systems),
                          "quiet": report.quiet_rows(phases, alerts, groups, systems),
                          "lag": report.lag_rows(phases, lag_faults.SYSTEMS)}
                _keep_lag_samples(phases, stack.dir / "logs" / "peers-lag-samples.jsonl", progress)
                if watch is not None:
                    tables["controllers"] = controllers.rows(list(watch.samples), phases)
                if recorder.errors:
                    progress(f"{len(recorder.errors)} polls failed, the first: {recorder.errors[:3]}")
                # the faults' figures first, so that a cost phase that breaks (a machine too small for
                # the biggest size) loses nothing of them
                progress(f"faults done: {json.dumps(tables)}")
                tables["cost"] = _costs(ctx, prom, agent_ports, burrow_pid, [proc.pid for _, proc in klags.values()],
                                        sizes, progress)
        finally:
            stack.down(timeout=10)
    return tables


def _faults(ctx: faults.Ctx, chosen: list[str], baseline_s: float, quiet_s: float) -> list[report.Phase]:
    """The baseline, then each fault, its settling and its quiet, under the steady load."""
    faults.load_topics(ctx, LOAD_TOPICS)
    with _steady_load(ctx, LOAD_GROUPS_KRAFT if ctx.kraft else LOAD_GROUPS):
        phases = [_quiet(baseline_s, "baseline", ctx.progress)]
        for name in chosen:
            ctx.progress(f"fault: {name}")
            began = time.time()
            try:
                done = FAULTS[name](ctx)
            except (TimeoutError, KafkaException, KazooException, OSError) as e:
                # the cluster is in no known state after a fault that broke off: the faults before it are
                # still reported, the ones after it are not run
                ctx.progress(f"  {name} broke off ({type(e).__name__}: {e}); the faults before it are reported")
                break
            _settle(ctx)
            phases.append(report.Phase(name, began, time.time(), done))
            ctx.progress(f"  {done.what}: {time.time() - began:.0f} s" + "".join(f"; {n}" for n in done.notes))
            phases.append(_quiet(quiet_s, f"after {name}", ctx.progress))
    return phases   # the load stopped: the cost phase measures the systems on a quiet cluster, as before


@contextlib.contextmanager
def _steady_load(ctx: faults.Ctx, groups: dict[str, str]) -> Iterator[Load]:
    load = Load(ctx.bootstrap, groups, LOAD_TOPICS)
    load.start()
    ctx.progress(f"a steady load: {RATE_PER_S:g} messages/s over {', '.join(LOAD_TOPICS)}, read by "
                 + ", ".join(f"{g} ({p})" for g, p in groups.items()))
    try:
        yield load
    finally:
        load.stop()
        ctx.progress(f"the load wrote {load.produced} messages")


@contextlib.contextmanager
def _burrow(stack: LocalStack, tools: PeerTools, kraft: bool) -> Iterator[tuple[str | None, int | None]]:
    """Burrow's URL and pid, (None, None) on a KRaft cluster: Burrow 1.2.1 needs ZooKeeper for its
    own coordination (its [zookeeper] section), which a KRaft cluster has none of."""
    if kraft:
        yield None, None
        return
    with burrow(stack, tools) as (url, proc):
        yield url, proc.pid


@contextlib.contextmanager
def _controller_watch(stack: LocalStack, kraft: bool) -> Iterator[controllers.ControllerWatch | None]:
    """The controller asked three ways through the run (KRaft only: in ZooKeeper mode the Admin API
    names /controller's broker, which is the controller)."""
    if not kraft:
        yield None
        return
    with controllers.ControllerWatch(stack, KAFKA_CLUSTER, stack.dir / "logs" / "peers-controllers.jsonl") as watch:
        yield watch


def _wait_ready(ctx: faults.Ctx, prom: str) -> None:
    assert ctx.stack.state
    port = ctx.stack.state.stream_port
    wait(lambda: metric_sum(port, "kmon_brokers", cluster=KAFKA_CLUSTER) == BROKERS, 300, "kmon showing the brokers", 1)
    # Each target up once, not all at one instant: on two loaded cores the peer's agents miss
    # scrapes for minutes at a time (the KRaft run of 2026-11-28), and the run measures them as
    # they are. A target that never answers is named.
    answered: set[str] = set()
    targets: list[dict] = []

    def every_target_answered() -> bool:
        targets[:] = get_json(f"{prom}/api/v1/targets")["data"]["activeTargets"]
        answered.update(t["scrapeUrl"] for t in targets if t["health"] == "up")
        return len(answered) == 3 + BROKERS + len(KLAG_MODES)

    try:
        wait(every_target_answered, 300, "every target answering Prometheus", 1)
    except TimeoutError as e:
        never = {t["scrapeUrl"]: t["lastError"] or t["health"] for t in targets if t["scrapeUrl"] not in answered}
        raise TimeoutError(f"{e}; never answered: {never}") from None
    wait(lambda: faults.whole(ctx), 120, "the cluster whole", 1)


def _quiet(seconds: float, what: str, progress: Callable[[str], None]) -> report.Phase:
    progress(f"quiet: {seconds:g} s ({what})")
    start = time.time()
    time.sleep(seconds)
    return report.Phase(f"quiet {what}", start, time.time())


def _settle(ctx: faults.Ctx) -> None:
    """Until no alert is pending or firing but the ones that count a window."""
    def settled() -> bool:
        return not [a for a in ctx.recorder.active() if a.name not in WINDOWED]
    try:
        wait(settled, SETTLE_CAP_S, "the alerts settled", interval=1)
    except TimeoutError:
        still = sorted({a.describe() for a in ctx.recorder.active() if a.name not in WINDOWED})
        ctx.progress(f"  still active after {SETTLE_CAP_S:g} s: {', '.join(still)}")


def _keep_lag_samples(phases: list[report.Phase], path: Path, progress: Callable[[str], None]) -> None:
    samples = [s for p in phases if p.run is not None for s in p.run.figures]
    if samples:
        path.write_text("".join(json.dumps(s) + "\n" for s in samples))
        progress(f"the lag faults' {len(samples)} samples (the truth beside each system's figures): {path}")


def _costs(ctx: faults.Ctx, prom: str, agent_ports: dict[int, int], burrow_pid: int | None, klag_pids: list[int],
           sizes: list[int], progress: Callable[[str], None]) -> list[dict]:
    state = ctx.stack.state
    assert state
    kmon_urls = [f"http://127.0.0.1:{p}/metrics" for p in (state.stream_port, *state.collector_ports.values())]
    agent_urls = [f"http://127.0.0.1:{p}/metrics" for p in agent_ports.values()]
    rows: list[dict] = []
    for size in [0, *sizes]:
        try:
            partitions = cost.grow(ctx, size, progress) if size else sum(
                len(t.partitions) for t in ctx.admin.list_topics(timeout=60).topics.values())
            progress(f"cost at {partitions} partitions")
            pids = {"kmon": [state.components[n].pid for n in
                             ("stream", *(f"collector-{c}" for c in collector_sources(state.kraft)))],
                    "brokers": [state.components[f"broker-{b}"].pid for b in ctx.stack.broker_ids()],
                    **({"burrow": [burrow_pid]} if burrow_pid is not None else {}), "klag": klag_pids}
            rows += cost.measure(ctx, prom, kmon_urls, agent_urls, pids,
                                 lambda: metric_sum(state.stream_port, "kmon_partitions", cluster=KAFKA_CLUSTER),
                                 partitions)
        except (TimeoutError, OSError, KafkaException) as e:   # a finding of this machine's size, not a crash
            progress(f"cost at {size} partitions: gave up ({e})")
            rows.append({"partitions": size, "system": "(all)", "note": f"not measured: {e}"})
            break
    return rows
