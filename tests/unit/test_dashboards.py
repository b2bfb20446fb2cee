"""The Grafana dashboards against the metric catalogue, a real PromQL parser, and the push command.

Every panel query must name only metrics kmon really exports (kmon.metrics), filter by
the cluster variable and use the datasource variable; every view metric must have a
panel; every expression must parse with promtool. The push command is exercised against
a closed port and a small stand-in of Grafana's HTTP API (no Grafana server can be had
on the build machine), which checks the requests' paths, bodies and credentials.
"""
from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from dashboards import catalog
from tests import dashboard_queries
from dashboards.cli import add_dashboards_parser
from dashboards.push import DATASOURCE_UID, SCRAPE_INTERVAL, folder_uid, without_userinfo
from kmon.metrics import CATALOG, CONSUMER_STATUSES, GROUP_STATES, known_series_names
from stack.configs import PROMETHEUS_TEMPLATE
from tests.tools import duration_s, prometheus_global, required_tool
from tests.unit.fakes import FakeGrafana

REPO = Path(__file__).resolve().parents[2]
PROVISIONING = REPO / "deploy" / "grafana" / "provisioning"
EXPECTED = {"kmon-cluster-health", "kmon-leader-balance", "kmon-consumer-groups", "kmon-kraft-quorum", "kmon-self"}
KRAFT_DASHBOARD = "kmon-kraft-quorum"
DASHBOARDS = {d["uid"]: d for d in catalog.load_all()}
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
CLUSTER_FILTER = 'cluster=~"$cluster'  # also matches the "$cluster|" form used for `up`
GRAFANA_VARIABLES = {"__rate_interval", "__interval", "__range"}


def all_queries() -> list[dashboard_queries.Query]:
    return [q for d in DASHBOARDS.values() for q in dashboard_queries.queries(d)]


def by_dashboard(test):
    return pytest.mark.parametrize("dashboard", list(DASHBOARDS.values()), ids=list(DASHBOARDS))(test)


# ------------------------------------------------------------------ dashboard structure

def test_the_dashboards_exist_named_by_uid() -> None:
    assert set(DASHBOARDS) == EXPECTED
    assert {p.stem for p in catalog.dashboard_paths()} == EXPECTED


@by_dashboard
def test_dashboard_has_identity_tags_and_links(dashboard: dict) -> None:
    assert dashboard["title"].startswith("kmon / ")
    assert "kmon" in dashboard["tags"]
    assert dashboard["schemaVersion"] >= 36
    assert dashboard.get("id") is None  # a fixed id would clash in another Grafana
    assert any(link["type"] == "dashboards" and link["tags"] == ["kmon"] and link["includeVars"]
               for link in dashboard["links"])
    ids = [p["id"] for p in catalog.panels(dashboard)]
    assert len(ids) == len(set(ids))


@by_dashboard
def test_datasource_and_cluster_variables(dashboard: dict) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    assert ds["current"]["value"] == DATASOURCE_UID
    cluster = variables["cluster"]
    assert cluster["type"] == "query" and cluster["datasource"] == DATASOURCE_REF
    assert dashboard_queries.metric_names(cluster["definition"]) <= known_series_names()
    for name, query in dashboard_queries.variable_queries(dashboard):
        assert dashboard_queries.metric_names(query) <= known_series_names(), name
        if name != "cluster":
            assert CLUSTER_FILTER in query, f"variable {name} lists values of every cluster"
            assert variables[name]["multi"] and variables[name]["includeAll"], name


@by_dashboard
def test_every_variable_used_is_defined(dashboard: dict) -> None:
    defined = {v["name"] for v in dashboard["templating"]["list"]} | GRAFANA_VARIABLES
    for q in dashboard_queries.queries(dashboard):
        assert dashboard_queries.variables(q.expr) <= defined, (q.panel, q.expr)


@by_dashboard
def test_every_panel_uses_the_datasource_variable(dashboard: dict) -> None:
    for panel in catalog.panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE_REF, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE_REF, panel["title"]


