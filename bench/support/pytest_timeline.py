"""A pytest plugin for `bench suite-cpu`: each test's nodeid, start and end, and the pid of the process that ran
it, as JSON lines appended to ``$KMON_TEST_TIMELINE.<worker>``; the bench charges the CPU it samples to the test
each worker ran at that moment. Loaded through PYTEST_ADDOPTS, so `make test` runs unchanged."""
from __future__ import annotations

import json
import os
import time

import pytest

TIMELINE_ENV = "KMON_TEST_TIMELINE"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    started = time.time()
    yield
    path = os.environ.get(TIMELINE_ENV)
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{path}.{worker}", "a") as out:
            out.write(json.dumps({"worker": worker, "pid": os.getpid(), "test": item.nodeid, "start": started,
                                  "end": time.time()}) + "\n")
