"""The exposition the stream app serves: catalogue names and labels, the text format, a family
that fails costing only itself, and the HTTP server."""
import logging
import socket
import urllib.error
import urllib.request
from dataclasses import replace

import pytest
from prometheus_client.utils import floatToGoString

import streaming.views
import streaming.views.self
from kmon import http
from kmon.events import (BrokerState, ControllerState, Endpoint, GroupState, PartitionState, QuorumReplica,
                         QuorumState, TopicLag)
from kmon.metrics import BY_NAME, CONSUMER_STATUSES, GROUP_STATES, known_series_names
from streaming.exporter import serve_metrics
from streaming.published import LatestPublished, Published
from streaming.views import CLUSTER_FAMILIES, ViewOptions, Views
from streaming.views.exposition import CONTENT_TYPE, EXPORTED, FAMILIES, Exposition, Rows, go_float, render
from streaming.views.stats import BatchStats, SelfStats
from tests.unit.views_builders import BROKERS, Series, broker, errors, keyed, parse, part, rec, scrape, topic, value

STATS = SelfStats().add(BatchStats(duration_s=0.25, finished_ms=5_000, input_rows={"c1": 7},
                                   events={("c1", "zk", "partition"): 6},
                                   malformed={("c1", "zk"): 1},
                                   newest_observed_ms={("c1", "zk"): 4_000},
                                   state_rows={"c1": 40}))
RECORDS = [*BROKERS,
           rec("broker", "broker:4", BrokerState(4, None, -1, None, endpoints=(Endpoint("SSL", "h4", 9093, "SSL"),))),
           topic("t", {0: (1, 2, 3), 1: (2, 3, 5)}), part("t", 0, 2, (2, 3), broker_counters={"isr_shrinks": {1: 2}}),
           part("t", 1, 5, (5,)),
           rec("controller", "controller", ControllerState(1, 4), {"controller_changes": 3}),
           rec("group", "group:g", GroupState("g", "Stable", 3, lag={"t": TopicLag(100, 4.0, retention_ms=86_400_000),
                                                                  "u": TopicLag(0, None)}),
               {"rebalances": 5}, source="groups", state_since_ms=1_000),
           # a group of KIP-848's consumer protocol, one of its two members still reconciling
           rec("group", "group:m", GroupState("m", "Reconciling", 7, protocol="uniform", group_type="consumer",
                                              assignment_epoch=7, reconciling=1, status="stalled",
                                              partition_status={"orders:3": "stalled"}),
               {"rebalances": 2}, source="groups")]
# what a KRaft collector adds: a fenced broker, a partition with an eligible leader replica, the quorum
KRAFT_RECORDS = [
    rec("broker", "broker:6", BrokerState(6, "h6", 9092, None, fenced=True, incarnation_id="i6", broker_epoch=40),
        source="kraft"),
    topic("k", {0: (1, 2, 3)}),
    rec("partition", "partition:k:0", PartitionState("k", 0, 1, 3, (1, 2), 5, partition_epoch=4, elr=(3,),
                                                     last_known_elr=()), {"elr_leader_elections": 1}, source="kraft"),
    rec("quorum", "quorum", QuorumState(9001, 7, 1234, (QuorumReplica(9001, 1234), QuorumReplica(9002, 1200, 34, 1500)),
                                        (QuorumReplica(1, 1234),), {"metadata.version": 21}), source="kraft")]
RECORDS += KRAFT_RECORDS


def exposed(records=RECORDS, stats: SelfStats = STATS, now_ms: int = 10_000, views: Views | None = None) -> Series:
    views = views or Views(ViewOptions())
    views.apply(keyed(records))
    return parse(views.exposition(stats).body(now_ms))


def families_served(series: Series) -> set[str]:
    return {(BY_NAME.get(name) or BY_NAME[name + "_total"]).family for name, _ in series}


def test_every_series_is_in_the_catalog_with_its_labels():
    series = exposed()
    assert {name for name, _ in series} <= known_series_names()
    for name, labels in series:
        spec = BY_NAME.get(name) or BY_NAME[name + "_total"]
        assert sorted(dict(labels)) == sorted(spec.all_labels), name


