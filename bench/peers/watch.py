"""What the systems say while the faults run, recorded from outside as an on-call person sees it.

One thread polls Prometheus' rules API (kmon's and the peers' alerts, told apart by their
rule group) and Burrow's status of the groups a fault names (where Burrow runs), twice a second, and keeps
every alert instance (pending since Prometheus' ``activeAt``, firing from the first poll
that saw it so) and every change of a Burrow group status.
"""
from __future__ import annotations

import threading
import time
import urllib.error
from dataclasses import dataclass, field
from datetime import datetime

from bench.peers.parts import KAFKA_CLUSTER, KLAG_GROUP, PEER_GROUP, get_json
from bench.support.polling import Polling

KMON, JMX, BURROW, KLAG = "kmon", "jmx", "burrow", "klag"
SYSTEMS = (KMON, JMX, BURROW, KLAG)
RULE_GROUPS = {PEER_GROUP: JMX, KLAG_GROUP: KLAG}   # a peer's rule group -> the system; kmon's otherwise
HEALTHY = ("OK", "HTTP 404")   # Burrow's status of a healthy group, or of one it does not know yet
POLL_S = 0.5


@dataclass
class Alert:
    system: str
    name: str
    labels: dict[str, str]
    active_at: float            # wall clock: when Prometheus first found the condition true
    fired_at: float | None = None   # first poll that saw it firing
    last_seen: float = 0.0

    def describe(self) -> str:
        shown = {k: v for k, v in self.labels.items() if k not in ("alertname", "severity", "cluster", "kafka_cluster")}
        return self.name + (f"{{{', '.join(f'{k}={v}' for k, v in sorted(shown.items()))}}}" if shown else "")


@dataclass
class BurrowStatus:
    group: str
    changes: list[tuple[float, str]] = field(default_factory=list)   # (wall clock, status) at each change


def _wall(iso: str) -> float:
    """Prometheus' RFC 3339 time (nanoseconds, 'Z') as epoch seconds."""
    head, _, frac = iso.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + (float("0." + frac) if frac else 0.0)


class Recorder(Polling):
    def __init__(self, prometheus: str, burrow: str | None) -> None:
        """``burrow``: its HTTP API, None where it does not run (a KRaft cluster)."""
        super().__init__("peers-recorder", join_s=10)
        self.prometheus, self.burrow = prometheus, burrow
        self.alerts: dict[tuple, Alert] = {}
        self.groups: dict[str, BurrowStatus] = {}
        self.errors: list[str] = []   # polls that failed, with why (a peer that stops answering is a finding)
        self._lock = threading.Lock()

    def watch_group(self, group: str) -> None:
        with self._lock:
            self.groups.setdefault(group, BurrowStatus(group))

    def recorded(self) -> list[Alert]:
        with self._lock:
            return list(self.alerts.values())

    def active(self, now: float | None = None) -> list[Alert]:
        """Alert instances pending or firing at the last poll."""
        cutoff = (now or time.time()) - 3 * POLL_S
        return [a for a in self.recorded() if a.last_seen >= cutoff]

    def burrow_owners(self, group: str) -> str:
        """What Burrow says of the group's partitions' consumers (client id, host), in a line."""
        try:   # /lag: every partition (/status lists only the ones in trouble)
            body = get_json(f"{self.burrow}/v3/kafka/{KAFKA_CLUSTER}/consumer/{group}/lag")["status"]
        except (OSError, ValueError, KeyError) as e:
            return f"no status ({e})"
        parts = body.get("partitions") or []
        owners = sorted({(p.get("owner") or "", p.get("client_id") or "") for p in parts})
        return (f"status {body.get('status')}, total lag {body.get('totallag')}, "
                f"{len(parts)} partitions, owners {owners}")

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self._poll_alerts()
            self._poll_burrow()

    def _poll_alerts(self) -> None:
        try:
            groups = get_json(f"{self.prometheus}/api/v1/rules?type=alert")["data"]["groups"]
        except (OSError, ValueError, KeyError) as e:
            self.errors.append(f"{time.strftime('%H:%M:%S')} prometheus: {e}")
            return
        now = time.time()
        with self._lock:
            for g in groups:
                system = RULE_GROUPS.get(g["name"], KMON)
                for rule in g["rules"]:
                    for a in rule.get("alerts", []):
                        labels = dict(a["labels"])
                        key = (system, rule["name"], frozenset(labels.items()), a["activeAt"])
                        seen = self.alerts.get(key)
                        if seen is None:
                            seen = self.alerts[key] = Alert(system, rule["name"], labels, _wall(a["activeAt"]))
                        seen.last_seen = now
                        if a["state"] == "firing" and seen.fired_at is None:
                            seen.fired_at = now

    def _poll_burrow(self) -> None:
        if self.burrow is None:
            return
        with self._lock:
            watched = list(self.groups.values())
        for status in watched:
            try:
                body = get_json(f"{self.burrow}/v3/kafka/{KAFKA_CLUSTER}/consumer/{status.group}/status")
                now_status = body["status"]["status"]
            except urllib.error.HTTPError as e:   # 404 until Burrow knows the group
                now_status = f"HTTP {e.code}"
            except (OSError, ValueError, KeyError) as e:
                self.errors.append(f"{time.strftime('%H:%M:%S')} burrow: {e}")
                continue
            with self._lock:
                if not status.changes or status.changes[-1][1] != now_status:
                    status.changes.append((time.time(), now_status))
