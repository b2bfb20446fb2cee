"""The stream app's HTTP API, on the port of its /metrics: what is wrong now and what changed, as JSON
(README, "Asking kmon over HTTP").

- ``GET /api/v1/health[?cluster=C]``: per cluster, the controller, the brokers up, down and fenced,
  the partitions' counts, the groups whose consumers are not ok, and each problem with since when;
- ``GET /api/v1/history``: ``kmon history``'s filters and its ``--json`` rows, a page at a time;
- ``GET /api/v1/entities/<cluster>/<entity>``: one entity's record and its latest transitions.

The views answer on their own thread between two batches (streaming.view_thread's ask), the history
from its files (streaming.history_query's reader); a scrape of /metrics reads neither.
"""
from __future__ import annotations

import base64
import binascii
import threading
import time
from typing import Any, Callable, Mapping, TypeVar
from urllib.parse import urlencode

import orjson

from kmon import http
from kmon.codec import to_json
from kmon.history import order_key
from streaming.fold.entity import EntityRecord
from streaming.history_query import Asked, HistoryReader, iso, query_of, row_json
from streaming.views import Views
from streaming.views.health import ClusterHealth

PREFIX = "/api/v1"
JSON = "application/json"
ASK_TIMEOUT_S = 10.0          # how long a request waits for the views (busy with a backlog's batch)
HISTORY_LIMIT = (500, 10_000)     # rows per page: the default, the most
PROBLEMS_LIMIT = (1_000, 100_000)  # problems per cluster: the default, the most
TRANSITIONS_LIMIT = (20, 1_000)   # an entity's latest transitions: the default, the most
T = TypeVar("T")
Ask = Callable[[Callable[[Views], T], float], T]


class BadRequest(ValueError):
    """A parameter the API cannot take: a 400 with this one line."""