def test_every_family_is_served_and_its_error_counter_starts_at_0():
    assert set(CLUSTER_FAMILIES) | {"self"} == set(FAMILIES) == {m.family for m in EXPORTED}
    series = exposed()
    assert {name for name, _ in series} >= {spec.name for spec in EXPORTED}, "no view or self metric is missing"
    assert families_served(series) == set(FAMILIES)
    assert errors(series) == dict.fromkeys(FAMILIES, 0)


def test_a_zookeeper_mode_cluster_exports_every_metric_but_the_kraft_only_ones():
    series = exposed([r for r in RECORDS if r not in KRAFT_RECORDS])
    assert {name for name, _ in series} == {spec.name for spec in EXPORTED if not spec.kraft_only}
    assert errors(series) == dict.fromkeys(FAMILIES, 0)


@pytest.mark.parametrize("module", [m for m in vars(streaming.views).values()
                                    if getattr(m, "FAMILY", None) is not None])
def test_each_family_module_yields_exactly_its_catalogue_names(module):
    """A metric's name leads to its code in one step: streaming/views/<its family>.py."""
    views = Views(ViewOptions("all"))
    views.apply(keyed(RECORDS))
    texts = (module.render_family(STATS, ["c1"]) if module.FAMILY == "self"
             else module.render_family(views._models["c1"]))
    names = {name for text in texts for name in (*text.lines, *text.ages)}
    if module.FAMILY == "self":
        names |= {name for text in streaming.views.self.render_errors({}, ["c1"]) for name in text.lines}
    assert names == {spec.name for spec in EXPORTED if spec.family == module.FAMILY}


def test_values_the_views_tests_do_not_cover():
    s = exposed()
    assert value(s, "kmon_broker_info", broker=4, host="h4", port=9093, rack="") == 1   # no PLAINTEXT listener
    assert value(s, "kmon_consumer_group_lag_seconds", group="g", type="classic", topic="t",
                 method="interpolated") == 4.0   # an event that names no method (an older collector)
    assert value(s, "kmon_consumer_group_lag_seconds", group="g", type="classic", topic="u",
                 method="interpolated") is None
    assert value(s, "kmon_consumer_group_rebalances_total", group="g", type="classic") == 5
    classic = GROUP_STATES["classic"]
    assert [value(s, "kmon_consumer_group_state", group="g", type="classic", state=st) for st in classic] \
        == [int(st == "Stable") for st in classic]
    assert value(s, "kmon_consumer_group_info", group="g", type="classic", assignor="") is None   # an Empty group's
    # a consumer-protocol group: its own states, its assignor, epochs and the members reconciling
    consumer = GROUP_STATES["consumer"]
    assert [value(s, "kmon_consumer_group_state", group="m", type="consumer", state=st) for st in consumer] \
        == [int(st == "Reconciling") for st in consumer]
    assert value(s, "kmon_consumer_group_state", group="m", type="consumer", state="PreparingRebalance") is None
    assert value(s, "kmon_consumer_group_info", group="m", type="consumer", assignor="uniform") == 1
    assert value(s, "kmon_consumer_group_assignment_epoch", group="m", type="consumer") == 7
    assert value(s, "kmon_consumer_group_reconciling_members", group="m", type="consumer") == 1
    assert value(s, "kmon_consumer_group_generation", group="m", type="consumer") == 7
    assert value(s, "kmon_consumer_group_assignment_epoch", group="g", type="classic") is None
    # the verdict on its consumers: one status set, the partitions not ok named
    assert [value(s, "kmon_consumer_group_status", group="m", type="consumer", status=st) for st in CONSUMER_STATUSES] \
        == [int(st == "stalled") for st in CONSUMER_STATUSES]
    assert value(s, "kmon_consumer_group_partition_status", group="m", type="consumer", topic="orders", partition=3,
                 status="stalled") == 1
    assert value(s, "kmon_consumer_group_status", group="g", type="classic", status="ok") is None   # not judged


def test_time_in_state_is_rendered_by_each_scrape():
    views = Views(ViewOptions())
    views.apply(keyed(RECORDS))
    exposition = views.exposition(STATS)
    assert [value(parse(exposition.body(ms)), "kmon_consumer_group_state_seconds", group="g", type="classic")
            for ms in (1_000, 4_000, 181_000)] == [0, 3, 180]


def test_unknown_group_state_still_shows():
    s = exposed([rec("group", "group:g", GroupState("g", "Unknown", 3), source="groups")])
    assert value(s, "kmon_consumer_group_state", group="g", type="classic", state="Unknown") == 1


