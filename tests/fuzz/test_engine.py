"""The fuzz engine's per-case deadline (tests/fuzz/engine.py) counts CPU: a case that spins is a
finding, one that only waits (a machine busy with other work stretches every case) is not."""
from __future__ import annotations

import time

from tests.fuzz.engine import Target, run_one


def target(check) -> Target:
    return Target("t", 1, lambda: [], check)


def test_a_case_that_spins_is_stopped_and_found() -> None:
    def spin(case) -> None:
        while True:
            pass
    finding = run_one(target(spin), ((b"x",),))
    assert finding is not None and finding.error == "Timeout: still running after 2 CPU-s"


def test_a_case_that_waits_past_the_deadline_is_not_a_finding() -> None:
    assert run_one(target(lambda case: time.sleep(1.3)), ((b"x",),)) is None
