"""Provision kmon's folder, Prometheus datasource and dashboards into Grafana over its HTTP API."""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

import niquests
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaTimeoutError

# The dashboards' datasource variable defaults to this uid, and the provisioning file in
# deploy/grafana uses it too, so either way of provisioning yields working dashboards.
DATASOURCE_UID = "kmon-prometheus"
# Prometheus scrapes kmon every 5 s (deploy/prometheus); Grafana sizes $__rate_interval from it.
SCRAPE_INTERVAL = "5s"

Credential = str | tuple[str, str] | None


class PushError(Exception):
    """A failure worth one line to the user: what went wrong, and where."""


@dataclass(frozen=True)
class PushRequest:
    grafana_url: str
    credential: Credential
    folder: str
    prometheus_url: str | None
    dashboards: Sequence[Mapping[str, Any]]
    timeout: float = 10.0


def folder_uid(title: str) -> str:
    """A stable uid from the folder title, so a second push finds the folder again."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", title).strip("-").lower()[:40] or "kmon"


def datasource_body(prometheus_url: str) -> dict[str, Any]:
    return {"uid": DATASOURCE_UID, "name": DATASOURCE_UID, "type": "prometheus", "access": "proxy",
            "url": prometheus_url, "isDefault": False, "jsonData": {"timeInterval": SCRAPE_INTERVAL}}


def without_userinfo(url: str) -> str:
    """The URL as it may be printed: a user:password@ part is dropped."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def push(request: PushRequest, report: Callable[[str], None]) -> None:
    api = GrafanaApi.from_url(request.grafana_url, credential=request.credential, timeout=request.timeout)
    shown = without_userinfo(request.grafana_url)
    with _explained(shown):
        # /api/health needs no credentials: an unreachable server, something that is not
        # Grafana, and bad credentials each get their own message.
        health = api.client.GET("/health")
        if not isinstance(health, dict) or "database" not in health:
            raise PushError(f"{shown} does not look like Grafana: /api/health answered {health!r:.200}")
        report(f"Grafana {health.get('version', '?')} at {shown}")
        uid = _ensure_folder(api, request.folder, report)
        if request.prometheus_url:
            _ensure_datasource(api, request.prometheus_url, report)
        for dashboard in request.dashboards:
            result = api.dashboard.update_dashboard({
                "dashboard": {**dashboard, "id": None}, "folderUid": uid, "overwrite": True,
                "message": "kmon dashboards push"})
            report(f"dashboard {dashboard['title']!r} ({dashboard['uid']}): {result.get('status', 'success')}, "
                   f"version {result.get('version', '?')}, {result.get('url', '')}")


def _ensure_folder(api: GrafanaApi, title: str, report: Callable[[str], None]) -> str:
    uid = folder_uid(title)
    try:
        api.folder.get_folder(uid)
        report(f"folder {title!r} ({uid}): exists")
    except GrafanaClientError as e:
        if e.status_code != 404:
            raise
        api.folder.create_folder(title, uid=uid)
        report(f"folder {title!r} ({uid}): created")
    return uid


def _ensure_datasource(api: GrafanaApi, prometheus_url: str, report: Callable[[str], None]) -> None:
    body = datasource_body(prometheus_url)
    try:
        existing = api.datasource.get_datasource_by_uid(DATASOURCE_UID)
    except GrafanaClientError as e:
        if e.status_code != 404:
            raise
        api.datasource.create_datasource(body)
        report(f"datasource {DATASOURCE_UID} -> {prometheus_url}: created")
        return
    api.datasource.update_datasource_by_uid(DATASOURCE_UID, {**body, "id": existing.get("id")})
    report(f"datasource {DATASOURCE_UID} -> {prometheus_url}: updated")


@contextmanager
def _explained(url: str) -> Iterator[None]:
    """Turn the client's exceptions into a PushError naming the Grafana URL."""
    try:
        yield
    except GrafanaTimeoutError as e:
        raise PushError(f"Grafana at {url} did not answer in time: {e}") from e
    except GrafanaException as e:
        if e.status_code == 401:
            raise PushError(f"Grafana at {url} rejected the credentials (401): set a valid "
                            "KMON_GRAFANA_TOKEN or KMON_GRAFANA_BASIC_AUTH=user:password") from e
        if e.status_code == 403:
            raise PushError(f"Grafana at {url} refused the request (403): the token or user needs the "
                            f"Editor role (Admin to manage datasources): {e.message}") from e
        raise PushError(f"Grafana at {url} answered with an error: {e.message}") from e
    except niquests.exceptions.RequestException as e:
        raise PushError(f"cannot reach Grafana at {url}: {e}") from e
