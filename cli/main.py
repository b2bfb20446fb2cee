"""The ``kmon`` command: one entry point, one sub-command per process kind."""
from __future__ import annotations

import argparse
import functools
import logging
import os
import shutil
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path

from cli.monitor import MonitorOptions, checkpoint_dir, start_monitor
from dashboards.cli import add_grafana_flags, grafana_request
from dashboards.push import PushError, PushRequest, without_userinfo
from cli.watch import add_watch_flags, check_flags, default_name, stack_dir, watched_clusters
from kmon import flags, logs
from kmon.config_file import ConfigError, parse_with_file
from kmon.signals import stop_on_signals
from kmon.toolchain import find_toolchain
from kmon.watched import KRAFT, MODE_WORDS, WatchedCluster
from stack.keeper import Keeper, request_start
from stack.local import LocalStack
from stack.state import EVENTS, Component, StackError, StackRequest, StackState
from stack.owner import Busy, holder
from stack.process import pid_alive, wait_until
from streaming.paths import history_dir

log = logging.getLogger("kmon")

DEFAULT_STACK_DIR = ".kmon/stack"
RUN = "kmon run"       # the owner of a stack directory that `kmon stack down|start` may ask
START_WAIT_S = 120.0   # how long `kmon stack start` waits for `kmon run` to start a process
STOP_WAIT_S = 120.0    # how long `kmon stack down` waits for `kmon run` to stop everything
KEEP_EVERY_S = 1.0     # how often `kmon run` looks at its parts


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse_with_file(parser, sys.argv[1:] if argv is None else argv,
                           lambda args: " ".join(filter(None, (args.command, getattr(args, "source", None)))))
    args.argv = list(sys.argv[1:] if argv is None else argv)   # what a supervised child runs again
    logs.configure(args.log_level)
    try:
        return args.handler(args)
    except (RuntimeError, OSError) as e:   # StackError, MissingTool, a server not ready in time, a file
        log.error("%s", e)
        log.debug("where it failed", exc_info=True)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:   # a defect of kmon: one line for the user, the trace at debug
        log.error("kmon %s failed: %s: %s (a defect of kmon: please report it with the trace that "
                  "--log-level debug prints)", args.command, type(e).__name__, e)
        log.debug("the trace", exc_info=True)
        return 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kmon", description=(
        "Live, alertable state of Apache Kafka's control plane. "
        "Collectors -> events topic -> Spark views -> Prometheus."))
    logs.flag(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="the monitor on a local real cluster it starts, or on yours "
                                     "(--bootstrap-servers)",
                         description="Start a local ZooKeeper, Kafka brokers, Prometheus and Alertmanager, "
                                     "the ZooKeeper and consumer-group collectors and the Spark views on them "
                                     "(--kraft: a KRaft cluster of Kafka 4 instead, watched by the KRaft "
                                     "collector); with --bootstrap-servers, watch that existing cluster instead "
                                     "(its mode and control plane found out) with kmon's own parts beside it. "
                                     "Print every address and run until SIGTERM/Ctrl-C, then stop what kmon "
                                     "started. A part of the monitor that dies unasked is started again. Run again "
                                     "in the same --dir, it resumes: the cluster's data, the events, the views' "
                                     "checkpoint and the history are kept (--fresh starts over).")
    _stack_flags(run, dir_default=None)
    _fresh_flag(run)
    flags.flag(run, "--cluster", type=flags.cluster_name,
               help="the cluster's name in events and metrics (default: local; with --bootstrap-servers, the "
                    "first bootstrap host)")
    add_watch_flags(run)
    add_grafana_flags(run, "push kmon's dashboards and a datasource of its Prometheus to this Grafana once "
                           "the monitor runs (as `kmon dashboards push`; the Grafana server must reach "
                           "127.0.0.1, where kmon's Prometheus listens)")
    flags.flag(run, "--trigger-interval", default=None, type=float,
                help="seconds between Spark micro-batches (default: kmon stream's)")
    run.set_defaults(handler=functools.partial(cmd_run, run))

    stack = sub.add_parser("stack", help="start/stop/inspect the local stack",
                           description="A real local Kafka cluster (ZooKeeper mode, or KRaft with --kraft) "
                                       "with Prometheus and Alertmanager, as background processes.")
    ssub = stack.add_subparsers(dest="stack_command", required=True, metavar="ACTION")
    up = ssub.add_parser("up", help="start the stack in the background and wait until it is ready",
                         description="Start the stack in the background and wait until it is ready; a "
                                     "directory that held a stack is resumed (--fresh starts over).")
    _stack_flags(up)
    _fresh_flag(up)
    up.set_defaults(handler=cmd_stack_up)
    down = ssub.add_parser("down", help="stop what `stack up` started, and nothing else")
    _dir_flag(down)
    flags.switch(down, "--purge", help="also delete the stack's data and logs")
    down.set_defaults(handler=cmd_stack_down)
    status = ssub.add_parser("status", help="each process (KRaft: with its roles), and the registered brokers")
    _dir_flag(status)
    status.set_defaults(handler=cmd_stack_status)
    start = ssub.add_parser("start", help="start again a stopped process of the stack (a broker you killed)",
                            description="Start again a process of the stack that is not running, e.g. "
                                        "broker-2, zookeeper or controller-1001 (names: kmon stack status), from "
                                        "its data, and wait until it "
                                        "serves. A stack that `kmon run` drives is asked to do it itself.")
    start.add_argument("name", help="the process, as `kmon stack status` names it")
    _dir_flag(start)
    start.set_defaults(handler=cmd_stack_start)

    from streaming.cli import add_stream_parser
    add_stream_parser(sub)
    from streaming.history_cli import add_history_parser
    add_history_parser(sub)
    from dashboards.cli import add_dashboards_parser
    add_dashboards_parser(sub)
    from cli.collect import add_collect_parser
    add_collect_parser(sub)
    from cli.config_check import add_config_parser
    add_config_parser(sub)
    from cli.mcp_server import add_mcp_parser
    add_mcp_parser(sub, DEFAULT_STACK_DIR)
    return p


