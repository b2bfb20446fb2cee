"""The oracle stays independent of what it judges: it takes from kmon only the names of its history's
kinds and where the installed tools are (kmon/history.py, kmon/toolchain.py), and no part of kmon
imports it. Read from the imports themselves."""
from __future__ import annotations

from pathlib import Path

from tests.unit.test_layout import imported

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("kmon", "collectors", "streaming", "dashboards", "stack", "cli")
ALLOWED_FROM_KMON = {"kmon.history", "kmon.toolchain"}


def test_the_oracle_takes_from_kmon_only_the_kinds_and_the_tools() -> None:
    taken = {name for path in (ROOT / "bench" / "oracle").rglob("*.py") for name in imported(path)
             if name.split(".")[0] in PRODUCT}
    assert taken <= ALLOWED_FROM_KMON, sorted(taken - ALLOWED_FROM_KMON)


def test_no_part_of_kmon_imports_the_oracle() -> None:
    importers = [str(path.relative_to(ROOT)) for package in PRODUCT for path in (ROOT / package).rglob("*.py")
                 if any(name.split(".")[0] == "bench" for name in imported(path))]
    assert importers == []
