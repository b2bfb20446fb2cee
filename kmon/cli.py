"""The ``kmon`` command: one entry point, one sub-command per process kind."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from kmon import config, logs
from kmon.monitor import MonitorOptions, history_dir, start_monitor
from kmon.signals import wait_for_shutdown_signal
from kmon.stack.local import LocalStack, StackError, StackRequest, StackState
from kmon.stack.toolchain import MissingTool, find_toolchain

log = logging.getLogger("kmon")

DEFAULT_STACK_DIR = ".kmon/stack"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)   # what a supervised child runs again
    logs.configure(args.log_level)
    try:
        return args.handler(args)
    except (StackError, MissingTool, TimeoutError) as e:
        log.error("%s", e)
        return 1
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kmon", description=(
        "Live, alertable state of Apache Kafka's control plane. "
        "Collectors -> events topic -> Spark views -> Prometheus."))
    logs.flag(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="the embedded default: a local real cluster and the monitor on it",
                         description="Start a local ZooKeeper, Kafka brokers, Prometheus and Alertmanager, "
                                     "the ZooKeeper and consumer-group collectors and the Spark views on them; "
                                     "print every address and run until SIGTERM/Ctrl-C, then stop them all.")
    _stack_flags(run)
    config.flag(run, "--cluster", default="local", help="name of the local cluster in events and metrics")
    config.flag(run, "--trigger-interval", default=None, type=float,
                help="seconds between Spark micro-batches (default: kmon stream's)")
    run.set_defaults(handler=cmd_run)

    stack = sub.add_parser("stack", help="start/stop/inspect the local stack",
                           description="A real local Kafka cluster (ZooKeeper mode) with Prometheus "
                                       "and Alertmanager, as background processes.")
    ssub = stack.add_subparsers(dest="stack_command", required=True, metavar="ACTION")
    up = ssub.add_parser("up", help="start the stack in the background and wait until it is ready")
    _stack_flags(up)
    up.set_defaults(handler=cmd_stack_up)
    down = ssub.add_parser("down", help="stop what `stack up` started, and nothing else")
    _dir_flag(down)
    config.switch(down, "--purge", help="also delete the stack's data and logs")
    down.set_defaults(handler=cmd_stack_down)
    status = ssub.add_parser("status", help="each process, and the brokers registered in ZooKeeper")
    _dir_flag(status)
    status.set_defaults(handler=cmd_stack_status)

    from streaming.cli import add_stream_parser
    add_stream_parser(sub)
    from streaming.history_cli import add_history_parser
    add_history_parser(sub)
    from dashboards.cli import add_dashboards_parser
    add_dashboards_parser(sub)
    from collectors.cli import add_collect_parser; add_collect_parser(sub)  # noqa: E702
    return p


def _dir_flag(p: argparse.ArgumentParser) -> None:
    config.flag(p, "--dir", default=DEFAULT_STACK_DIR, type=Path,
                help="directory for the stack's state, data and logs")


def _stack_flags(p: argparse.ArgumentParser) -> None:
    _dir_flag(p)
    config.flag(p, "--brokers", default=3, type=config.positive_int, help="number of Kafka brokers")
    config.flag(p, "--chroot", default="", type=config.chroot,
                help="ZooKeeper chroot for the Kafka tree, e.g. /kafka")
    config.flag(p, "--zookeeper-port", default=0, type=config.port, help="ZooKeeper port (0 = a free port)")
    config.flag(p, "--broker-port", default=0, type=config.port,
                help="port of broker 1; broker N gets this + N - 1 (0 = free ports)")
    config.switch(p, "--fast", help="detect failures in seconds (short ZooKeeper session, replica lag)")
    config.switch(p, "--no-prometheus", help="do not start Prometheus and Alertmanager")
    config.switch(p, "--no-events-cluster",
                  help="no separate events cluster: kmon's events travel on the monitored cluster, so kmon "
                       "slows down or goes blind exactly when that cluster fails (for comparisons)")
    config.switch(p, "--secure",
                  help="secure the monitored cluster as production clusters are: brokers on SASL_SSL (SCRAM "
                       "users, a CA and certificates made at start), ZooKeeper requiring SASL logins and "
                       "holding Kafka's znodes with ACLs; kmon's client properties are written to <dir>/secure")


def _request(args: argparse.Namespace) -> StackRequest:
    return StackRequest(brokers=args.brokers, chroot=args.chroot, fast=args.fast,
                        prometheus=not args.no_prometheus, zk_port=args.zookeeper_port,
                        first_broker_port=args.broker_port, events_cluster=not args.no_events_cluster,
                        secure=args.secure)


def describe(state: StackState) -> str:
    separate = state.events_bootstrap_servers != state.bootstrap_servers
    lines = [f"stack in {state.dir}",
             "  monitored cluster (Kafka in ZooKeeper mode)",
             f"    zookeeper        {state.zk_connect}",
             f"    bootstrap        {state.bootstrap_servers}",
             *([f"    client config    {f.kafka_client} (Kafka), {f.zk_client} (ZooKeeper)"]
               if (f := state.secure_files) else []),
             "  events cluster (kmon's own: one KRaft node)" if separate
             else "  events cluster: the monitored cluster itself (--no-events-cluster)",
             f"    bootstrap        {state.events_bootstrap_servers}"]
    for name, url in (("prometheus", state.url("prometheus")), ("alertmanager", state.url("alertmanager"))):
        if url:
            lines.append(f"  {name:<18} {url}")
    lines.append(f"  kmon exporter      http://127.0.0.1:{state.stream_port}/metrics (scraped by Prometheus)")
    for source, port in state.collector_ports.items():
        lines.append(f"  {'collector ' + source:<18} http://127.0.0.1:{port}/metrics")
    if "stream" in state.components:
        lines.append(f"  {'what happened':<18} kmon history --dir {history_dir(state.dir)}")
    return "\n".join(lines)


def cmd_stack_up(args: argparse.Namespace) -> int:
    stack = LocalStack(args.dir, find_toolchain())
    state = stack.up(_request(args))
    print(describe(state))
    return 0


def cmd_stack_down(args: argparse.Namespace) -> int:
    stack = LocalStack(args.dir, find_toolchain())
    if stack.state is None:
        print(f"no stack in {args.dir}")
        return 0
    stopped = stack.down(purge=args.purge)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}" + (f"; removed {args.dir}" if args.purge else ""))
    return 0


def cmd_stack_status(args: argparse.Namespace) -> int:
    stack = LocalStack(args.dir, find_toolchain())
    state = stack.state
    if state is None:
        print(f"no stack in {args.dir}")
        return 1
    print(describe(state))
    for c in state.components.values():
        print(f"  {c.name:<13} pid {c.pid:<8} {'running' if c.alive() else 'STOPPED':<8} port {c.port:<6} log {c.log}")
    zk = state.components.get("zookeeper")
    if zk and zk.alive():
        print(f"  registered brokers: {stack.registered_brokers()}  controller: {stack.controller_id()}")
    all_up = all(c.alive() for c in state.components.values())
    return 0 if all_up else 1


def cmd_run(args: argparse.Namespace) -> int:
    # everything `run` starts lives only as long as `run` does, even if it is SIGKILLed
    stack = LocalStack(args.dir, find_toolchain(), die_with_parent=True)
    stack.up(_request(args))
    try:
        log.info("starting the monitor: collectors and the Spark app (Spark takes ~20 s to start)")
        start_monitor(stack, MonitorOptions(cluster=args.cluster, trigger_seconds=args.trigger_interval))
        assert stack.state
        print(describe(stack.state), flush=True)
        wait_for_shutdown_signal(lambda: log.info("running; SIGTERM or Ctrl-C stops everything"))
    finally:
        stack.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