def test_the_moments_are_marked_by_annotations_of_the_datasource() -> None:
    """Issue 14: controller changes, brokers down and up, unclean elections and rebalance
    storms, each titled with what and where; what they return is checked against a real
    Prometheus after the fault scenarios (tests/integration/test_scenarios.py)."""
    marked = {uid: {a["name"]: a for a in dashboard_queries.annotations(d)} for uid, d in DASHBOARDS.items()}
    assert set(marked["kmon-cluster-health"]) == {"Controller changes", "Broker down", "Broker up",
                                                  "Unclean leader elections"}
    assert set(marked["kmon-consumer-groups"]) == {"Rebalance storms"}
    for a in (a for by_name in marked.values() for a in by_name.values()):
        assert a["datasource"] == DATASOURCE_REF and a["enable"], a["name"]
        for label in re.findall(r"\{\{(\w+)\}\}", a["titleFormat"]):
            assert label in a["tagKeys"].split(","), (a["name"], label)


def test_the_rebalance_storm_annotation_marks_what_the_alert_fires_on() -> None:
    rules = (REPO / "deploy/prometheus/rules/kmon-alerts.yml").read_text()
    alert = re.search(r"alert: ConsumerGroupRebalanceStorm\n\s+expr: (.*)\n", rules).group(1)   # type: ignore[union-attr]
    annotation = dashboard_queries.annotations(DASHBOARDS["kmon-consumer-groups"])[0]["expr"]
    assert annotation.replace('{cluster=~"$cluster", group=~"$group", type=~"$type"}', "") == alert


@pytest.mark.parametrize("query", all_queries(), ids=lambda q: f"{q.dashboard}/{q.panel}/{q.ref_id}")
def test_every_selector_is_filtered_by_cluster(query: dashboard_queries.Query) -> None:
    names = dashboard_queries.metric_names(query.expr)
    assert names, query.expr
    for name in names:
        for m in re.finditer(rf"(?<![\w:]){re.escape(name)}(?![\w:])(\{{[^}}]*\}})?", query.expr):
            assert m.group(1) and CLUSTER_FILTER in m.group(1), f"{name} not filtered by cluster in {query.expr}"


def test_every_metric_a_panel_uses_is_exported() -> None:
    unknown = {(q.dashboard, q.panel, name) for q in all_queries()
               for name in dashboard_queries.metric_names(q.expr) - known_series_names() - dashboard_queries.BUILTIN_SERIES}
    assert not unknown, sorted(unknown)


def test_every_view_metric_has_a_panel() -> None:
    used = set().union(*(dashboard_queries.metric_names(q.expr) for q in all_queries()))
    missing = {m.name for m in CATALOG if m.family not in ("collector", "self")} - used
    assert not missing, f"metrics without a panel: {sorted(missing)}"


def test_the_kraft_only_metrics_have_their_own_dashboard() -> None:
    """A ZooKeeper-mode cluster exports none of them: its dashboards show no panel that stays
    empty, and the KRaft dashboard lists only KRaft clusters."""
    kraft_only = {m.name for m in CATALOG if m.kraft_only}
    for q in all_queries():
        names = dashboard_queries.metric_names(q.expr)
        if q.dashboard == KRAFT_DASHBOARD:
            assert names <= kraft_only, (q.panel, names - kraft_only)
        else:
            assert not names & kraft_only, (q.dashboard, q.panel, names & kraft_only)
    assert dashboard_queries.metric_names(next(v for v in DASHBOARDS[KRAFT_DASHBOARD]["templating"]["list"]
                                     if v["name"] == "cluster")["definition"]) <= kraft_only


@pytest.mark.parametrize(("title", "label", "values"), [
    ("Group state", "state", {s for states in GROUP_STATES.values() for s in states}),
    ("Consumers' verdict (from their offsets)", "status", set(CONSUMER_STATUSES))])
def test_group_timelines_show_every_value(title: str, label: str, values: set[str]) -> None:
    [panel] = [p for p in catalog.panels(DASHBOARDS["kmon-consumer-groups"]) if p["title"] == title]
    [target] = panel["targets"]
    texts = {o["text"] for m in panel["fieldConfig"]["defaults"]["mappings"] for o in m["options"].values()}
    for value in values:
        assert f'{label}="{value}"' in target["expr"] and value in texts, value


