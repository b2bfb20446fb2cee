"""`python -m bench compare`: a bench run on a base commit's own code and on the working tree, alternately,
and each figure's ratio."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.support import compare

ROOT = Path(__file__).resolve().parents[2]


def test_a_figure_is_the_median_of_each_side_and_a_column_the_same_everywhere_labels_it() -> None:
    base = [[{"partitions": 10, "events": 5, "fold_s": 2.0}], [{"partitions": 10, "events": 5, "fold_s": 4.0}],
            [{"partitions": 10, "events": 5, "fold_s": 3.0}]]
    head = [[{"partitions": 10, "events": 5, "fold_s": 1.0}], [{"partitions": 10, "events": 5, "fold_s": 1.5}],
            [{"partitions": 10, "events": 5, "fold_s": 9.0}]]
    assert compare.ratios(base, head) == [
        {"partitions": 10, "events": 5, "figure": "fold_s", "base": 3.0, "head": 1.5, "ratio": 0.5}]


def test_runs_with_different_rows_are_refused() -> None:
    with pytest.raises(compare.CompareError, match="different numbers of rows"):
        compare.ratios([[{"a": 1.0}]], [[{"a": 1.0}, {"a": 2.0}]])


def test_a_ref_git_does_not_know_and_a_bench_without_rows_are_named() -> None:
    with pytest.raises(compare.CompareError, match="--base no-such-ref: not a commit"):
        compare.run("no-such-ref", ["scrape"], 1, print, Path("/nonexistent"))
    with pytest.raises(compare.CompareError, match="one of scrape"):
        compare.run("HEAD", ["soak"], 1, print, Path("/nonexistent"))


def test_the_base_side_runs_the_base_commits_code(tmp_path: Path) -> None:
    """The base tree is extracted once and kept; a change in it (here: every event count -1) shows on the
    base side only."""
    argv = [sys.executable, "-m", "bench", "compare", "--base", "HEAD", "--rounds", "1", "--",
            "scrape", "--partitions", "50"]
    env = {**os.environ, "KMON_CACHE": str(tmp_path)}
    first = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    [tree] = (tmp_path / "compare").iterdir()
    scrape = tree / "bench" / "scrape.py"
    scrape.write_text(scrape.read_text().replace('"events": len(first) + len(failure),', '"events": -1,'))
    again = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    rows = json.loads(again.stderr.strip().splitlines()[-1])
    [events] = [r for r in rows if r["figure"] == "events"]
    assert events["base"] == -1 and events["head"] > 0
    assert {r["figure"] for r in rows} >= {"fold_us_per_event", "scrape_p50_s"}
