"""The stream app's API over views and a history built by hand: what /api/v1/health, /history and
/entities answer, and the one-line 400 of each bad parameter."""
import contextlib
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from kmon import http
from kmon.events import BrokerState, ControllerState, GroupState, QuorumState
from kmon.history import Transition
from streaming.api import Api
from streaming.exporter import serve_metrics
from streaming.fold.arrow import table
from streaming.history_log import HistoryLog
from streaming import history_query
from streaming.history_query import HistoryReader, Query
from streaming.published import LatestPublished
from streaming.views import ViewOptions, Views
from tests.unit.views_builders import broker, keyed, part, rec, topic

NOW = 1_795_000_000.0   # 2026-11-18 (s): the clock of the API and of the history's days
T0 = int(NOW * 1000)


def tombstone(b: int, observed_ms: int):
    return rec("broker", f"broker:{b}", None, deleted=True, last_observed_ms=observed_ms)


RECORDS = [broker(1), broker(2), tombstone(3, T0 - 5_000),
           rec("controller", "controller", ControllerState(1, 4), last_observed_ms=T0 - 60_000),
           topic("t", {0: (1, 2, 3), 1: (2, 3, 1), 2: (1, 2)}, config={"min.insync.replicas": "2"}),
           part("t", 0, 1, (1, 2), last_observed_ms=T0 - 4_000),     # under-replicated
           part("t", 1, 2, (2,), last_observed_ms=T0 - 3_000),       # under min ISR
           part("t", 2, 1, (1, 2)),                                  # healthy
           rec("group", "group:g", GroupState("g", "Stable", 3, status="stalled",
                                              partition_status={"t:0": "stalled"}),
               source="groups", last_observed_ms=T0 - 2_000),
           rec("group", "group:ok", GroupState("ok", "Stable", 1, status="ok"), source="groups")]
ROWS = [Transition(T0 - 5_000 + i, "c1", "isr_shrink", "partition:t:0", "t", 0, 3, None, "[1, 2, 3]", "[1, 2]",
                   position=10 + i) for i in range(7)] + [
    Transition(T0 - 5_000, "c1", "broker_gone", "broker:3", broker=3, position=9),
    Transition(T0 - 9_000, "c2", "topic_created", "topic:x", topic="x", position=1)]


class Clock:
    def __call__(self) -> float:
        return NOW


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[tuple[Views, str]]:
    """The API on RECORDS and ROWS, its clock at NOW: the views, and the server's URL."""
    views = Views(ViewOptions())
    views.apply(keyed(RECORDS))
    HistoryLog(directory, "w1", 7, Clock()).append(0, [table(ROWS)])
    api = Api(lambda question, timeout: question(views), HistoryReader(directory), Clock())
    server = serve_metrics("127.0.0.1", 0, LatestPublished(), more=api.routes())
    try:
        yield views, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        http.stop(server)


@pytest.fixture
def served(tmp_path: Path):
    with serving(tmp_path) as both:
        yield both


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"] == "application/json"
        return json.loads(r.read())


def refused(url: str) -> tuple[int, str]:
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    return e.value.code, e.value.read().decode()