def _dir_flag(p: argparse.ArgumentParser, default: str | None = DEFAULT_STACK_DIR) -> None:
    flags.flag(p, "--dir", default=default, type=Path,
               help="directory for the stack's state, data and logs" + (
                   "" if default else f" (default: {DEFAULT_STACK_DIR}; with --bootstrap-servers, "
                                      ".kmon/clusters/<cluster>)"))


def _fresh_flag(p: argparse.ArgumentParser) -> None:
    flags.switch(p, "--fresh", help="delete the stack this --dir held (its cluster data, events, checkpoint "
                                     "and history) and start a new one; without it, that stack is resumed")


def _stack_flags(p: argparse.ArgumentParser, dir_default: str | None = DEFAULT_STACK_DIR) -> None:
    _dir_flag(p, dir_default)
    flags.flag(p, "--brokers", default=3, type=flags.positive_int, help="number of Kafka brokers")
    flags.flag(p, "--chroot", default="", type=flags.chroot,
                help="ZooKeeper chroot for the Kafka tree, e.g. /kafka")
    flags.flag(p, "--zookeeper-port", default=0, type=flags.port, help="ZooKeeper port (0 = a free port)")
    flags.flag(p, "--broker-port", default=0, type=flags.port,
                help="port of broker 1; broker N gets this + N - 1 (0 = free ports)")
    flags.switch(p, "--kraft",
                  help="the monitored cluster in KRaft mode on Kafka 4 (no ZooKeeper): by default each of the "
                       "--brokers nodes is broker and controller, a quorum of that many voters")
    flags.flag(p, "--dedicated-controllers", default=0, type=_controllers, metavar="N",
                help="with --kraft: this many dedicated controller nodes (ids 1001 and up) beside broker-only "
                     "nodes; 0 = each broker is a controller too")
    flags.switch(p, "--fast", help="detect failures in seconds (short ZooKeeper session or KRaft broker "
                                   "session, replica lag; KRaft: frequent metadata snapshots)")
    flags.switch(p, "--no-prometheus", help="do not start Prometheus and Alertmanager")
    flags.switch(p, "--no-events-cluster",
                  help="no separate events cluster: kmon's events travel on the monitored cluster, so kmon "
                       "slows down or goes blind exactly when that cluster fails (for comparisons)")
    flags.switch(p, "--secure",
                  help="secure the monitored cluster as production clusters are: brokers on SASL_SSL (SCRAM "
                       "users, a CA and certificates made at start), ZooKeeper requiring SASL logins and "
                       "holding Kafka's znodes with ACLs, or with --kraft the controller listener on SASL_SSL "
                       "(and one for mTLS) and ACLs granting kmon only DESCRIBE and CLUSTER_ACTION on the "
                       "cluster; kmon's client properties are written to <dir>/secure")


