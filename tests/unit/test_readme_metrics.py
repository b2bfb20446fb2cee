"""The READMEs name only metrics the catalogue has, and the README's reference table is the catalogue."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kmon.metrics import CATALOG, known_series_names, markdown_table

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_metric_table_is_the_catalogue() -> None:
    text = (ROOT / "README.md").read_text()
    assert markdown_table() in text, "README.md's metrics table differs from kmon/metrics.py: " \
                                     "paste the output of `python -m kmon.metrics` into it"
    assert len(CATALOG) > 40


@pytest.mark.parametrize("readme", ["README.md", "bench/README.md"])
def test_every_metric_a_readme_names_exists(readme: str) -> None:
    named = set(re.findall(r"\bkmon_[a-z_]+[a-z]", (ROOT / readme).read_text()))
    assert named, f"{readme} names no metric"
    assert named - known_series_names() == set()
