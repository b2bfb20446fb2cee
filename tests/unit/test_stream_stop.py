"""The stream app stopped (SIGTERM, Ctrl-C) while Spark starts leaves at once; stopped once Spark runs,
it stops the query as before. Spark is a stand-in here whose start blocks until the test lets it go;
the events bootstrap a TCP listener (run_until only asks whether it answers)."""
import socket
import threading
from dataclasses import dataclass, field

import pytest

from streaming.app import run_until
from streaming.config import StreamConfig


@dataclass
class StartingApp:
    cfg: StreamConfig
    may_start: threading.Event = field(default_factory=threading.Event)
    starting: threading.Event = field(default_factory=threading.Event)
    left: list[int] = field(default_factory=list)
    gone: threading.Event = field(default_factory=threading.Event)
    stopped: bool = False

    def start(self) -> None:
        self.starting.set()
        self.may_start.wait(30)

    def abandon(self, code: int) -> None:   # os._exit in the real one
        self.left.append(code)
        self.gone.set()

    def failure(self) -> str | None:
        return None

    def batch_running_for(self, counting: bool = True) -> float:
        return 0.0

    def stop(self) -> None:
        self.stopped = True
        self.gone.set()


@pytest.fixture
def bootstrap():
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_a_stop_while_spark_starts_leaves_at_once_without_waiting_for_it(bootstrap: str) -> None:
    app, stop = StartingApp(StreamConfig(bootstrap)), threading.Event()
    runner = threading.Thread(target=run_until, args=(app, stop, 0.05), daemon=True)
    runner.start()
    assert app.starting.wait(30)
    stop.set()
    assert app.gone.wait(30) and app.left == [0]   # while start() still blocks
    app.may_start.set()
    runner.join(30)


def test_a_stop_once_spark_runs_stops_the_query(bootstrap: str) -> None:
    app, stop = StartingApp(StreamConfig(bootstrap)), threading.Event()
    app.may_start.set()
    runner = threading.Thread(target=run_until, args=(app, stop, 0.05), daemon=True)
    runner.start()
    assert app.starting.wait(30)
    stop.set()
    runner.join(30)
    assert not runner.is_alive() and app.stopped and app.left == []
