"""One bench on a base commit and on the working tree, alternately, in one go: each figure's ratio.

The machines these run on drift by 2x from day to day, so a figure is only ever compared with one
measured beside it. Each round runs the base, then the working tree (the next round the other way
round, so a trend of the machine's speed falls on both sides alike); a figure's ratio is the median of
the working tree's over the median of the base's.

The base is the commit's tree as ``git archive`` writes it, in ``~/.cache/kmon/compare/<commit>`` (outside
git, kept for the next comparison), run by this interpreter from that directory: its packages shadow the
working tree's editable install; the dependencies are this venv's.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

Row = dict[str, object]
Log = Callable[[str], None]
ROOT = Path(__file__).resolve().parents[2]
# benches whose JSON on stderr is a list of rows (soak and peers print tables of their own)
ROW_BENCHES = ("scrape", "stream", "idle", "zk", "kraft", "kraft-stream", "buffer", "groups", "failover", "startup")


class CompareError(Exception):
    """A comparison that cannot run: a ref git does not know, a bench that failed or printed no rows."""


@dataclass(frozen=True)
class Side:
    name: str        # "base" or "head"
    root: Path       # where `python -m bench` runs


def run(base: str, bench_args: Sequence[str], rounds: int, log: Log, cache: Path) -> list[Row]:
    if rounds < 1:
        raise CompareError(f"--rounds must be at least 1, got {rounds}")
    if not bench_args or bench_args[0] not in ROW_BENCHES:
        raise CompareError(f"a bench to compare, one of {', '.join(ROW_BENCHES)}; got {' '.join(bench_args) or 'none'}")
    commit = resolve(base)
    sides = (Side("base", base_tree(commit, cache, log)), Side("head", ROOT))
    runs: dict[str, list[list[Row]]] = {"base": [], "head": []}
    for n in range(rounds):
        for side in (sides if n % 2 == 0 else sides[::-1]):
            log(f"round {n + 1}/{rounds}: {side.name} ({commit[:10] if side.name == 'base' else 'working tree'})")
            runs[side.name].append(bench_rows(side, bench_args))
    log(f"base {commit[:10]} ({base}), head the working tree; ratio = head / base, medians of {rounds} runs each")
    return ratios(runs["base"], runs["head"])


def resolve(ref: str) -> str:
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise CompareError(f"--base {ref}: not a commit git knows here")
    return done.stdout.strip()


def base_tree(commit: str, cache: Path, log: Log) -> Path:
    """The commit's files, extracted once (an interrupted extraction is not taken for a whole one)."""
    tree = cache / "compare" / commit
    if (tree / ".complete").exists():
        return tree
    log(f"extracting {commit[:10]} to {tree}")
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tree.parent) as scratch:
        archive = Path(scratch) / "tree.tar"
        subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), commit], cwd=ROOT, check=True)
        staged = Path(scratch) / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(staged, filter="tar")
        (staged / ".complete").touch()
        if tree.exists():   # a partial one of an earlier run
            subprocess.run(["rm", "-rf", str(tree)], check=True)
        staged.rename(tree)
    return tree


def bench_rows(side: Side, bench_args: Sequence[str]) -> list[Row]:
    """One run of the bench on ``side``: the rows of the JSON it prints last on stderr. Its progress
    lines go through to ours."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(side.root), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-m", "bench", *bench_args], cwd=side.root, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last = ""
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("[{"):   # the rows: kept, not echoed
            last = line
        else:
            sys.stderr.write(f"  {side.name}: {line}")
    code = process.wait()
    if code != 0:
        raise CompareError(f"the bench on the {side.name} side ended with {code}: {' '.join(bench_args)}")
    try:
        rows = json.loads(last)
    except json.JSONDecodeError:
        rows = None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows) or not rows:
        raise CompareError(f"the bench on the {side.name} side printed no rows (a JSON list on stderr)")
    return rows


def ratios(base: list[list[Row]], head: list[list[Row]]) -> list[Row]:
    """Pure: the rows of both sides' runs, row by row, one output row per figure. A column whose value
    is the same in every run of both sides (a size, a count of events) labels the row's figures; a
    numeric one that varies is a figure: the base's median, the head's median and their ratio."""
    runs = base + head
    if len({len(r) for r in runs}) != 1:
        raise CompareError(f"the runs gave different numbers of rows: {[len(r) for r in runs]}")
    out: list[Row] = []
    for i in range(len(runs[0])):
        columns = [c for c in runs[0][i] if all(c in r[i] for r in runs)]
        labels = {c: runs[0][i][c] for c in columns if all(r[i][c] == runs[0][i][c] for r in runs)}
        for column in columns:
            values = [r[i][column] for r in runs]
            if column in labels or not all(_numeric(v) for v in values):
                continue
            b = statistics.median(float(r[i][column]) for r in base)   # type: ignore[arg-type]
            h = statistics.median(float(r[i][column]) for r in head)   # type: ignore[arg-type]
            out.append({**labels, "figure": column, "base": b, "head": h, "ratio": h / b if b else float("nan")})
    return out


def _numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
