import logging
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import streaming.exporter
import streaming.views
from kmon.events import BrokerState, ControllerState, Endpoint, GroupState, TopicLag
from kmon.metrics import BY_NAME, GROUP_STATES, known_series_names
from streaming.exporter import (EXPORTED, FAMILIES, BatchStats, SelfStats, Snapshot, SnapshotHolder,
                                ViewsCollector)
from streaming.views import (BrokerBalance, ClusterView, ClusterViews, ControllerView, GroupView,
                             PartitionDetail, TopicIsr, build_views)
from tests.unit.test_views import BROKERS, part, rec, topic

VIEW = ClusterView(
    controller=ControllerView(broker_id=2, epoch=7, changes=3),
    brokers={1: BrokerState(1, "h1", 9092, "r1"),
             2: BrokerState(2, None, -1, None, endpoints=(Endpoint("SSL", "h2", 9093, "SSL"),))},
    broker_up={1: 1, 2: 1, 3: 0},
    topics={"orders": TopicIsr(partitions=3, under_replicated=1, offline=1, leader_elections=4),
            "audit": TopicIsr(partitions=1)},
    isr_shrinks={("orders", 3): 2},
    isr_expands={("orders", 3): 1},
    partition_detail=(PartitionDetail("orders", 2, 1, 3, -1),),
    balance={1: BrokerBalance(leaders=2, preferred_leaders=2, imbalance_ratio=0.5, replicas=3)},
    preferred_replica_imbalance=1,
    reassigning_partitions=0,
    groups={"billing": GroupView("Stable", members=2, generation=9, rebalances=5, state_seconds=12.5,
                                 lag={"orders": TopicLag(100, 4.0), "audit": TopicLag(0, None)})},
)
STATS = SelfStats().add(BatchStats(duration_s=0.25, finished_ms=5_000, input_rows={"c1": 7},
                                   events={("c1", "zk", "partition"): 6},
                                   malformed={("c1", "zk"): 1},
                                   newest_observed_ms={("c1", "zk"): 4_000},
                                   state_rows={"c1": 40}))


def scrape(holder: SnapshotHolder | ViewsCollector) -> dict[tuple[str, frozenset], float]:
    registry = CollectorRegistry()
    registry.register(holder if isinstance(holder, ViewsCollector) else ViewsCollector(holder))
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def holder_with(view: ClusterView, stats: SelfStats = STATS) -> SnapshotHolder:
    return SnapshotHolder(Snapshot.of(ClusterViews(0, {"c1": view}), stats))


def value(series: dict, name: str, **labels) -> float:
    return series[(name, frozenset({"cluster": "c1", **{k: str(v) for k, v in labels.items()}}.items()))]


def test_every_series_is_in_the_catalog_with_its_labels():
    series = scrape(holder_with(VIEW))
    assert {name for name, _ in series} <= known_series_names()
    for name, labels in series:
        spec = BY_NAME.get(name) or BY_NAME[name + "_total"]
        assert sorted(dict(labels)) == sorted(spec.all_labels), name


def test_no_view_or_self_metric_is_missing():
    names = {name for name, _ in scrape(holder_with(VIEW))}
    assert {spec.name for spec in EXPORTED} - names == set()
    assert all(spec.view != "collector" for spec in EXPORTED)


def test_values():
    s = scrape(holder_with(VIEW))
    assert value(s, "kmon_controller_id") == 2
    assert value(s, "kmon_active_controller_count") == 1
    assert value(s, "kmon_controller_changes_total") == 3
    assert value(s, "kmon_brokers") == 2
    assert value(s, "kmon_broker_up", broker=3) == 0
    assert value(s, "kmon_broker_info", broker=1, host="h1", port=9092, rack="r1") == 1
    assert value(s, "kmon_broker_info", broker=2, host="h2", port=9093, rack="") == 1
    assert value(s, "kmon_under_replicated_partitions", topic="orders") == 1
    assert value(s, "kmon_isr_shrinks_total", topic="orders", broker=3) == 2
    assert value(s, "kmon_leader_elections_total", topic="orders") == 4
    assert value(s, "kmon_partition_leader", topic="orders", partition=2) == -1
    assert value(s, "kmon_broker_leader_imbalance_ratio", broker=1) == 0.5
    assert value(s, "kmon_consumer_group_lag_seconds", group="billing", topic="orders") == 4.0
    assert ("kmon_consumer_group_lag_seconds",
            frozenset({"cluster": "c1", "group": "billing", "topic": "audit"}.items())) not in s
    assert value(s, "kmon_consumer_group_rebalances_total", group="billing") == 5
    assert [value(s, "kmon_consumer_group_state", group="billing", state=st) for st in GROUP_STATES] \
        == [int(st == "Stable") for st in GROUP_STATES]


