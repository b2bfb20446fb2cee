"""What a push of kmon's folder, Prometheus datasource and dashboards into Grafana asks, and how its
failures read. The push itself (grafana-client and its HTTP stack) is dashboards/grafana_api.py,
imported only by the commands that push: every other kmon process would pay for that import."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

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
