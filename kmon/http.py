"""A small HTTP server for a process's own endpoints (/metrics, /healthz, the stream app's API): each
path answers from a function of the request, in daemon threads, without a log line per request;
behind TLS (mTLS) and basic auth where a web config says so (kmon.web_config)."""
from __future__ import annotations

import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from dataclasses import dataclass
from typing import Callable, Mapping
from urllib.parse import parse_qs, unquote, urlsplit

from kmon.web_config import BasicAuth, WebConfig


@dataclass(frozen=True)
class Request:
    path: str                            # decoded, without the query
    params: Mapping[str, list[str]]      # the query's parameters, each with its values in order
    route: str                           # the route that took it: the path, or the prefix it begins with


Answer = tuple[int, str, bytes]   # status, content type, body
# a route is a path, or a prefix ending in "/" that takes every path beginning with it
Route = Callable[[Request], Answer]
TEXT = "text/plain; charset=utf-8"
HANDSHAKE_S = 10.0   # a client that connects and says nothing holds a thread this long at most
# what a client that speaks plain HTTP to a TLS port is told (as Go's servers, the exporters', tell it)
PLAIN_TO_TLS = (b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                b"Client sent an HTTP request to an HTTPS server.\n")

log = logging.getLogger("kmon.http")


def serve(host: str, port: int, routes: Mapping[str, Route], name: str,
          web: WebConfig | None = None) -> ThreadingHTTPServer:
    """Serve ``routes`` on ``port`` (0: a free one; see ``server_port``) until ``stop``; over TLS and
    with basic auth as ``web`` says."""
    web = web or WebConfig()
    handler = _handler(routes, BasicAuth(web.users))
    try:
        server = _TlsServer((host, port), handler, web) if web.tls else ThreadingHTTPServer((host, port), handler)
    except OSError as e:   # Python says "[Errno 98] Address already in use", naming no address
        raise OSError(e.errno, f"cannot serve {', '.join(routes)} on {host or '0.0.0.0'}:{port}: {e.strerror} "
                               "(--metrics-port, or KMON_METRICS_PORT)") from e
    server.daemon_threads = True   # a request in flight does not hold up the process's exit
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


class _TlsServer(ThreadingHTTPServer):
    """TLS on each connection in its own thread (a slow or silent client never holds up the others),
    a plain-HTTP request answered with a 400 that says so, and client certificates' names checked
    where the web config lists them."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], web: WebConfig) -> None:
        assert web.tls is not None
        self.tls = web.tls
        self.context = web.tls.context()
        super().__init__(address, handler)

    def finish_request(self, request: socket.socket, client_address: tuple) -> None:   # type: ignore[override]
        request.settimeout(HANDSHAKE_S)
        try:
            first = request.recv(1, socket.MSG_PEEK)
            if first and first != b"\x16":   # not a TLS handshake record: plain HTTP, most likely
                request.sendall(PLAIN_TO_TLS)
                return
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as e:   # a client gone, a failed handshake (a wrong certificate)
            log.debug("TLS connection from %s refused: %s", client_address[0], e)
            return
        try:
            if self.tls.client_allowed_sans and not _names_allowed(wrapped.getpeercert(), self.tls.client_allowed_sans):
                log.debug("client certificate of %s names none of client_allowed_sans", client_address[0])
                return
            wrapped.settimeout(None)
            super().finish_request(wrapped, client_address)   # type: ignore[arg-type]
        finally:
            try:
                wrapped.close()
            except OSError:
                pass


def _names_allowed(cert: dict | None, allowed: tuple[str, ...]) -> bool:
    names = {value for kind, value in (cert or {}).get("subjectAltName", ()) if kind in ("DNS", "IP Address", "email", "URI")}
    return bool(names & set(allowed))


def _handler(routes: Mapping[str, Route], auth: BasicAuth) -> type[BaseHTTPRequestHandler]:
    missing = f"not found: try {' or '.join(r + '...' if r.endswith('/') else r for r in routes)}\n".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if not auth.allows(self.headers.get("Authorization")):
                self._answer(401, TEXT, b"Unauthorized\n", ("WWW-Authenticate", 'Basic realm="kmon"'))
                return
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            prefix = path if path in routes else max((r for r in routes if r.endswith("/") and path.startswith(r)),
                                                     key=len, default=None)
            if prefix is None:
                self._answer(404, TEXT, missing)
                return
            request = Request(path, parse_qs(parts.query, keep_blank_values=True), prefix)
            self._answer(*routes[prefix](request))

        def _answer(self, status: int, content_type: str, body: bytes, *headers: tuple[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for header in headers:
                self.send_header(*header)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # scrapes every few seconds would drown the process's own log

    return Handler
