"""The process around a collector (collectors/runner.py): a part that fails to start leaves nothing
of the others running."""
from __future__ import annotations

import threading

import pytest

from collectors.publisher import PublisherConfig
from collectors.runner import running


class _Refusing:
    """A collector whose start fails (a defect, or a resource it cannot have)."""
    reachability = None

    def start(self) -> None:
        raise RuntimeError("cannot start")

    def stop(self, timeout: float = 5.0) -> None:
        raise AssertionError("a collector that did not start is not stopped")

    def request_resync(self, reason: str) -> None: ...
    def health(self) -> str | None: ...
    def cluster_id(self) -> str | None: ...


def test_a_collector_that_fails_to_start_stops_the_publisher_and_the_metrics_server() -> None:
    before = {t.name for t in threading.enumerate()}
    made = []
    with pytest.raises(RuntimeError, match="cannot start"):
        with running("c1", lambda pub, tel: made.append(tel) or _Refusing(),
                     PublisherConfig(bootstrap_servers="127.0.0.1:1"), metrics_port=0):
            raise AssertionError("not reached")
    (telemetry,) = made
    assert telemetry._server is None   # closed
    left = {t.name for t in threading.enumerate() if t.is_alive()} - before
    assert not {name for name in left if name.startswith("kmon-")}, left