# ------------------------------------------------------------------ PromQL syntax

def test_every_expression_parses_with_promtool(tmp_path: Path) -> None:
    # promtool parses recording rules with Prometheus' own PromQL parser; a recording
    # rule per expression, named after its dashboard and position, locates a failure.
    values = dashboard_queries.template_values("kmon-test.1")
    names: dict[str, dashboard_queries.Query] = {}
    lines = ["groups:"]
    for uid, dashboard in DASHBOARDS.items():
        lines += [f"  - name: {uid}", "    rules:"]
        for i, q in enumerate(dashboard_queries.queries(dashboard)):
            record = f"{uid.replace('-', '_')}:q{i}"
            names[record] = q
            expr = json.dumps(dashboard_queries.substitute(q.expr, values))  # a JSON string is a YAML scalar
            lines += [f"      - record: {record}", f"        expr: {expr}"]
    rules = tmp_path / "dashboards.rules.yml"
    rules.write_text("\n".join(lines) + "\n")
    result = subprocess.run([required_tool("promtool"), "check", "rules", str(rules)],
                            capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    failing = [f"{record}: {q.dashboard} / {q.panel}: {q.expr}"
               for record, q in names.items() if f'"{record}"' in output]
    assert result.returncode == 0, output + "\n".join(failing)
    assert f"SUCCESS: {len(names)} rules found" in result.stdout


# ------------------------------------------------------------------ catalog helpers

@pytest.mark.parametrize("expr, names", [
    ('sum by (topic) (increase(kmon_isr_shrinks_total{cluster=~"$cluster", topic=~"up"}[$__rate_interval]))',
     {"kmon_isr_shrinks_total"}),
    ("max(up{job=~'kmon.*'}) by (job) * on(instance) group_left(rack) kmon_broker_info offset 5m",
     {"up", "kmon_broker_info"}),
    ("time() - max without (source) (kmon_last_event_timestamp_seconds) > bool 1e3",
     {"kmon_last_event_timestamp_seconds"}),
    ("sum(rate(kmon_events_total[5m:30s])) or vector(0)", {"kmon_events_total"}),
    ('label_values(kmon_consumer_group_lag{cluster=~"$cluster"}, topic)', {"kmon_consumer_group_lag"}),
    ("kmom_brokers", {"kmom_brokers"}),  # a typo is reported, not dropped
])
def test_metric_names(expr: str, names: set[str]) -> None:
    assert dashboard_queries.metric_names(expr) == names


def test_queries_for_prometheus_substitute_every_variable() -> None:
    for dashboard in DASHBOARDS.values():
        queries = dashboard_queries.queries_for_prometheus(dashboard, "prod.eu") + \
            dashboard_queries.queries_for_prometheus(dashboard, "prod.eu", annotation=True)
        assert len(queries) == len(dashboard_queries.queries(dashboard))
        for title, expr in queries:
            assert "$" not in expr.replace('"prod\\\\.eu|"', ""), (title, expr)
            assert 'cluster=~"prod\\\\.eu' in expr, (title, expr)


def test_panels_inside_collapsed_rows_are_found() -> None:
    inner = {"id": 2, "title": "inner", "targets": [{"refId": "A", "expr": "kmon_brokers"}]}
    dashboard = {"uid": "x", "panels": [{"id": 1, "type": "row", "collapsed": True, "panels": [inner]}]}
    assert [q.panel for q in dashboard_queries.queries(dashboard)] == ["inner"]


# ------------------------------------------------------------------ file provisioning

def test_rate_interval_spans_several_scrapes() -> None:
    # Grafana makes $__rate_interval at least 4 datasource timeIntervals: one below the real
    # scrape interval could leave rate()/increase() a single sample, i.e. no value.
    scrape = prometheus_global(PROMETHEUS_TEMPLATE.read_text(), "scrape_interval")
    datasource = (PROVISIONING / "datasources" / "kmon.yml").read_text()
    provisioned = re.findall(r"^\s+timeInterval:\s*(\S+)\s*$", datasource, re.M)
    assert provisioned, "the provisioned datasource has no timeInterval"
    for time_interval in (SCRAPE_INTERVAL, *provisioned):
        assert duration_s(time_interval) >= scrape, time_interval


def test_provisioning_files_match_the_push_command() -> None:
    datasources = (PROVISIONING / "datasources" / "kmon.yml").read_text()
    providers = (PROVISIONING / "dashboards" / "kmon.yml").read_text()
    assert f"uid: {DATASOURCE_UID}\n" in datasources
    assert f"folderUid: {folder_uid('kmon')}\n" in providers
    assert re.search(r"^\s+path: /\S+$", providers, re.M)


# ------------------------------------------------------------------ kmon dashboards push

def run_push(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kmon")
    add_dashboards_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["dashboards", "push", *argv])
    return args.handler(args)


@pytest.fixture(autouse=True)
def no_grafana_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KMON_GRAFANA_URL", "KMON_GRAFANA_TOKEN", "KMON_GRAFANA_BASIC_AUTH", "KMON_PROMETHEUS_URL",
                 "KMON_FOLDER"):
        monkeypatch.delenv(name, raising=False)


