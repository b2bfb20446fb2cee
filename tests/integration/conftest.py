"""Fixtures of the integration tests that run kmon as a user runs it."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.user_runs import Run


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:   # even on failure: every process the command started dies with it
        run.kill()
