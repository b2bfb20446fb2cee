"""``kmon mcp``: an MCP server over the stream app's API (streaming/api.py), for an agent asked "what is
wrong, and what changed before it?". Three tools answer in text (cli/api_answers.py): cluster_health,
what_changed and explain. stdio by default (an agent starts it); streamable HTTP with --transport."""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from cli import api_answers
from kmon import flags
from kmon.http_client import ApiClient, ApiError, CredentialsError, load_credentials
from stack.state import StackError, StackState

log = logging.getLogger("kmon.mcp")
TRANSPORTS = ("stdio", "streamable-http")
AROUND_S = 300           # explain: what else changed this long before and after the entity's last change
CHANGES_LIMIT = 200      # what_changed: the most rows one answer lists
AROUND_LIMIT = 40


def add_mcp_parser(sub: argparse._SubParsersAction, default_stack_dir: str) -> None:
    p = sub.add_parser(
        "mcp", help="an MCP server over kmon's API: cluster_health, what_changed, explain",
        description="Serve the Model Context Protocol for an agent: cluster_health (what is wrong now), "
                    "what_changed (the transitions in a time range, with kmon history's filters) and explain "
                    "(an entity: what it is, how it got there, what else changed around it), answered in text "
                    "from the stream app's API. stdio by default; --transport streamable-http serves HTTP.")
    flags.flag(p, "--api-url", metavar="URL",
               help="the stream app's address, e.g. http://kmon:9308 (default: the local stack's, from --dir)")
    flags.flag(p, "--api-credentials-file", type=Path, metavar="FILE",
               help="basic_auth and tls_config for the API, as in a Prometheus scrape config (README)")
    flags.flag(p, "--dir", default=default_stack_dir, type=Path,
               help="the local stack whose stream app to ask when --api-url is not given")
    flags.flag(p, "--transport", default="stdio", choices=TRANSPORTS, help="stdio, or streamable-http")
    flags.flag(p, "--mcp-host", default="127.0.0.1", metavar="H",
               help="with streamable-http: the address to listen on")
    flags.flag(p, "--mcp-port", default=8000, type=flags.port, metavar="P",
               help="with streamable-http: the port (the MCP endpoint is /mcp)")
    p.set_defaults(handler=cmd_mcp)


def api_client(args: argparse.Namespace) -> ApiClient:
    """The API --api-url names, or the local stack's (with its credentials where it is secured)."""
    given = load_credentials(args.api_credentials_file) if args.api_credentials_file else None
    if args.api_url:
        return ApiClient(args.api_url, given)
    try:
        state = StackState.load(args.dir)
    except StackError as e:
        raise ApiError(str(e)) from None
    if state is None or "stream" not in state.components:
        raise ApiError(f"no --api-url, and no local stack with a stream app in {args.dir}: give the stream "
                       "app's address (--api-url http://HOST:PORT, or KMON_API_URL), or start one (make run)")
    return ApiClient(f"{state.scheme}://127.0.0.1:{state.stream_port}", given or state.web_credentials())


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        client = api_client(args)
    except (CredentialsError, ApiError) as e:
        print(f"kmon mcp: {e}", file=sys.stderr)
        return 2
    server = build_server(client)
    log.info("kmon mcp: answering from %s over %s%s", client.base_url, args.transport,
             f" on http://{args.mcp_host}:{args.mcp_port}/mcp" if args.transport != "stdio" else "")
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.mcp_host, port=args.mcp_port)
    return 0


def build_server(client: ApiClient, clock: Callable[[], float] = time.time) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("kmon", instructions=(
        "kmon follows Apache Kafka's control plane exactly (every ISR change, election, controller change, broker "
        "and consumer-group transition). Start with cluster_health for what is wrong now, then what_changed for "
        "what happened before it, and explain for one entity (broker:<id>, partition:<topic>:<p>, group:<g>, "
        "controller). Times are UTC."))

    def asked(call: Callable[[], str]) -> str:
        try:
            return call()
        except ApiError as e:
            raise ToolError(str(e)) from None

    @server.tool()
    def cluster_health(cluster: str | None = None) -> str:
        """What is wrong now in each cluster kmon watches (or one): the controller, brokers up and down,
        under-replicated, under-min-ISR and offline partitions, consumer groups not ok, and each problem
        with since when."""
        return asked(lambda: api_answers.health_text(client.get("/api/v1/health", cluster=cluster),
                                                     int(clock() * 1000)))

    @server.tool()
    def what_changed(since: str = "1h", start: str | None = None, end: str | None = None, cluster: str | None = None,
                     topic: str | None = None, broker: int | None = None, group: str | None = None,
                     kind: str | None = None) -> str:
        """The control plane's transitions in a time range, oldest first, exactly as kmon counted them.
        since: how far back (90s, 15m, 1h, 2d), unless start is given; start, end: ISO 8601 times (UTC unless
        they name a zone) or epoch seconds; filters: cluster, topic, broker (joined, left, won or lost a role),
        group, kind (comma-separated: isr_shrink, leader_election, controller_change, broker_gone, ...)."""
        def answer() -> str:
            page = client.get("/api/v1/history", since=since, **{"from": start}, to=end, cluster=cluster,
                              topic=topic, broker=broker, group=group, kind=kind, limit=CHANGES_LIMIT)
            window = f"from {start}" if start else f"in the last {since}"
            filters = [f"{k} {v}" for k, v in (("cluster", cluster), ("topic", topic), ("broker", broker),
                                               ("group", group), ("kind", kind)) if v is not None]
            return api_answers.changes_text(page["rows"], page["next"] is not None,
                                            f"{window}{' to ' + end if end else ''}"
                                            + (f" ({', '.join(filters)})" if filters else ""))
        return asked(answer)

    @server.tool()
    def explain(entity: str, cluster: str | None = None) -> str:
        """One entity: what it is, its state now, how it got there (its last transitions), and what else
        changed in its cluster in the 5 minutes around its last change. entity: broker:<id>,
        partition:<topic>:<partition>, topic:<t>, group:<g>, controller or quorum; cluster: needed only when
        kmon watches several."""
        def answer() -> str:
            name = cluster or _only_cluster(client)
            found = client.get(f"/api/v1/entities/{quote(name, safe='')}/{quote(entity, safe=':')}", transitions=20)
            now_ms = int(clock() * 1000)
            rows = found["transitions"]
            centre = rows[-1]["time_ms"] if rows else now_ms
            around = client.get("/api/v1/history", **{"from": f"{(centre - AROUND_S * 1000) / 1000:.3f}"},
                                to=f"{(centre + AROUND_S * 1000) / 1000:.3f}", cluster=name, limit=AROUND_LIMIT + 50)
            others = [r for r in around["rows"] if r["entity"] != entity][:AROUND_LIMIT]
            return api_answers.explain_text(found, others, f"within {AROUND_S // 60} minutes of "
                                            + (rows[-1]["time"] if rows else "now"), now_ms)
        return asked(answer)

    return server


def _only_cluster(client: ApiClient) -> str:
    clusters = [c["cluster"] for c in client.get("/api/v1/health")["clusters"]]
    if len(clusters) != 1:
        raise ApiError(f"kmon watches {len(clusters)} clusters ({', '.join(clusters) or 'none yet'}): name one "
                       "with cluster")
    return clusters[0]
