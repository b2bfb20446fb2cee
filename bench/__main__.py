"""python -m bench [scrape|stream|idle|zk|kraft|kraft-stream|groups|failover|peers|soak|startup|suite-cpu|compare] ... : prints Markdown tables for bench/README.md."""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from bench import buffer, failover, groups, idle, kraft, kraft_stream, peers, plot, scrape, soak, startup, stream, suite_cpu, zk
from bench.peers import FAULTS
from bench.peers.faults import NOT_ON_KRAFT
from bench.support import compare
from kmon.toolchain import find_toolchain
from streaming.config import StreamConfig


def _table(rows: list[dict]) -> str:
    cols = list(rows[0])
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows])


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description="kmon benchmarks (figures for bench/README.md)")
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("scrape", help="views + /metrics cost at N partitions (no Spark)")
    s.add_argument("--partitions", default="1000,10000,100000")
    s.add_argument("--partition-detail", default="unhealthy", choices=["unhealthy", "all", "none"])
    st = sub.add_parser("stream", help="the Spark app on a real broker")
    st.add_argument("--partitions", default="100000", help="comma-separated sizes, one stack each")
    st.add_argument("--backlog", type=int, default=None, help="events to drain (default: 10 per partition)")
    st.add_argument("--driver-memory", default=StreamConfig.driver_memory, help="the Spark driver's memory")
    st.add_argument("--master", default="local[2]",
                    help="the Spark master, e.g. local-cluster[2,1,2048] for executors in JVMs of their own")
    st.add_argument("--clusters", type=int, default=1,
                    help="a fleet: this many clusters of --partitions each into the one app")
    st.add_argument("--delay-samples", type=int, default=50)
    st.add_argument("--trigger", type=float, default=StreamConfig.trigger_seconds)
    st.add_argument("--plot", metavar="PNG", help="also draw the cost curve over the sizes (needs .[bench])")
    i = sub.add_parser("idle", help="CPU of an idle kmon stream (and of the broker it polls) per trigger interval")
    i.add_argument("--triggers", default="0.25,0.5,1.0", help="comma-separated trigger intervals (s), one app each")
    i.add_argument("--seconds", type=float, default=60.0, help="idle time measured per trigger")
    z = sub.add_parser("zk", help="the ZooKeeper collector on synthetic trees in a real ZooKeeper")
    z.add_argument("--partitions", default="1000,10000,100000")
    z.add_argument("--samples", type=int, default=200, help="ISR flips timed one at a time, per size")
    k = sub.add_parser("kraft", help="the KRaft collector on a synthetic metadata log (decode, fold, encode), beside "
                                     "the ZooKeeper collector's own part on the same cluster; pure Python, no Kafka")
    k.add_argument("--partitions", default="10000,100000")
    k.add_argument("--repeat", type=int, default=5, help="runs of each measurement per size (the median is given)")
    k.add_argument("--profile", action="store_true", help="also print a cProfile of one log run per size")
    k.add_argument("--measure", default=",".join(kraft.MEASURES),
                   help="which runs, comma-separated (zk takes most of a round and does not change with the KRaft "
                        "collector)")
    ks = sub.add_parser("kraft-stream", help="a synthetic metadata log followed from the KRaft collector's start "
                                             "(its own process, a real publisher) to the whole picture on the stream "
                                             "app's /metrics, and that /metrics scraped")
    ks.add_argument("--partitions", default="100000", help="comma-separated sizes, one stack each")
    ks.add_argument("--driver-memory", default=StreamConfig.driver_memory, help="the Spark driver's memory")
    b = sub.add_parser("buffer", help="the collectors' events buffer through an events-cluster outage: resident "
                                      "memory per event held (no Kafka)")
    b.add_argument("--partitions", default="20000,100000", help="comma-separated sizes of the snapshot held")
    g = sub.add_parser("groups", help="the consumer-group collector beside kafka-consumer-groups")
    g.add_argument("--groups", default="1000,10000")
    f = sub.add_parser("failover", help="broker deaths -> views -> alerts, events on their own cluster beside "
                                        "events on the monitored one")
    f.add_argument("--rounds", type=int, default=21,
                   help="brokers killed (and restarted) one after the other: follower, leader, controller, ...")
    f.add_argument("--trigger", type=float, default=StreamConfig.trigger_seconds,
                   help="the stream apps' trigger interval (s)")
    pe = sub.add_parser("peers", help="kmon beside Kafka's JMX metrics with Strimzi-style alerts and Burrow: the same "
                                      "faults, fault -> alert seconds, false alerts, cost at 1k and 10k partitions")
    pe.add_argument("--faults", help=f"comma-separated, in order (default: all, but those a KRaft cluster cannot "
                                     f"stage with --kraft): {', '.join(FAULTS)}")
    pe.add_argument("--kraft", action="store_true", help="a KRaft cluster (Kafka 4, three nodes each broker and "
                                                         "controller) with the peer's KRaft-era rules, no Burrow, and "
                                                         "the controller as DescribeCluster names it beside the quorum")
    pe.add_argument("--sizes", default="1000,10000", help="partition counts to measure each system's cost at, after "
                                                         "the faults ('' for none)")
    pe.add_argument("--baseline", type=float, default=120.0, help="quiet seconds on the healthy cluster first")
    pe.add_argument("--quiet", type=float, default=45.0, help="quiet seconds after each fault")
    pe.add_argument("--plot", metavar="PNG", help="also draw fault -> first alert per system (needs .[bench])")
    pe.add_argument("--workdir", type=Path, help="keep the stack and its logs here (default: a temporary directory)")
    so = sub.add_parser("soak", help="mixed faults under load for N minutes, then kmon's history, counters and views "
                                     "against an independent oracle (the cluster's own record), memory, restarts")
    so.add_argument("--minutes", type=float, default=60.0)
    so.add_argument("--kraft", action="store_true", help="a KRaft cluster (Kafka 4) instead of ZooKeeper mode")
    so.add_argument("--seed", type=int, default=1, help="the faults' random generator: the same seed, the same faults")
    so.add_argument("--workdir", type=Path, help="keep the stack and its logs here (default /tmp/kmon-soak-<mode>-<seed>)")
    su = sub.add_parser("startup", help="CPU of one monitored local stack (the fault scenarios' fixture) to start and "
                                        "while idle, by part, for each JVM option set given to every JVM it starts")
    su.add_argument("--jvm-options", default=",-XX:TieredStopAtLevel=1",
                    help="comma-separated JDK_JAVA_OPTIONS values, one stack each, in order ('' for none)")
    su.add_argument("--kraft", action="store_true", help="a KRaft cluster (Kafka 4) instead of ZooKeeper mode")
    su.add_argument("--settle", type=float, default=30.0, help="seconds after the start counted with it")
    su.add_argument("--idle", type=float, default=60.0, help="idle seconds measured after that")
    su.add_argument("--broker-death", type=float, default=0.0,
                    help="then SIGKILL a follower broker and measure this many seconds after it (0: not)")
    sc = sub.add_parser("suite-cpu", help="a command's CPU by process kind (default: the test suite), sampled "
                                          "from /proc while it runs")
    sc.add_argument("--every", type=float, default=2.0, help="seconds between two samples")
    sc.add_argument("command", nargs="*", default=["make", "test"], help="the command (after --)")
    cm = sub.add_parser("compare", help="one bench on a base commit and on the working tree, alternately, in one go: "
                                        "each figure's base and head medians and their ratio")
    cm.add_argument("--base", required=True, help="the commit to compare with (any git ref)")
    cm.add_argument("--rounds", type=int, default=3, help="runs of the bench on each side")
    cm.add_argument("bench", nargs=argparse.REMAINDER,
                    help=f"after --: the bench and its flags ({', '.join(compare.ROW_BENCHES)})")
    pl = sub.add_parser("plot", help="draw the stream cost curve, or the peers' fault -> alert times, from the JSON "
                                     "that `stream` or `peers` printed on stderr")
    pl.add_argument("rows", help="a file holding `stream`'s JSON list of rows or `peers`' JSON tables")
    pl.add_argument("png")
    args = p.parse_args()
    if args.what == "plot":
        with open(args.rows) as f:
            rows = json.load(f)
        if isinstance(rows, dict):   # peers: its tables by name
            plot.alert_times(rows["faults"], args.png)
        else:
            plot.cost_curve(rows, args.png)
        return 0
    if getattr(args, "plot", None):
        plot.require()   # before a run of minutes, not after it
    log = lambda msg: print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
    print(f"machine: {platform.node()} {platform.machine()}, python {platform.python_version()}", file=sys.stderr)
    if args.what == "scrape":
        rows = [scrape.run(int(n), args.partition_detail) for n in args.partitions.split(",")]
    elif args.what == "kraft-stream":
        rows = [kraft_stream.run(int(n), args.driver_memory, log) for n in args.partitions.split(",")]
    elif args.what == "buffer":
        rows = [buffer.run(int(n), log) for n in args.partitions.split(",")]
    elif args.what == "groups":
        rows = groups.run([int(n) for n in args.groups.split(",")], log)
    elif args.what == "failover":
        rows = failover.run(args.rounds, args.trigger, log)
    elif args.what == "idle":
        rows = idle.run([float(t) for t in args.triggers.split(",")], args.seconds, log)
    elif args.what == "compare":
        bench_args = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
        try:
            rows = compare.run(args.base, bench_args, args.rounds, log, find_toolchain().cache)
        except compare.CompareError as e:
            p.error(str(e))
    elif args.what == "suite-cpu":
        rows = suite_cpu.run(args.command, args.every, log)
    elif args.what == "startup":
        rows = startup.run(args.jvm_options.split(","), args.kraft, args.settle, args.idle, args.broker_death, log)
    elif args.what == "zk":
        rows = zk.run([int(n) for n in args.partitions.split(",")], args.samples, log)
    elif args.what == "kraft":
        measures = [m for m in args.measure.split(",") if m]
        if unknown := sorted(set(measures) - set(kraft.MEASURES)):
            p.error(f"--measure: unknown {unknown}; known: {', '.join(kraft.MEASURES)}")
        rows = [kraft.run(int(n), args.repeat, log, args.profile, measures) for n in args.partitions.split(",")]
    elif args.what == "soak":
        verdict = soak.run(soak.SoakRequest(args.minutes, args.kraft, args.seed, args.workdir), log)
        for name, rows in verdict.tables().items():
            if rows:
                print(f"\n{name}\n\n{_table(rows)}")
        for problem in verdict.problems():
            log(f"PROBLEM: {problem}")
        return 0 if verdict.ok else 1
    elif args.what == "peers":
        default = [f for f in FAULTS if not (args.kraft and f in NOT_ON_KRAFT)]
        chosen = default if args.faults is None else [f for f in args.faults.split(",") if f]
        unknown = [f for f in chosen if f not in FAULTS]
        if unknown:
            p.error(f"--faults: unknown {unknown}; known: {', '.join(FAULTS)}")
        if args.kraft and (refused := [f for f in chosen if f in NOT_ON_KRAFT]):
            p.error(f"--faults: {refused[0]} not with --kraft: {NOT_ON_KRAFT[refused[0]]}")
        tables = peers.run(chosen, [int(n) for n in args.sizes.split(",") if n],
                           args.baseline, args.quiet, log, args.workdir, args.kraft)
        for name, rows in tables.items():
            if rows:
                print(f"\n{name}\n\n{_table(rows)}")
        print(json.dumps(tables), file=sys.stderr, flush=True)
        if args.plot:
            plot.alert_times(tables["faults"], args.plot)
        return 0
    else:
        rows = [stream.run(n, args.backlog or 10 * n * args.clusters, args.delay_samples, args.trigger, log,
                           args.clusters, args.driver_memory, args.master)
                for n in map(int, args.partitions.split(","))]
    print(_table(rows))
    print(json.dumps(rows), file=sys.stderr, flush=True)
    if args.what == "stream" and args.plot:
        plot.cost_curve(rows, args.plot)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TimeoutError as e:   # a part that did not come up or a fault that did not show: what, not where
        sys.exit(f"bench: {e}")