def _controllers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 (no dedicated controllers) or more")
    return value


def _request(args: argparse.Namespace) -> StackRequest:
    return StackRequest(brokers=args.brokers, chroot=args.chroot, fast=args.fast,
                        prometheus=not args.no_prometheus, zk_port=args.zookeeper_port,
                        first_broker_port=args.broker_port, events_cluster=not args.no_events_cluster,
                        secure=args.secure, kraft=args.kraft, controllers=args.dedicated_controllers)


def _shown(path: Path) -> str:
    """A path as a user in this directory would type it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _kmon_command() -> str:
    """How to run this kmon again: the venv's script, where `kmon` on PATH is not this one."""
    script = Path(sys.argv[0]).resolve()
    on_path = shutil.which("kmon")
    if script.name != "kmon" or (on_path and Path(on_path).resolve() == script):
        return "kmon"
    return _shown(script)


def describe(state: StackState) -> str:
    lines = [f"stack in {_shown(state.dir)}"]
    if state.watched:
        lines += [line for w in state.watched for line in _watched_cluster(w)]
    else:
        lines += [*(_kraft_cluster(state) if state.kraft else
                    ["  monitored cluster (Kafka in ZooKeeper mode)", f"    zookeeper        {state.zk_connect}"]),
                  f"    bootstrap        {state.bootstrap_servers}", *_client_configs(state)]
    own = EVENTS in state.components
    lines += ["  events cluster (kmon's own: one KRaft node)" if own else
              "  events cluster (yours; kmon does not start or stop it)" if state.events else
              "  events cluster: the monitored cluster itself (--no-events-cluster)",
              f"    bootstrap        {state.events_bootstrap_servers}",
              *([f"    client config    {state.events_command_config}"] if state.events_command_config else [])]
    for name, url in (("prometheus", state.url("prometheus")), ("alertmanager", state.url("alertmanager"))):
        if url:
            lines.append(f"  {name:<18} {url}")
    web = f"{state.scheme}://127.0.0.1"
    lines.append(f"  kmon exporter      {web}:{state.stream_port}/metrics (scraped by Prometheus)")
    if "stream" in state.components:
        lines.append(f"  {'what is wrong':<18} {web}:{state.stream_port}/api/v1/health "
                     "(the API: README, Asking kmon over HTTP)")
    for key, port in state.collector_ports.items():
        lines.append(f"  {'collector ' + key:<18} {web}:{port}/metrics")
    if state.secure_files:   # kmon's endpoints behind TLS and a password too
        lines.append(f"  {'their credentials':<18} {_shown(state.secure_files.web_client)} "
                     "(kmon mcp --api-credentials-file; curl: --cacert ca.pem -u kmon:<web-kmon.password>)")
    if "stream" in state.components:
        lines.append(f"  {'what happened':<18} {_kmon_command()} history --dir {_shown(history_dir(checkpoint_dir(state.dir)))}")
    return "\n".join(lines)


