"""A collector's own metrics and health, served over HTTP (``/metrics``, ``/healthz``).

Metric names come from :mod:`kmon.metrics` (``family="collector"``) and nothing else, so
dashboards and alerts can rely on them; every series carries the ``cluster`` label.
All state lives in a :class:`Telemetry` object handed to the parts that report to it.
"""
from __future__ import annotations

import logging
from http.server import ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from kmon import http
from kmon.metrics import BY_NAME, CATALOG

log = logging.getLogger("kmon.collector.telemetry")

# A health check returns None when fine, else the reason the collector is unhealthy.
HealthCheck = Callable[[], "str | None"]

_TYPES = {"counter": Counter, "gauge": Gauge}


class Telemetry:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.registry = CollectorRegistry()
        self._metrics = {spec.name: _TYPES[spec.type](spec.name, spec.help, spec.all_labels, registry=self.registry)
                         for spec in CATALOG if spec.family == "collector"}
        self._checks: list[HealthCheck] = []
        self._server: ThreadingHTTPServer | None = None

    def metric(self, name: str, **labels: str) -> Counter | Gauge:
        """The series ``name{cluster=<this cluster>, **labels}``; unknown names raise KeyError."""
        return self._metrics[name].labels(cluster=self.cluster, **labels)

    def forget(self, name: str, **labels: str) -> None:
        """Drop the series ``name{cluster=<this cluster>, **labels}`` (what it was about is gone)."""
        try:
            self._metrics[name].remove(self.cluster, *(labels[label] for label in BY_NAME[name].labels))
        except KeyError:   # never set
            pass

    def add_health_check(self, check: HealthCheck) -> None:
        self._checks.append(check)

    def problems(self) -> list[str]:
        return [reason for check in self._checks if (reason := check()) is not None]

    def serve(self, port: int, host: str = "") -> int:
        """Serve /metrics and /healthz on ``port`` (0 = a free one) in a daemon thread; returns the port."""
        self._server = http.serve(host, port, {"/metrics": self._metrics_page, "/healthz": self._health_page},
                                  "kmon-telemetry-http")
        bound = self._server.server_address[1]
        log.info("metrics on http://%s:%d/metrics, health on /healthz", host or "0.0.0.0", bound)
        return bound

    def close(self) -> None:
        if self._server is not None:
            http.stop(self._server)
            self._server = None

    def _metrics_page(self) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    def _health_page(self) -> tuple[int, str, bytes]:
        problems = self.problems()
        body = "ok\n" if not problems else "unhealthy: " + "; ".join(problems) + "\n"
        return 503 if problems else 200, http.TEXT, body.encode()

