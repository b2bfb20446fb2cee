"""A collector's own metrics and health, served over HTTP (``/metrics``, ``/healthz``).

Metric names come from :mod:`kmon.metrics` (``view="collector"``) and nothing else, so
dashboards and alerts can rely on them; every series carries the ``cluster`` label.
All state lives in a :class:`Telemetry` object handed to the parts that report to it.
"""
from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from kmon.metrics import CATALOG

log = logging.getLogger("kmon.collector.telemetry")

# A health check returns None when fine, else the reason the collector is unhealthy.
HealthCheck = Callable[[], "str | None"]

_TYPES = {"counter": Counter, "gauge": Gauge}


class Telemetry:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.registry = CollectorRegistry()
        self._metrics = {spec.name: _TYPES[spec.type](spec.name, spec.help, spec.all_labels, registry=self.registry)
                         for spec in CATALOG if spec.view == "collector"}
        self._checks: list[HealthCheck] = []
        self._server: ThreadingHTTPServer | None = None

    def metric(self, name: str, **labels: str) -> Counter | Gauge:
        """The series ``name{cluster=<this cluster>, **labels}``; unknown names raise KeyError."""
        return self._metrics[name].labels(cluster=self.cluster, **labels)

    def add_health_check(self, check: HealthCheck) -> None:
        self._checks.append(check)

    def problems(self) -> list[str]:
        return [reason for check in self._checks if (reason := check()) is not None]

    def serve(self, port: int, host: str = "") -> int:
        """Serve /metrics and /healthz on ``port`` (0 = a free one) in a daemon thread; returns the port."""
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="kmon-telemetry-http", daemon=True).start()
        bound = self._server.server_address[1]
        log.info("metrics on http://%s:%d/metrics, health on /healthz", host or "0.0.0.0", bound)
        return bound

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(telemetry: Telemetry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, generate_latest(telemetry.registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                problems = telemetry.problems()
                body = "ok\n" if not problems else "unhealthy: " + "; ".join(problems) + "\n"
                self._reply(503 if problems else 200, body.encode(), "text/plain; charset=utf-8")
            else:
                self._reply(404, b"not found: try /metrics or /healthz\n", "text/plain; charset=utf-8")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every few seconds would drown the collector's own log

    return Handler