def _watched_cluster(w: WatchedCluster) -> list[str]:
    """A cluster kmon did not start: how it is watched."""
    if w.mode == KRAFT:
        how = [f"    controllers      {w.controllers} " + (
            "(the metadata log followed: exact)" if w.exact else "(the brokers' metadata sampled)")]
    else:
        how = [f"    zookeeper        {w.zookeeper}"]
    return [f"  monitored cluster {w.name} (yours: {MODE_WORDS[w.mode]}; kmon does not start or stop it)",
            f"    cluster id       {w.cluster_id}", *how,
            f"    bootstrap        {w.bootstrap_servers}",
            *([f"    client config    {w.command_config}"] if w.command_config else [])]


def _kraft_cluster(state: StackState) -> list[str]:
    how = (f"{state.kraft_controllers} controllers, {state.brokers} brokers" if state.kraft_controllers
           else f"{state.brokers} nodes, each broker and controller")
    return [f"  monitored cluster (Kafka 4 in KRaft mode: {how})",
            f"    cluster id       {state.cluster_id}",
            f"    controllers      {state.controllers}",
            *([f"    controllers mTLS {state.controllers_mtls}"] if state.controllers_mtls else [])]


def _client_configs(state: StackState) -> list[str]:
    """The client properties files of a secure stack, for kmon's --command-config and the Kafka tools'."""
    if not (f := state.secure_files):
        return []
    if state.kraft:
        return [f"    client config    {f.kafka_client} (SASL), {f.kafka_client_mtls} (mTLS, controllers)"]
    return [f"    client config    {f.kafka_client} (Kafka), {f.zk_client} (ZooKeeper)"]


def _roles(c: Component) -> str:
    """A KRaft node's roles (broker, controller or both), from its name and listeners; "" for the rest."""
    return ",".join(role for role, has in (("broker", c.name.startswith("broker-")),
                                           ("controller", c.controller_port > 0)) if has)


def cmd_stack_up(args: argparse.Namespace) -> int:
    stack = LocalStack(args.dir, find_toolchain(), command="kmon stack up")
    state = stack.up(_request(args), fresh=args.fresh)
    print(describe(state))
    return 0


def cmd_stack_down(args: argparse.Namespace) -> int:
    owner = holder(args.dir.resolve())
    if owner is not None and owner.command == RUN:
        # its keeper would start again what is stopped under it: it stops everything itself
        print(f"asking {RUN} (pid {owner.pid}) to stop everything it started", flush=True)
        os.kill(owner.pid, signal.SIGTERM)
        wait_until(lambda: not pid_alive(owner.pid), STOP_WAIT_S, f"{RUN} (pid {owner.pid}) stopping")
        print(f"{RUN} (pid {owner.pid}) stopped")
        if not args.purge:
            return 0
    elif owner is not None:
        raise StackError(f"the stack in {args.dir} is driven by {owner.command} (pid {owner.pid}): stop that")
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
    if (owner := holder(stack.dir)) is not None:
        print(f"  driven by {owner.command} (pid {owner.pid})")
    for c in state.components.values():
        roles = f" roles {_roles(c):<17}" if state.kraft and _roles(c) else ""
        print(f"  {c.name:<15} pid {c.pid:<8} {'running' if c.alive() else 'STOPPED':<8} port {c.port:<6}{roles} "
              f"log {c.log}")
    zk = state.components.get("zookeeper")
    if zk and zk.alive():
        print(f"  registered brokers: {stack.registered_brokers()}  controller: {stack.controller_id()}")
    elif state.kraft:   # the active controller is the quorum's leader, which no broker's metadata names
        print(f"  registered brokers: {stack.registered_brokers()}  controller quorum: {state.controllers}")
    all_up = all(c.alive() for c in state.components.values())
    return 0 if all_up else 1