def test_health_says_what_is_wrong_with_since_when(served):
    views, url = served
    [c1] = get(f"{url}/api/v1/health")["clusters"]
    assert c1["cluster"] == "c1" and c1["mode"] == "zookeeper" and c1["controller"] == {"id": 1, "epoch": 4}
    assert c1["brokers"] == {"up": [1, 2], "down": [3], "fenced": []}
    assert c1["partitions"] == {"total": 3, "under_replicated": 2, "under_min_isr": 1, "offline": 0}
    assert c1["groups"] == {"total": 2, "not_ok": [{"group": "g", "type": "classic", "status": "stalled"}]}
    problems = {(p["kind"], p.get("broker"), p.get("partition"), p.get("group")): p for p in c1["problems"]}
    assert set(problems) == {("broker_down", 3, None, None), ("under_replicated_partition", None, 0, None),
                             ("under_min_isr_partition", None, 1, None), ("group_not_ok", None, None, "g")}
    down = problems[("broker_down", 3, None, None)]
    assert down["since_ms"] == T0 - 5_000 and down["since"] == "2026-11-18T11:06:35.000Z" and not down["fenced"]
    under_min = problems[("under_min_isr_partition", None, 1, None)]
    assert (under_min["topic"], under_min["isr"], under_min["replicas"], under_min["min_isr"]) == ("t", [2], [2, 3, 1], 2)
    assert c1["problems_total"] == 4

    # a problem keeps the since of its first sight while it lasts; once gone and back, it starts again
    views.apply(keyed([part("t", 0, 1, (1, 2), last_observed_ms=T0)]))
    again = {p["kind"]: p for p in get(f"{url}/api/v1/health?cluster=c1")["clusters"][0]["problems"]}
    assert again["under_replicated_partition"]["since_ms"] == T0 - 4_000
    views.apply(keyed([part("t", 0, 1, (1, 2, 3), last_observed_ms=T0 + 1)]))
    assert "under_replicated_partition" not in {p["kind"] for p in get(f"{url}/api/v1/health")["clusters"][0]["problems"]}
    views.apply(keyed([part("t", 0, 1, (1, 2), last_observed_ms=T0 + 2)]))
    back = {p["kind"]: p for p in get(f"{url}/api/v1/health")["clusters"][0]["problems"]}
    assert back["under_replicated_partition"]["since_ms"] == T0 + 2

    limited = get(f"{url}/api/v1/health?limit=1")["clusters"][0]
    assert len(limited["problems"]) == 1 and limited["problems_total"] == 4


def test_a_kraft_cluster_shows_its_quorum_and_a_fenced_broker_as_down(served):
    views, url = served
    views.apply(keyed([rec("broker", "broker:3", BrokerState(3, "h3", 9092, None, fenced=True), source="kraft",
                           last_observed_ms=T0 - 1_000),
                       rec("quorum", "quorum", QuorumState(-1, 8, 100), source="kraft")]))
    [c1] = get(f"{url}/api/v1/health")["clusters"]
    assert c1["mode"] == "kraft" and c1["quorum"] == {"leader": None, "epoch": 8, "voters": []}
    assert c1["brokers"] == {"up": [1, 2], "down": [3], "fenced": [3]}
    kinds = {p["kind"]: p for p in c1["problems"]}
    assert kinds["broker_down"]["fenced"] is True and "no_quorum_leader" in kinds


def test_history_is_kmon_history_json_a_page_at_a_time(served, capsys):
    _, url = served
    everything = get(f"{url}/api/v1/history?since=1d")
    assert everything["next"] is None and len(everything["rows"]) == len(ROWS)
    assert everything["rows"][0] == {"time": "2026-11-18T11:06:31.000Z", **ROWS[-1]._asdict()}

    pages, link = [], "/api/v1/history?since=1d&cluster=c1&limit=3"
    while link:
        page = get(url + link)
        pages.append(page["rows"])
        link = page["next"]
    assert [len(p) for p in pages] == [3, 3, 2]
    assert [r for p in pages for r in p] == [r for r in everything["rows"] if r["cluster"] == "c1"]

    assert len(get(f"{url}/api/v1/history?since=1d&broker=3")["rows"]) == 8   # it left the ISR 7 times, then went
    assert get(f"{url}/api/v1/history?since=1d&broker=1")["rows"] == []
    assert [r["kind"] for r in get(f"{url}/api/v1/history?since=1d&kind=topic_created,broker_gone")["rows"]] == [
        "topic_created", "broker_gone"]
    ranged = get(f"{url}/api/v1/history?from=2026-11-18T11:06:35.003Z&to={NOW:.0f}")["rows"]
    assert [r["position"] for r in ranged] == [13, 14, 15, 16]


