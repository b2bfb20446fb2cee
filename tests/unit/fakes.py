"""Stand-ins the unit tests share for what is not under test."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from kazoo.protocol.states import ZnodeStat

from collectors.zk.tree import Read, Round, ZkTree
from dashboards.push import DATASOURCE_UID
from kmon.events import Event


class ListSink:
    """An EventSink that keeps every event published to it, in order (publishers may be threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[Event] = []

    def publish(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def taken(self) -> list[Event]:
        """A copy of the events so far, safe to read while publishers go on."""
        with self._lock:
            return list(self.events)


class Clock:
    """A monotonic clock the test moves by hand (``clock.now += 5``)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeGrafana(BaseHTTPRequestHandler):
    """Just the endpoints `push` uses, with Grafana's status codes; requests are recorded."""

    token = "good-token"
    requests: list[tuple[str, str, Any]]
    objects: dict[str, Any]

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.requests.append((method, self.path, body))
        if self.path == "/api/health":
            return self._send(200, {"database": "ok", "version": "11.0.0"})
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            return self._send(401, {"message": "Unauthorized"})
        key = f"{method} {self.path}"
        if method == "GET":
            found = self.objects.get(self.path)
            return self._send(200, found) if found else self._send(404, {"message": "not found"})
        if key == "POST /api/folders":
            self.objects[f"/api/folders/{body['uid']}"] = body
            return self._send(200, body)
        if key in ("POST /api/datasources", f"PUT /api/datasources/uid/{DATASOURCE_UID}"):
            self.objects[f"/api/datasources/uid/{DATASOURCE_UID}"] = {**body, "id": 7}
            return self._send(200, {"message": "ok"})
        if key == "POST /api/dashboards/db":
            uid = body["dashboard"]["uid"]
            return self._send(200, {"status": "success", "version": 1, "url": f"/d/{uid}/x", "uid": uid})
        return self._send(404, {"message": f"unexpected {key}"})

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def do_PUT(self) -> None:
        self._answer("PUT")

    def log_message(self, *_args: object) -> None:
        pass


class FakeZk:
    """Just enough of ZooKeeper's bookkeeping (zxids, versions, pzxid) to drive a ZkTree."""

    def __init__(self) -> None:
        self.zxid = 0
        self.nodes: dict[str, list[int | bytes]] = {"/": [b"", 0, 0, 0, 0]}  # data, czxid, mzxid, version, pzxid

    def set(self, path: str, data: bytes | dict) -> None:
        raw = json.dumps(data).encode() if isinstance(data, dict) else data
        self.zxid += 1
        if path in self.nodes:
            node = self.nodes[path]
            node[0], node[2], node[3] = raw, self.zxid, node[3] + 1
            return
        parent = path.rpartition("/")[0] or "/"
        if parent not in self.nodes:
            self.set(parent, b"")
            self.zxid += 1
        self.nodes[path] = [raw, self.zxid, self.zxid, 0, self.zxid]
        self.nodes[parent][4] = self.zxid

    def delete(self, path: str) -> None:
        for child in self.children(path):
            self.delete(f"{path}/{child}")
        self.zxid += 1
        del self.nodes[path]
        self.nodes[path.rpartition("/")[0] or "/"][4] = self.zxid

    def children(self, path: str) -> list[str]:
        return sorted(p.rpartition("/")[2] for p in self.nodes if p.rpartition("/")[0] == path)

    def stat(self, path: str) -> ZnodeStat:
        _, czxid, mzxid, version, pzxid = self.nodes[path]
        return ZnodeStat(czxid, mzxid, 0, mzxid * 10, version, 0, 0, 0, 0, 0, pzxid)

    def absence_zxid(self, path: str) -> int:
        while path not in self.nodes:
            path = path.rpartition("/")[0] or "/"
        return self.nodes[path][4]

    def read(self, tree: ZkTree, rnd: Round, meanwhile: Callable[[str], None] = lambda path: None) -> None:
        """The reads ZkCollector._read makes, without watches; what each means is the tree's.
        ``meanwhile(path)`` runs before each read: the cluster changing between two reads."""
        while batch := rnd.take(100):
            for path in batch:
                meanwhile(path)
                mode = tree.read_mode(path)
                if mode is Read.IGNORE:
                    continue
                found = None
                if path in self.nodes:
                    found = (self.children(path) if mode is Read.LIST else self.nodes[path][0], self.stat(path))
                if tree.on_read(path, mode, found, rnd):
                    tree.on_absent(path, self.absence_zxid(path), rnd)