def cmd_stack_start(args: argparse.Namespace) -> int:
    stack = LocalStack(args.dir, find_toolchain(), command="kmon stack start")
    if stack.state is None:
        raise StackError(f"no stack in {args.dir}")
    c = stack.component(args.name)
    if c.alive():
        print(f"{c.name} is already running (pid {c.pid})")
        return 0
    owner = holder(stack.dir)
    if owner is not None and owner.command == RUN:
        request_start(stack.dir, c.name)   # only the owner may add to its processes

        def restarted() -> Component | None:
            state = StackState.load(stack.dir)
            now = state.components.get(c.name) if state else None
            return now if now and now.pid != c.pid and now.alive() else None
        now = wait_until(restarted, START_WAIT_S, f"{RUN} (pid {owner.pid}) starting {c.name} (see its output "
                         f"and {c.log})", interval=0.5)
        print(f"{c.name} started (pid {now.pid}) by {RUN} (pid {owner.pid}); its log: {now.log}")
        return 0
    try:
        stack.owner.acquire("kmon stack start")
    except Busy as e:
        raise StackError(f"the stack in {args.dir} is {e}: ask that") from None
    try:
        stack.start(c.name)
    finally:
        stack.owner.release()
    print(f"{c.name} started (pid {c.pid}); its log: {c.log}")
    return 0


def cmd_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        check_flags(args)
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    grafana = grafana_request(args, None, RUN) if args.grafana_url else None   # bad credentials end it here
    if not args.config:
        args.cluster = args.cluster or (default_name(args.bootstrap_servers) if args.bootstrap_servers else "local")
    args.dir = stack_dir(args, DEFAULT_STACK_DIR)
    # everything `run` starts lives only as long as `run` does, even if it is SIGKILLed
    stack = LocalStack(args.dir, find_toolchain(), die_with_parent=True, command=RUN)
    # SIGTERM while starting unwinds as Ctrl-C does: what was started is stopped
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    events = {"events": args.events_bootstrap_servers or "",
              "events_command_config": str(args.events_command_config.resolve()) if args.events_command_config else ""}
    request = replace(_request(args), **events)
    if args.bootstrap_servers or args.config:
        try:
            watched = watched_clusters(args)
        except ConfigError as e:
            raise StackError(str(e)) from None
        request = StackRequest(fast=args.fast, prometheus=not args.no_prometheus, watched=watched,
                               config_file=str(args.config.resolve()) if args.config else "", **events)
    stack.up(request, fresh=args.fresh)   # on failure it stops what it started, and only that
    try:
        log.info("starting the monitor: collectors and the Spark app (Spark takes ~20 s to start)")
        start_monitor(stack, MonitorOptions(cluster=args.cluster, events_topic=args.events_topic,
                                            trigger_seconds=args.trigger_interval))
        assert stack.state
        print(describe(stack.state), flush=True)
        if grafana:
            _push_dashboards(replace(grafana, prometheus_url=stack.state.url("prometheus")))
        stopped = threading.Event()
        stop_on_signals(stopped)
        log.info("running; SIGTERM or Ctrl-C stops what kmon started" +
                 (" (nothing of the watched clusters)" if stack.state.watched else ""))
        keeper = Keeper(stack)
        while not stopped.wait(KEEP_EVERY_S):
            keeper.check()
    finally:
        # also after a Ctrl-C while the monitor was starting: the user reads that nothing is left
        stack.down()
        log.info("stopped everything kmon run started; run it again to resume (--fresh starts over)")
    return 0


def _push_dashboards(request: PushRequest) -> None:
    """The dashboards into the user's Grafana; a Grafana that refuses leaves kmon running, and says so."""
    from dashboards.grafana_api import push   # its HTTP stack only where a push is asked (push.py)

    try:
        push(request, report=lambda line: log.info("grafana: %s", line))
    except PushError as e:
        log.warning("could not push the dashboards to Grafana: %s; kmon runs on, and `kmon dashboards push "
                    "--grafana-url %s` pushes them later", e, without_userinfo(request.grafana_url))


if __name__ == "__main__":
    sys.exit(main())