@pytest.mark.parametrize("query,said", [
    ("since=3x", "since '3x' is not a duration like 90s, 15m, 1h, 2d or 1w"),
    ("kind=isr_shrinks", "kind 'isr_shrinks': unknown kind isr_shrinks; kinds: isr_shrink,"),
    ("broker=one", "broker 'one' is not a broker id (an integer)"),
    ("from=yesterday", "from 'yesterday' is not a time"),
    ("limit=0", "limit '0' is not a whole number from 1 to 10000"),
    ("after=zzz", "after 'zzz' is not a page cursor"),
    ("since=1h&since=2h", "parameter 'since' given 2 times: give it once"),
    ("sinse=1h", "unknown parameter 'sinse'; this path takes: since, from, to,"),
])
def test_a_bad_history_parameter_is_a_400_of_one_line(served, query, said):
    _, url = served
    code, text = refused(f"{url}/api/v1/history?{query}")
    assert code == 400 and text.startswith(said) and text.count("\n") == 1


def test_an_entity_is_its_record_and_its_latest_transitions(served):
    _, url = served
    partition = get(f"{url}/api/v1/entities/c1/partition:t:0?transitions=3")
    assert partition["record"]["state"]["isr"] == [1, 2] and partition["record"]["kind"] == "partition"
    assert [r["position"] for r in partition["transitions"]] == [14, 15, 16]
    gone = get(f"{url}/api/v1/entities/c1/broker:3")
    assert gone["record"]["deleted"] is True and gone["transitions"][0]["kind"] == "broker_gone"
    only_history = get(f"{url}/api/v1/entities/c2/topic:x")
    assert only_history["record"] is None and len(only_history["transitions"]) == 1
    assert refused(f"{url}/api/v1/entities/c1/broker:9")[0] == 404
    assert refused(f"{url}/api/v1/entities/broker:1") == (400, "'broker:1' is not an entity key: <cluster>/<entity>, e.g. "
                                                               "/api/v1/entities/prod/partition:orders:3 or .../prod/broker:1\n")
    assert refused(f"{url}/api/v1/health?cluster=nope")[0] == 404


def test_busy_views_are_a_503_that_says_so(tmp_path: Path):
    def busy(question, timeout):
        raise TimeoutError
    api = Api(busy, HistoryReader(tmp_path), Clock())
    server = serve_metrics("127.0.0.1", 0, LatestPublished(), more=api.routes())
    try:
        code, text = refused(f"http://127.0.0.1:{server.server_address[1]}/api/v1/health")
    finally:
        http.stop(server)
    assert code == 503 and "try again" in text


def test_a_file_rewritten_is_read_again_and_an_unchanged_one_is_not(tmp_path: Path, monkeypatch):
    log = HistoryLog(tmp_path, "w1", 7, Clock())
    log.append(0, [table(ROWS[:1])])
    reader = HistoryReader(tmp_path)
    everything = Query(None, None)
    assert len(reader.rows(everything)) == 1
    reads = []
    real = history_query.read
    monkeypatch.setattr(history_query, "read", lambda f: reads.append(f.path) or real(f))
    assert len(reader.rows(everything)) == 1 and reads == []
    time.sleep(0.01)
    log.append(0, [table(ROWS[:2])])   # the batch run again, with a row more
    assert len(reader.rows(everything)) == 2 and len(reads) == 1


def test_the_views_answer_again_from_their_last_answer_until_a_change_is_applied():
    views = Views(ViewOptions())
    views.apply(keyed(RECORDS))
    first = views.health()
    assert views.health() is first   # asked again and again while nothing changed: nothing computed
    views.apply(keyed([part("t", 2, 1, (1,), last_observed_ms=T0)]))
    again = views.health()
    assert again is not first and again[0].summary["partitions"]["under_replicated"] == 3
