"""/metrics of the stream app: the exposition the driver rendered after the latest batch; beside it,
on the same port, the API (streaming/api.py).

A scrape renders only the ages (time in state) and joins the rendered parts: its cost does not
grow with the cluster when nothing changed (see streaming.views.exposition).
"""
from __future__ import annotations

import time
from http.server import ThreadingHTTPServer
from typing import Callable, Mapping

from kmon import http
from kmon.web_config import WebConfig
from streaming.published import LatestPublished
from streaming.views.exposition import CONTENT_TYPE


def serve_metrics(host: str, port: int, holder: LatestPublished, web: WebConfig | None = None,
                  clock: Callable[[], float] = time.time,
                  more: Mapping[str, http.Route] | None = None) -> ThreadingHTTPServer:
    """Serve /metrics, and the ``more`` routes beside it, with the TLS and basic auth of ``web`` (stop
    with kmon.http.stop)."""
    def metrics(request: http.Request) -> http.Answer:
        return 200, CONTENT_TYPE, holder.get().exposition.body(int(clock() * 1000))
    return http.serve(host, port, {"/metrics": metrics, **(more or {})}, "kmon-metrics", web)
