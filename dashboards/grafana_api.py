"""Provision kmon's folder, Prometheus datasource and dashboards into Grafana over its HTTP API."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import niquests
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaTimeoutError

from dashboards.push import DATASOURCE_UID, PushError, PushRequest, datasource_body, folder_uid, without_userinfo


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
