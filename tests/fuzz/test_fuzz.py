"""A short run of every fuzz target in the default suite: the seeds, then up to a few thousand
mutated cases each (its ``smoke_cases``; ``KMON_FUZZ_CASES`` sets them all, ``KMON_FUZZ_SEED``
the seed; the long runs are ``python -m tests.fuzz``, bench/README.md "Fuzzing"). A failure
prints the command that replays it."""
from __future__ import annotations

import importlib
import os

import pytest

from tests.fuzz.__main__ import FAMILIES
from tests.fuzz.engine import Target, run

CASES = os.environ.get("KMON_FUZZ_CASES")
SEED = int(os.environ.get("KMON_FUZZ_SEED", "1"))
TARGETS = [(family, target) for family in FAMILIES
           for target in importlib.import_module(f"tests.fuzz.{family}").TARGETS]


@pytest.mark.parametrize(("family", "target"), TARGETS, ids=[f"{f}-{t.name}" for f, t in TARGETS])
def test_fuzz_target(family: str, target: Target) -> None:
    report = run(target, int(CASES) if CASES else target.smoke_cases, SEED, max_findings=3)
    assert not report.findings, "\n".join(
        f"{f.error}\n  at {f.where}\n  replay: {f.replay(family)}\n{f.trace}" for f in report.findings.values())
