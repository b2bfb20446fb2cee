"""A small HTTP server for a process's own endpoints (/metrics, /healthz): each path answers
from a function, in daemon threads, without a log line per request."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Mapping
from urllib.parse import urlsplit

Route = Callable[[], "tuple[int, str, bytes]"]   # -> status, content type, body
TEXT = "text/plain; charset=utf-8"


def serve(host: str, port: int, routes: Mapping[str, Route], name: str) -> ThreadingHTTPServer:
    """Serve ``routes`` on ``port`` (0: a free one; see ``server_port``) until ``stop``."""
    try:
        server = ThreadingHTTPServer((host, port), _handler(routes))
    except OSError as e:   # Python says "[Errno 98] Address already in use", naming no address
        raise OSError(e.errno, f"cannot serve {', '.join(routes)} on {host or '0.0.0.0'}:{port}: {e.strerror} "
                               "(--metrics-port, or KMON_METRICS_PORT)") from e
    server.daemon_threads = True   # a request in flight does not hold up the process's exit
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def _handler(routes: Mapping[str, Route]) -> type[BaseHTTPRequestHandler]:
    missing = f"not found: try {' or '.join(routes)}\n".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            route = routes.get(urlsplit(self.path).path)
            status, content_type, body = route() if route is not None else (404, TEXT, missing)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # scrapes every few seconds would drown the process's own log

    return Handler
