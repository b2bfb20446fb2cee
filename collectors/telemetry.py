"""A collector's own metrics and health, served over HTTP (``/metrics``, ``/healthz``).

Metric names come from :mod:`kmon.metrics` (``family="collector"``) and nothing else, so
dashboards and alerts can rely on them; every series carries the ``cluster`` label.
All state lives in a :class:`Telemetry` object handed to the parts that report to it.
"""
from __future__ import annotations

import logging
import sys
import time
from http.server import ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from kmon import http
from kmon.metrics import BY_NAME, CATALOG
from kmon.web_config import WebConfig

log = logging.getLogger("kmon.collector.telemetry")

# A health check returns None when fine, else the reason the collector is unhealthy.
HealthCheck = Callable[[], "str | None"]

_TYPES = {"counter": Counter, "gauge": Gauge}
SURVIVED_SAID_S = 60.0   # /healthz says an unexpected error this long after it


class Telemetry:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.registry = CollectorRegistry()
        self._metrics = {spec.name: _TYPES[spec.type](spec.name, spec.help, spec.all_labels, registry=self.registry)
                         for spec in CATALOG if spec.family == "collector"}
        self._last_error: tuple[float, str] | None = None   # (monotonic time, what failed)
        self._checks: list[HealthCheck] = [self._recent_error]
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

    def survived(self, source: str, what: str, logger: logging.Logger) -> None:
        """Called in an ``except`` block of a collector's loop that goes on after an unexpected error
        (a defect): the error logged with its trace, counted, and said in /healthz for a while."""
        error = sys.exc_info()[1]
        logger.exception("unexpected error %s; going on", what)
        self.metric("kmon_collector_errors_total", source=source).inc()
        self._last_error = (time.monotonic(), f"unexpected error {what}: {type(error).__name__}: {error}")

    def _recent_error(self) -> str | None:
        if self._last_error is None or time.monotonic() - self._last_error[0] > SURVIVED_SAID_S:
            return None
        return f"{self._last_error[1]} ({time.monotonic() - self._last_error[0]:.0f} s ago; see the log)"

    def add_health_check(self, check: HealthCheck) -> None:
        self._checks.append(check)

    def problems(self) -> list[str]:
        return [reason for check in self._checks if (reason := check()) is not None]

    def serve(self, port: int, host: str = "", web: WebConfig | None = None) -> int:
        """Serve /metrics and /healthz on ``port`` (0 = a free one) in a daemon thread, with the TLS and
        basic auth of ``web``; returns the port."""
        web = web or WebConfig()
        self._server = http.serve(host, port, {"/metrics": self._metrics_page, "/healthz": self._health_page},
                                  "kmon-telemetry-http", web)
        bound = self._server.server_address[1]
        log.info("metrics on %s://%s:%d/metrics, health on /healthz%s", web.scheme, host or "0.0.0.0", bound,
                 web.describe())
        return bound

    def close(self) -> None:
        if self._server is not None:
            http.stop(self._server)
            self._server = None

    def _metrics_page(self, request: http.Request) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    def _health_page(self, request: http.Request) -> tuple[int, str, bytes]:
        problems = self.problems()
        body = "ok\n" if not problems else "unhealthy: " + "; ".join(problems) + "\n"
        return 503 if problems else 200, http.TEXT, body.encode()