def test_self_metrics():
    s = exposed()
    assert value(s, "kmon_events_total", source="zk", kind="partition") == 6
    assert value(s, "kmon_malformed_total", source="zk") == 1
    assert value(s, "kmon_last_event_timestamp_seconds", source="zk") == 4.0
    assert value(s, "kmon_event_delay_seconds") == 1.0
    assert value(s, "kmon_stream_batch_duration_seconds") == 0.25
    assert value(s, "kmon_stream_input_rows_total") == 7
    assert value(s, "kmon_stream_state_rows") == 40


def test_self_stats_accumulate():
    later = STATS.add(BatchStats(duration_s=0.5, finished_ms=9_000, input_rows={"c1": 3},
                                 events={("c1", "zk", "partition"): 2, ("c1", "groups", "group"): 1},
                                 newest_observed_ms={("c1", "groups"): 8_500}, state_rows={"c1": 41}))
    assert later.events == {("c1", "zk", "partition"): 8, ("c1", "groups", "group"): 1}
    assert later.input_rows == {"c1": 10} and later.malformed == {("c1", "zk"): 1}
    assert later.last_event_ms == {("c1", "zk"): 4_000, ("c1", "groups"): 8_500}
    assert later.event_delay_s == {"c1": 0.5} and later.batch_duration_s == 0.5
    assert later.state_rows == {"c1": 41}


def test_removed_topic_and_group_leave_no_series():
    views = Views(ViewOptions())
    assert any(("topic", "t") in labels for _, labels in exposed(views=views))
    gone = [replace(r, state=None, deleted=True) for r in RECORDS if r.entity in ("topic:t", "group:g")]
    series = exposed(gone, views=views)
    assert not any(("topic", "t") in labels or ("group", "g") in labels for _, labels in series)
    assert value(series, "kmon_brokers") == 4


def test_empty_exposition():
    assert Exposition.empty().body(0) == b""
    assert parse(Views(ViewOptions()).exposition(SelfStats()).body(0)) == {}


def test_label_values_are_escaped_as_prometheus_reads_them():
    odd = 'a"b\\c\nd'
    s = exposed([rec("group", "group:x", GroupState(odd, "Stable", 1), source="groups")])
    assert value(s, "kmon_consumer_group_members", group=odd, type="classic") == 0


@pytest.mark.parametrize("number", [0, 1, -1, 7, 999_999, 1_000_000, 12_345_678, -12_345_678, 10**15, -10**15 + 1,
                                    -10**15, 2**63 - 1, True, False, 0.5, 1e-9, 1234567.5, float("inf"), float("nan")])
def test_values_are_written_as_prometheus_client_writes_them(number):
    assert go_float(number) == floatToGoString(float(number))


def test_render_refuses_labels_outside_the_catalogue():
    with pytest.raises(ValueError, match="kmon_partitions"):
        render("c1", [("kmon_partitions", {"topic": "t", "broker": 1}, 1)])


def test_rows_render_as_their_samples_do():
    names = ("kmon_partition_isr_size", "kmon_partition_replicas", "kmon_partition_leader")
    rows = [(("t", 0), (2, 3, 1)), (('o"d\\d\n', 7), (0, 3, -1)), (("t", 10**6), (10**7, 0.5, float("inf")))]
    samples = [(name, {"topic": topic, "partition": p}, v)
               for (topic, p), values in rows for name, v in zip(names, values)]
    renderer = Rows("c\"1", names, ("topic", "partition"))
    assert renderer.text(renderer.row(labels, values) for labels, values in rows) == render("c\"1", samples)
    with pytest.raises(ValueError, match="kmon_partitions"):
        Rows("c1", ("kmon_partitions",), ("topic", "partition"))


# ------------------------------------------------------------------ one family failing

