"""The stream app stopped (SIGTERM, Ctrl-C) while Spark starts leaves at once; stopped once Spark runs,
it stops the query as before. Spark is a stand-in here whose start blocks until the test lets it go;
the events bootstrap a TCP listener (run_until only asks whether it answers)."""
import socket
import threading
from dataclasses import dataclass, field

import pytest

from streaming.app import NotFromPy4j, StreamApp, quiet_py4j, run_until
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

    def quiet(self) -> None:
        pass


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


class HungQuery:
    """A query whose stop() never returns: the JVM's context stopped under its running batch."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def stop(self) -> None:
        self.release.wait(30)


class LeavingApp(StreamApp):
    def __init__(self, cfg: StreamConfig) -> None:
        super().__init__(cfg)
        self.left: list[int] = []
        self.gone = threading.Event()

    def abandon(self, code: int) -> None:   # os._exit in the real one
        self.left.append(code)
        self.gone.set()


def test_a_stop_that_spark_never_finishes_exits_after_the_limit(tmp_path) -> None:
    app = LeavingApp(StreamConfig("127.0.0.1:1", checkpoint=tmp_path))
    app._query = query = HungQuery()
    stopping = threading.Thread(target=app.stop, args=(0.5,), daemon=True)
    stopping.start()
    assert app.gone.wait(10) and app.left == [0]
    query.release.set()
    stopping.join(10)


def test_a_stop_that_spark_finishes_in_time_stays(tmp_path) -> None:
    app = LeavingApp(StreamConfig("127.0.0.1:1", checkpoint=tmp_path))
    app._query = query = HungQuery()
    query.release.set()
    app.stop(0.5)
    assert not app.gone.wait(1) and app.left == []


def test_once_stopping_py4js_stack_traces_are_not_logged_and_kmons_lines_are(caplog) -> None:
    import logging
    import os

    import py4j.java_gateway

    root = logging.getLogger()
    before = list(root.filters), logging.getLogger("py4j").level
    try:
        quiet_py4j()
        quiet_py4j()   # once is enough, twice the same
        assert sum(isinstance(f, NotFromPy4j) for f in root.filters) == 1
        with caplog.at_level(logging.INFO):
            record = root.makeRecord("root", logging.ERROR, py4j.java_gateway.__file__, 1059,
                                     "Exception while sending command.", (), None)
            root.handle(record)
            logging.getLogger("py4j.clientserver").error("There was an exception while executing the Python Proxy")
            logging.getLogger("kmon.stream").info("stream stopped")
        assert [r.getMessage() for r in caplog.records] == ["stream stopped"]
        assert os.sep + "py4j" + os.sep in record.pathname
    finally:
        root.filters[:] = before[0]
        logging.getLogger("py4j").setLevel(before[1])