def test_unknown_group_state_still_shows():
    groups = {"g": replace(VIEW.groups["billing"], state="Unknown")}
    s = scrape(holder_with(replace(VIEW, groups=groups)))
    assert value(s, "kmon_consumer_group_state", group="g", state="Unknown") == 1


def test_self_metrics():
    s = scrape(holder_with(VIEW))
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
    holder = holder_with(VIEW)
    assert any(("topic", "audit") in labels for _, labels in scrape(holder))
    holder.set(Snapshot.of(ClusterViews(1, {"c1": replace(
        VIEW, topics={"orders": VIEW.topics["orders"]}, groups={})}), STATS))
    series = scrape(holder)
    assert not any(("topic", "audit") in labels or ("group", "billing") in labels for _, labels in series)
    assert value(series, "kmon_partitions", topic="orders") == 3


@pytest.mark.parametrize("snapshot", [None, Snapshot.of(ClusterViews(0, {}), SelfStats())])
def test_empty_snapshot_scrapes(snapshot):
    assert scrape(SnapshotHolder(snapshot)) == {}


# ------------------------------------------------------------------ one family failing

RECORDS = [*BROKERS, topic("t", {0: (1, 2, 3)}), part("t", 0, 2, (2, 3)),
           rec("controller", "controller", ControllerState(1, 4)),
           rec("group", "group:g", GroupState("g", "Stable", 3), source="groups")]


def families_served(series: dict) -> set[str]:
    return {(BY_NAME.get(name) or BY_NAME[name + "_total"]).view for name, _ in series}


def errors(series: dict) -> dict[str, float]:
    return {dict(labels)["family"]: v for (name, labels), v in series.items() if name == "kmon_view_errors_total"}


def test_every_family_is_served_and_its_error_counter_starts_at_0():
    assert set(streaming.views._FAMILIES) | {"self"} == set(FAMILIES) == {m.view for m in EXPORTED}
    series = scrape(SnapshotHolder(Snapshot.of(build_views(RECORDS, 0), STATS)))
    assert families_served(series) == set(FAMILIES)
    assert errors(series) == dict.fromkeys(FAMILIES, 0)


def test_a_family_that_raises_while_building_costs_that_family_only(monkeypatch, caplog):
    def poisoned(*args):
        raise TypeError("'<' not supported between instances of 'str' and 'int'")
    monkeypatch.setattr(streaming.views, "_balance", poisoned)
    clock = [0.0]
    collector = ViewsCollector(SnapshotHolder(Snapshot.of(build_views(RECORDS, 0), STATS)), lambda: clock[0])
    with caplog.at_level(logging.ERROR, "kmon.stream"):
        first, second = scrape(collector), scrape(collector)
        clock[0] = 61.0
        third = scrape(collector)
    assert families_served(first) == set(FAMILIES) - {"balance"}
    assert value(first, "kmon_under_replicated_partitions", topic="t") == 1
    assert value(first, "kmon_controller_id") == 1 and value(first, "kmon_brokers") == 3
    assert value(first, "kmon_consumer_group_generation", group="g") == 3
    assert [errors(s)["balance"] for s in (first, second, third)] == [1, 2, 3]
    assert {f: n for f, n in errors(third).items() if f != "balance"} == dict.fromkeys(set(FAMILIES) - {"balance"}, 0)
    logged = [r for r in caplog.records if "balance" in r.getMessage()]
    assert len(logged) == 2, "logged at the first failure and once a minute after"
    assert "'<' not supported" in str(logged[0].exc_info[1])


def test_a_family_that_raises_while_rendering_costs_that_family_only(monkeypatch):
    def poisoned(view):
        yield "kmon_consumer_group_members", {"group": "g"}, 1
        raise ValueError("poisoned")
    monkeypatch.setitem(streaming.exporter._VIEW_SAMPLES, "groups", poisoned)
    series = scrape(holder_with(VIEW))
    assert families_served(series) == set(FAMILIES) - {"groups"}, "nothing of a failed family is served"
    assert errors(series)["groups"] == 1


def test_a_value_the_exposition_cannot_write_costs_its_family_only():
    huge = replace(VIEW, controller=ControllerView(broker_id=10**400, epoch=1, changes=0))
    series = scrape(holder_with(huge))
    assert families_served(series) == set(FAMILIES) - {"controller"}
    assert errors(series)["controller"] == 1


def test_self_failing_keeps_the_views(monkeypatch):
    def poisoned(*args):
        raise KeyError("poisoned")
    monkeypatch.setattr(streaming.exporter, "_self_samples", poisoned)
    series = scrape(holder_with(VIEW))
    assert value(series, "kmon_controller_id") == 2
    assert errors(series)["self"] == 1 and "kmon_events_total" not in {name for name, _ in series}
