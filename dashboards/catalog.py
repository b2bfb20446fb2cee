"""The dashboards as data: where they are, loaded, and their panels (``kmon dashboards push`` and
the benches' plots). Their queries, as the tests read them, are tests/dashboard_queries.py's."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Mapping

DASHBOARD_DIR = Path(__file__).resolve().parent

def dashboard_paths(directory: Path = DASHBOARD_DIR) -> list[Path]:
    return sorted(directory.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def load_all(directory: Path = DASHBOARD_DIR) -> list[dict[str, Any]]:
    return [load(p) for p in dashboard_paths(directory)]


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those inside rows (a collapsed row keeps its panels inside it)."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panels(panel)


