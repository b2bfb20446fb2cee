"""What an idle `kmon stream` costs: CPU of its processes (driver, Spark's JVM, Python workers)
and of the broker it polls, while nothing changes, at several trigger intervals in one run.

A shorter trigger makes a change wait less for its batch, but Spark's Kafka source asks the
events cluster for its end offsets at every trigger, batch or not: this is what that costs.
"""
from __future__ import annotations

import time
from typing import Callable

from confluent_kafka.admin import AdminClient, NewTopic

from bench.support.harness import check_alive, kmon_argv, local_stack, process
from bench.support.measure import cpu_seconds, descendants, wait
from kmon.events import EVENTS_TOPIC
from stack.process import free_port

WARMUP_S = 15.0   # the query's first batches and the workers' start are not idle


def _cpu(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            out[pid] = cpu_seconds(pid)
        except OSError:   # exited meanwhile
            continue
    return out


def run(triggers: list[float], seconds: float, progress: Callable[[str], None]) -> list[dict]:
    rows = []
    with local_stack(1) as stack:
        assert stack.state
        admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers})
        admin.create_topics([NewTopic(EVENTS_TOPIC, 1, 1)])[EVENTS_TOPIC].result(timeout=30)
        del admin   # no client of ours left to complain when the stack stops
        broker = stack.component("broker-1").pid
        for trigger in triggers:
            port = free_port()
            argv = kmon_argv("stream", "--bootstrap-servers", stack.state.bootstrap_servers,
                             "--events-topic", EVENTS_TOPIC, "--checkpoint", str(stack.dir / f"checkpoint-{trigger}"),
                             "--metrics-host", "127.0.0.1", "--metrics-port", str(port), "--master", "local[2]",
                             "--trigger-interval", str(trigger))
            log = stack.dir / f"stream-{trigger}.log"
            with process(argv, log, f"--metrics-port {port}") as proc:
                progress(f"trigger {trigger} s: starting kmon stream")
                wait(lambda: check_alive(proc, "kmon stream") or f"streaming {EVENTS_TOPIC} from" in log.read_text(),
                     300, "the query running", 0.5)
                time.sleep(WARMUP_S)
                progress(f"trigger {trigger} s: measuring {seconds:g} s of idle")
                before = _cpu([proc.pid, *descendants(proc.pid), broker])
                time.sleep(seconds)
                after = _cpu([proc.pid, *descendants(proc.pid), broker])
                check_alive(proc, "kmon stream")
            spent = {pid: cpu - before.get(pid, 0.0) for pid, cpu in after.items()}
            kmon = sum(cpu for pid, cpu in spent.items() if pid != broker)
            rows.append({"trigger_s": trigger, "idle_s": seconds,
                         "kmon_stream_cpu_cores": kmon / seconds,
                         "broker_cpu_cores": spent.get(broker, 0.0) / seconds})
    return rows
