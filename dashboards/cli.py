"""``kmon dashboards``: provision the Grafana dashboards."""
from __future__ import annotations

import argparse
import sys

from dashboards import catalog
from dashboards.push import DATASOURCE_UID, Credential, PushError, PushRequest
from kmon import flags


def add_dashboards_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboards", help="Grafana dashboards: provision them into a Grafana",
                       description="kmon's Grafana dashboards (cluster health, leader balance, consumer "
                                   "groups, kmon itself), provisioned over Grafana's HTTP API.")
    dsub = p.add_subparsers(dest="dashboards_command", required=True, metavar="ACTION")
    push_p = dsub.add_parser(
        "push", help="create/update the folder, the Prometheus datasource and the dashboards in Grafana",
        description="Upload every dashboard (overwriting the same uid) into a folder, and, with "
                    f"--prometheus-url, create or update the Prometheus datasource {DATASOURCE_UID!r} the "
                    "dashboards select by default. Credentials: a service-account token or user:password, "
                    "best given through the environment so they stay out of the process list.")
    add_grafana_flags(push_p, "Grafana's base URL, e.g. http://grafana:3000 (required)")
    flags.flag(push_p, "--prometheus-url", type=http_url,
                help="Prometheus that scrapes kmon, as Grafana's server reaches it; "
                     "omit to leave Grafana's datasources as they are")
    push_p.set_defaults(handler=cmd_push)


def add_grafana_flags(p: argparse.ArgumentParser, url_help: str) -> None:
    """Where the dashboards go and how kmon logs in there (`kmon dashboards push`, `kmon run`)."""
    flags.flag(p, "--grafana-url", type=http_url, help=url_help)
    flags.flag(p, "--grafana-token", help="Grafana service-account token or API key")
    flags.flag(p, "--grafana-basic-auth", type=user_password, help="user:password for basic auth")
    flags.flag(p, "--grafana-folder", default="kmon", help="Grafana folder for the dashboards")


def http_url(text: str) -> str:
    if not text.startswith(("http://", "https://")) or len(text) <= len("https://"):
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL, e.g. http://localhost:3000")
    return text


def user_password(text: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise argparse.ArgumentTypeError("expected user:password")
    return user, password


def push_request(args: argparse.Namespace) -> PushRequest:
    if not args.grafana_url:
        raise SystemExit("kmon dashboards push: --grafana-url (or KMON_GRAFANA_URL) is required")
    return grafana_request(args, args.prometheus_url, "kmon dashboards push")


def grafana_request(args: argparse.Namespace, prometheus_url: str | None, command: str) -> PushRequest:
    """The push the Grafana flags ask for; both credentials at once end ``command`` with one line."""
    if args.grafana_token and args.grafana_basic_auth:
        raise SystemExit(f"{command}: give either a token (--grafana-token, KMON_GRAFANA_TOKEN) "
                         "or basic auth (--grafana-basic-auth, KMON_GRAFANA_BASIC_AUTH), not both")
    credential: Credential = args.grafana_token or args.grafana_basic_auth
    return PushRequest(grafana_url=args.grafana_url, credential=credential, folder=args.grafana_folder,
                       prometheus_url=prometheus_url, dashboards=catalog.load_all())


def cmd_push(args: argparse.Namespace) -> int:
    from dashboards.grafana_api import push   # its HTTP stack only where a push is asked (push.py)

    request = push_request(args)
    try:
        push(request, report=print)
    except PushError as e:
        print(f"kmon dashboards push: {e}", file=sys.stderr)
        return 1
    return 0
