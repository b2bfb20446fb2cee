"""The coverage-guided engine: atheris (libFuzzer) with kmon's modules instrumented, its seeds
the target's, its mutations this package's structured ones (half the time) and libFuzzer's
own bytes-level ones.

libFuzzer ends the process when its runs are done, so a run is a child process: it writes
each distinct finding to a directory as it meets it, and the parent reads libFuzzer's closing
line for the count and the time. The per-case deadline is :func:`engine.run_one`'s (libFuzzer's
own timer is off: it counts wall time, which a loaded machine stretches).
"""
from __future__ import annotations

import importlib
import logging
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from tests.fuzz.cases import from_bytes, to_bytes
from tests.fuzz.engine import Finding, Report, Target, run_one
from tests.fuzz.mutations import mutate

INSTRUMENTED = ["collectors", "kmon", "streaming"]
_DONE = re.compile(r"Done (\d+) runs in (\d+) second")


def import_instrumented(family: str) -> ModuleType:
    """The family's module, kmon's code under it instrumented for coverage as it is imported."""
    import atheris
    with atheris.instrument_imports(include=INSTRUMENTED):
        return importlib.import_module(f"tests.fuzz.{family}")


def fuzz_in_child(target: Target, cases: int, seed: int, findings_dir: Path) -> None:
    """Runs in the child: never returns (libFuzzer exits)."""
    import atheris
    logging.disable(logging.CRITICAL)   # every bad case is logged: millions of lines, none read
    seeds = list(target.seeds())
    corpus = Path(tempfile.mkdtemp(prefix=f"kmon-fuzz-{target.name}-"))
    for i, case in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(to_bytes(case))
    seen: set[str] = set()

    def one(data: bytes) -> None:
        case = from_bytes(data, target.arity)
        if not case:
            return
        finding = run_one(target, case, seed)
        if finding is not None and (signature := finding.where + " " + finding.error.split(":")[0]) not in seen:
            seen.add(signature)
            _save(findings_dir / f"{target.name}-{len(seen)}", finding, data)

    def structured(data: bytes, max_size: int, mutation_seed: int) -> bytes:
        rng = random.Random(mutation_seed)
        case = from_bytes(data, target.arity)
        if not case or rng.random() < 0.5:
            return atheris.Mutate(data, max_size)
        out = to_bytes(mutate(case, rng, seeds, target.max_messages))
        return out if len(out) <= max_size else atheris.Mutate(data, max_size)

    atheris.Setup([sys.argv[0], f"-runs={cases}", f"-seed={seed or 1}", "-timeout=0", "-rss_limit_mb=4096",
                   "-max_len=65536", "-print_final_stats=1", str(corpus)], one, custom_mutator=structured)
    atheris.Fuzz()


def _save(path: Path, finding: Finding, data: bytes) -> None:
    path.with_suffix(".case").write_bytes(data)
    path.with_suffix(".txt").write_text(f"{finding.error}\nat {finding.where}\n\n{finding.trace}")


def run(family: str, target: Target, cases: int, seed: int, findings_dir: Path) -> Report:
    """A child runs ``cases`` coverage-guided cases; its findings are read back from ``findings_dir``."""
    findings_dir.mkdir(parents=True, exist_ok=True)
    for old in findings_dir.glob(f"{target.name}-*"):
        old.unlink()
    child = subprocess.run([sys.executable, "-m", "tests.fuzz", family, "--target", target.name, "--cases",
                            str(cases), "--seed", str(seed), "--engine", "atheris-child", "--findings",
                            str(findings_dir)], capture_output=True, text=True)
    done = _DONE.search(child.stderr)
    report = Report(target.name, cases=int(done[1]) if done else 0, seconds=float(done[2]) if done else 0.0)
    if done is None:
        print(child.stderr[-3000:], file=sys.stderr)
    for i, saved in enumerate(sorted(findings_dir.glob(f"{target.name}-*.case"))):
        error, where = saved.with_suffix(".txt").read_text().split("\n", 2)[:2]
        report.findings[f"{i}"] = Finding(target.name, seed, -1, from_bytes(saved.read_bytes(), target.arity),
                                          error, where.removeprefix("at "), str(saved))
    return report
