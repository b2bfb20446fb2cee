"""The chaos soak of bench/soak, a minute and a half of it (ZooKeeper mode): seeded faults under load, then
kmon's history, counters and views against the oracle (the cluster's own record). The hour-long runs
of both modes are in bench/README.md."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench import soak

pytestmark = pytest.mark.integration


def test_a_few_minutes_of_mixed_faults_lose_nothing_and_count_nothing_twice(tmp_path: Path, toolchain) -> None:
    said: list[str] = []
    # faults closer together than the bench's (20-40 s apart): as many in less time
    verdict = soak.run(soak.SoakRequest(minutes=1.5, seed=7, workdir=tmp_path, fault_every_s=(8, 15)), said.append)
    assert sum(verdict.faults.values()) >= 3, said
    assert sum(verdict.matched.values()) > 0, verdict.tables()
    assert verdict.ok, "\n".join(verdict.problems() + said)