def test_push_without_url_names_the_flag_and_variable() -> None:
    with pytest.raises(SystemExit) as e:
        run_push([])
    assert "--grafana-url" in str(e.value.code) and "KMON_GRAFANA_URL" in str(e.value.code)


def test_push_rejects_token_and_basic_auth_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMON_GRAFANA_TOKEN", "t")
    monkeypatch.setenv("KMON_GRAFANA_BASIC_AUTH", "admin:admin")
    with pytest.raises(SystemExit) as e:
        run_push(["--grafana-url", "http://127.0.0.1:1"])
    assert "not both" in str(e.value.code)


@pytest.mark.parametrize("argv, needle", [
    (["--grafana-url", "localhost:3000"], "http(s) URL"),
    (["--grafana-url", "http://g:3000", "--grafana-basic-auth", "admin"], "user:password"),
])
def test_push_rejects_malformed_flags(argv: list[str], needle: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        run_push(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_push_to_an_unreachable_grafana_names_the_url(capsys: pytest.CaptureFixture) -> None:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://admin:secret@127.0.0.1:{port}"
    assert run_push(["--grafana-url", url]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach Grafana at http://127.0.0.1:{port}" in err
    assert "secret" not in err and "Traceback" not in err


@pytest.fixture
def grafana() -> Iterator[tuple[str, type[FakeGrafana]]]:
    handler = type("Handler", (FakeGrafana,), {"requests": [], "objects": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_push_creates_folder_datasource_and_dashboards_then_updates(grafana, monkeypatch, capsys) -> None:
    url, handler = grafana
    monkeypatch.setenv("KMON_GRAFANA_TOKEN", handler.token)
    argv = ["--grafana-url", url, "--prometheus-url", "http://prometheus:9090"]
    assert run_push(argv) == 0
    out = capsys.readouterr().out
    assert "folder 'kmon' (kmon): created" in out and f"datasource {DATASOURCE_UID}" in out
    uploads = [body for method, path, body in handler.requests if path == "/api/dashboards/db"]
    assert {b["dashboard"]["uid"] for b in uploads} == EXPECTED
    assert all(b["overwrite"] and b["folderUid"] == "kmon" and b["dashboard"]["id"] is None for b in uploads)
    assert handler.objects[f"/api/datasources/uid/{DATASOURCE_UID}"]["url"] == "http://prometheus:9090"

    assert run_push(argv) == 0  # a second push finds both and updates in place
    out = capsys.readouterr().out
    assert "folder 'kmon' (kmon): exists" in out and "updated" in out


def test_push_with_bad_credentials_says_so(grafana, monkeypatch, capsys) -> None:
    url, _handler = grafana
    monkeypatch.setenv("KMON_GRAFANA_TOKEN", "wrong")
    assert run_push(["--grafana-url", url]) == 1
    err = capsys.readouterr().err
    assert f"Grafana at {url} rejected the credentials (401)" in err and "Traceback" not in err


def test_printed_urls_drop_the_password() -> None:
    assert without_userinfo("https://admin:pw@grafana:3000/sub") == "https://grafana:3000/sub"
