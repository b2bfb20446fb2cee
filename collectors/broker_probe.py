"""Whether each broker answers, asked by kmon itself every second, before Kafka's own verdict.

Kafka calls a broker dead when its ZooKeeper session (or, under KRaft, its broker session) expires:
6 to 18 s after a crash, never while the process hangs but keeps its session. Until then the
registration says nothing. So the collector that follows the registrations (ZooKeeper's or the
metadata log's) also sends each registered broker an ApiVersions request on one of its listeners
every ``interval_s``: a broker that refuses, resets or stays silent past ``timeout_s`` is
*unreachable from kmon*, which is not yet dead to Kafka, and says so in its own metric
(``kmon_collector_broker_reachable``), with how long the latest probe took.

It learns the brokers from the collector's own broker events (:meth:`BrokerProbe.watching` wraps
the collector's sink), so it needs nothing else from the collector. A broker whose registration
went away is probed ``forget_after_s`` longer: Kafka's verdict (BrokerDown) takes over meanwhile.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from collectors.protocol import EventSink
from collectors.telemetry import Telemetry
from kmon.events import BrokerState, Event
from kmon.reachability import any_tls, kafka_probe

log = logging.getLogger("kmon.collector.probe")

# the listener probed, by its security protocol: plaintext first (no handshake to time)
_PREFERRED = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    tls: bool


def target_of(state: BrokerState) -> Target | None:
    """Pure: the listener of a registration to probe (None: it names none kmon can speak to)."""
    by_protocol = {e.protocol: e for e in reversed(state.endpoints)}
    for protocol in _PREFERRED:
        if (e := by_protocol.get(protocol)) is not None:
            return Target(e.host, e.port, tls=protocol.endswith("SSL"))
    if state.host and state.port and state.port > 0:
        return Target(state.host, state.port, tls=False)
    return None


class BrokerProbe:
    def __init__(self, telemetry: Telemetry, interval_s: float = 1.0, timeout_s: float = 1.0,
                 forget_after_s: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._telemetry = telemetry
        self._interval_s, self._timeout_s, self._forget_after_s = interval_s, timeout_s, forget_after_s
        self._clock = clock
        self._lock = threading.Lock()
        self._targets: dict[int, Target] = {}
        self._gone_at: dict[int, float] = {}   # broker -> when its registration went away
        self._unreachable: dict[int, str] = {}   # broker -> why, while it does not answer
        self._tls = any_tls()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kmon-broker-probe", daemon=True)

    def watching(self, sink: EventSink) -> EventSink:
        """``sink``, with every broker event seen by this probe on the way."""
        return _Watching(self, sink)

    def observe(self, event: Event) -> None:
        if event.kind != "broker":
            return
        broker = int(event.entity.partition(":")[2])
        with self._lock:
            target = target_of(event.data) if event.data is not None else None
            if target is not None:
                self._targets[broker] = target
                self._gone_at.pop(broker, None)
            elif broker in self._targets:
                self._gone_at.setdefault(broker, self._clock())

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(self._timeout_s + 5)

    def _run(self) -> None:
        with ThreadPoolExecutor(max_workers=16, thread_name_prefix="kmon-probe") as pool:
            while not self._stopping.is_set():
                started = self._clock()
                self._round(pool)
                self._stopping.wait(max(0.0, self._interval_s - (self._clock() - started)))

    def _round(self, pool: ThreadPoolExecutor) -> None:
        with self._lock:
            for broker in [b for b, at in self._gone_at.items() if self._clock() - at > self._forget_after_s]:
                del self._targets[broker], self._gone_at[broker]
                self._unreachable.pop(broker, None)
                for name in ("kmon_collector_broker_reachable", "kmon_collector_broker_probe_seconds"):
                    self._telemetry.forget(name, broker=str(broker))
            targets = dict(self._targets)
        answers = pool.map(self._probe, targets.values())
        for (broker, target), (why, took) in zip(targets.items(), answers):
            self._telemetry.metric("kmon_collector_broker_reachable", broker=str(broker)).set(why is None)
            self._telemetry.metric("kmon_collector_broker_probe_seconds", broker=str(broker)).set(took)
            self._say(broker, target, why)

    def _probe(self, target: Target) -> tuple[str | None, float]:
        started = time.monotonic()
        why = kafka_probe(target.host, target.port, self._timeout_s, self._tls if target.tls else None)
        return why, time.monotonic() - started

    def _say(self, broker: int, target: Target, why: str | None) -> None:
        """A line when a broker stops answering and when it answers again, none in between."""
        before = self._unreachable.get(broker)
        if why is not None and before is None:
            self._unreachable[broker] = why
            log.warning("broker %d (%s:%d) does not answer kmon: %s", broker, target.host, target.port, why)
        elif why is None and before is not None:
            del self._unreachable[broker]
            log.info("broker %d (%s:%d) answers kmon again", broker, target.host, target.port)


@dataclass(frozen=True)
class _Watching:
    probe: BrokerProbe
    sink: EventSink

    def publish(self, event: Event) -> None:
        self.probe.observe(event)
        self.sink.publish(event)