class Api:
    def __init__(self, ask: Ask, history: HistoryReader, clock: Callable[[], float] = time.time):
        self._ask = ask
        self._history = history
        self._clock = clock
        self._lock = threading.Lock()
        self._since: dict[tuple, int | None] = {}   # problem -> since when, as first seen

    def routes(self) -> dict[str, http.Route]:
        return {f"{PREFIX}/health": self._answering(self.health, ("cluster", "limit")),
                f"{PREFIX}/history": self._answering(self.history, (*_HISTORY_FILTERS, "limit", "after")),
                f"{PREFIX}/entities/": self._answering(self.entity, ("transitions",))}

    def _answering(self, route: Callable[[http.Request, dict[str, str]], Any],
                   known: tuple[str, ...]) -> http.Route:
        def answer(request: http.Request) -> http.Answer:
            try:
                body = route(request, _params(request.params, known))
            except BadRequest as e:
                return 400, http.TEXT, f"{e}\n".encode()
            except LookupError as e:
                return 404, http.TEXT, f"{e.args[0]}\n".encode()
            except TimeoutError:
                return 503, http.TEXT, (f"the views did not answer within {ASK_TIMEOUT_S:.0f} s (a backlog's batch, "
                                        "or the stream stopping): try again\n").encode()
            return 200, JSON, orjson.dumps(body)
        return answer

    # ------------------------------------------------------------ /api/v1/health

    def health(self, request: http.Request, params: dict[str, str]) -> dict[str, Any]:
        limit = _limit(params, *PROBLEMS_LIMIT)
        clusters = self._ask(lambda views: views.health(), ASK_TIMEOUT_S)
        if "cluster" in params:
            named = [h for h in clusters if h.cluster == params["cluster"]]
            if not named:
                raise LookupError(f"no cluster {params['cluster']!r} in the views; they hold: "
                                  f"{', '.join(h.cluster for h in clusters) or 'none yet'}")
            clusters = named
        else:
            with self._lock:   # clusters gone from the views take their problems with them
                held = {h.cluster for h in clusters}
                self._since = {k: since for k, since in self._since.items() if k[0] in held}
        now_ms = int(self._clock() * 1000)
        return {"time": iso(now_ms), "clusters": [self._cluster(h, limit) for h in clusters]}

    def _cluster(self, health: ClusterHealth, limit: int) -> dict[str, Any]:
        with self._lock:   # a problem keeps the since of its first sight while it lasts
            kept = {k: since for k, since in self._since.items() if k[0] != health.cluster}
            for p in health.problems:
                key = p[:6]   # the problem's identity (Problem's first six fields)
                kept[key] = self._since.get(key, p.observed_ms)
            self._since = kept
            listed = [(p, kept[p[:6]]) for p in health.problems[:limit]]
        problems = [{"kind": p.kind, "cluster": p.cluster, "since": iso(since) if since is not None else None,
                     "since_ms": since, **p.fields()} for p, since in listed]
        return {**health.summary, "problems": problems, "problems_total": len(health.problems)}

    # ------------------------------------------------------------ /api/v1/history

    def history(self, request: http.Request, params: dict[str, str]) -> dict[str, Any]:
        limit = _limit(params, *HISTORY_LIMIT)
        try:
            query = query_of(Asked(**{("from_" if name == "from" else name): params[name]
                                      for name in _HISTORY_FILTERS if name in params}),
                             int(self._clock() * 1000), prefix="")
        except ValueError as e:
            raise BadRequest(str(e)) from None
        rows = self._history.rows(query)
        if "after" in params:
            after = _cursor(params["after"])
            rows = [t for t in rows if order_key(t) > after]
        page = rows[:limit]
        more = len(rows) > limit
        following = None
        if more:
            cursor = base64.urlsafe_b64encode(orjson.dumps(list(order_key(page[-1])))).decode()
            following = f"{request.path}?{urlencode({**params, 'after': cursor})}"
        return {"rows": [row_json(t) for t in page], "next": following}

    # ------------------------------------------------------------ /api/v1/entities/<cluster>/<entity>

    def entity(self, request: http.Request, params: dict[str, str]) -> dict[str, Any]:
        key = request.path.removeprefix(request.route)
        cluster, sep, entity = key.partition("/")
        if not sep or not cluster or not entity:
            raise BadRequest(f"{key!r} is not an entity key: <cluster>/<entity>, e.g. "
                             f"{PREFIX}/entities/prod/partition:orders:3 or .../prod/broker:1")
        n = _limit(params, *TRANSITIONS_LIMIT, name="transitions")
        record: EntityRecord | None = self._ask(lambda views: views.record(cluster, entity), ASK_TIMEOUT_S)
        transitions = self._history.recent(cluster, entity, n)
        if record is None and not transitions:
            raise LookupError(f"no entity {key!r}: the views hold no record of it and the history no transition")
        return {"key": key, "cluster": cluster, "entity": entity,
                "record": orjson.loads(to_json(record)) if record is not None else None,
                "last_observed": iso(record.last_observed_ms) if record is not None else None,
                "transitions": [row_json(t) for t in transitions]}


_HISTORY_FILTERS = ("since", "from", "to", "cluster", "topic", "broker", "group", "kind")


def _params(given: Mapping[str, list[str]], known: tuple[str, ...]) -> dict[str, str]:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise BadRequest(f"unknown parameter {unknown[0]!r}; this path takes: {', '.join(known)}")
    repeated = sorted(name for name, values in given.items() if len(values) > 1)
    if repeated:
        raise BadRequest(f"parameter {repeated[0]!r} given {len(given[repeated[0]])} times: give it once")
    return {name: values[0] for name, values in given.items()}


def _limit(params: Mapping[str, str], default: int, most: int, name: str = "limit") -> int:
    text = params.get(name)
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise BadRequest(f"{name} {text!r} is not a whole number from 1 to {most}")
    return int(text)


def _cursor(text: str) -> tuple:
    try:
        key = orjson.loads(base64.urlsafe_b64decode(text.encode()))
        if (type(key) is list and len(key) == 4 and all(type(k) is int for k in key[:2])
                and all(type(k) is str for k in key[2:])):
            return tuple(key)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        pass
    raise BadRequest(f"after {text[:80]!r} is not a page cursor: use the 'next' link of the previous page")