def test_a_family_that_raises_costs_that_family_only(monkeypatch, caplog):
    def poisoned(*args):
        raise TypeError("'<' not supported between instances of 'str' and 'int'")
    monkeypatch.setitem(CLUSTER_FAMILIES, "balance", poisoned)
    clock = [0.0]
    views = Views(ViewOptions(), lambda: clock[0])
    with caplog.at_level(logging.ERROR, "kmon.stream"):
        first = exposed(views=views)
        second = exposed([part("t", 0, 3, (3,))], views=views)
        clock[0] = 61.0
        third = exposed([part("t", 0, 2, (2,))], views=views)
    assert families_served(first) == set(FAMILIES) - {"balance"}
    assert value(first, "kmon_under_replicated_partitions", topic="t") == 2
    assert value(first, "kmon_controller_id") == 1 and value(first, "kmon_brokers") == 4
    assert value(first, "kmon_consumer_group_generation", group="g", type="classic") == 3
    assert [errors(s)["balance"] for s in (first, second, third)] == [1, 2, 3], "counted at each build"
    assert {f: n for f, n in errors(third).items() if f != "balance"} == dict.fromkeys(set(FAMILIES) - {"balance"}, 0)
    logged = [r for r in caplog.records if "balance" in r.getMessage()]
    assert len(logged) == 2, "logged at the first failure and once a minute after"
    assert "'<' not supported" in str(logged[0].exc_info[1])


def test_a_value_the_exposition_cannot_write_costs_its_family_only():
    series = exposed([*RECORDS, rec("controller", "controller", ControllerState(10**400, 1))])
    assert families_served(series) == set(FAMILIES) - {"controller"}
    assert errors(series)["controller"] == 1


def test_self_failing_keeps_the_views(monkeypatch):
    def poisoned(*args):
        raise KeyError("poisoned")
    monkeypatch.setattr(streaming.views.self, "_samples", poisoned)
    series = exposed()
    assert value(series, "kmon_controller_id") == 1
    assert errors(series)["self"] == 1 and "kmon_events_total" not in {name for name, _ in series}


# ------------------------------------------------------------------ HTTP

def test_the_server_serves_the_latest_published():
    views = Views(ViewOptions())
    views.apply(keyed([broker(1)]))
    holder = LatestPublished()
    server = serve_metrics("127.0.0.1", 0, holder)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with urllib.request.urlopen(f"{url}/metrics") as r:
            assert r.headers["Content-Type"] == CONTENT_TYPE and r.read() == b""
        holder.set(Published(views.exposition(STATS), STATS))
        with urllib.request.urlopen(f"{url}/metrics") as r:
            assert parse(r.read()) == scrape(holder) and value(scrape(holder), "kmon_brokers") == 1
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"{url}/nothing")
    finally:
        http.stop(server)


def test_a_model_that_raises_on_a_change_is_rebuilt_from_its_records(monkeypatch):
    views = Views(ViewOptions())
    exposed(views=views)
    real = streaming.views.ClusterModel.apply
    calls = []

    def once_broken(self, changed):
        calls.append(len(changed))
        if len(calls) == 1:
            raise RuntimeError("poisoned")
        return real(self, changed)
    monkeypatch.setattr(streaming.views.ClusterModel, "apply", once_broken)
    series = exposed([part("t", 0, 3, (3,))], views=views)
    assert calls == [1, len(RECORDS)], "the fresh model gets every record, the change included"
    assert value(series, "kmon_under_replicated_partitions", topic="t") == 2
    assert value(series, "kmon_partition_leader", topic="t", partition=0) == 3
    assert set(errors(series).values()) == {0, 1} and errors(series)["self"] == 0


def test_a_cluster_shows_while_it_has_records():
    views = Views(ViewOptions())
    assert exposed([], views=views) == exposed([], views=Views(ViewOptions()))
    views.apply({"": None, "ghost/broker:1": None})   # keys of garbage the step dropped
    assert not any(("cluster", "ghost") in labels or ("cluster", "unknown") in labels
                   for _, labels in parse(views.exposition(SelfStats()).body(0)))
    only = [rec("broker", "broker:1", BrokerState(1, "h", 1, None), cluster="c2")]
    assert value(exposed(only, views=views), "kmon_brokers", cluster="c2") == 1
    views.apply({"c2/broker:1": None})
    assert not any(("cluster", "c2") in labels for _, labels in parse(views.exposition(SelfStats()).body(0)))


def test_a_port_taken_is_refused_naming_the_address_and_the_flag():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError) as refused:
            serve_metrics("127.0.0.1", port, LatestPublished())
    assert str(refused.value) == (f"[Errno 98] cannot serve /metrics on 127.0.0.1:{port}: Address already in use "
                                  "(--metrics-port, or KMON_METRICS_PORT)")
