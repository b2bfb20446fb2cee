"""The Prometheus alert rules, their promtool unit tests, and the Prometheus/Alertmanager configs.

Runs promtool and amtool on the files in deploy/, and checks that the rules cover the
design brief's alerts, only use metric names from kmon.metrics, and keep the alert timing
their comments promise.
The venv has no YAML library, so the rule file is read by a small reader of the block
YAML the rule file is written in (see ``load_rules``); promtool checks the real syntax.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from kmon.metrics import known_series_names
from stack.configs import prometheus_config, scrape_security
from tests.tools import duration_s, prometheus_global, required_tool

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "deploy" / "prometheus" / "rules"
RULES = RULES_DIR / "kmon-alerts.yml"
RULE_TESTS = RULES_DIR / "kmon-alerts.test.yml"
ALERTMANAGER_CONFIG = REPO / "deploy" / "alertmanager" / "alertmanager.yml"

# The "Alerts" section of the design brief; "collector down" and "pipeline stalled" are
# the monitor's own alerts. (A quorum without a leader is NoActiveController's, under KRaft.)
DESIGN_ALERTS = (
    "NoActiveController", "ControllerFlapping", "IsrShrinking", "UnderReplicatedPartitions",
    "UnderMinIsr", "OfflinePartitions", "UncleanLeaderElection", "BrokerDown", "LeaderImbalance",
    "ConsumerGroupRebalanceStorm", "ConsumerGroupStuckRebalancing", "ConsumerGroupLagSeconds",
    "ConsumerGroupDataLoss", "ConsumerGroupNearDataLoss", "QuorumVoterLagging", "QuorumStalled", "BrokerFenced", "EligibleLeaderElection",
    "KmonCollectorDown", "KmonPipelineStalled",
)
# Prometheus' own series a rule may use.
BUILTIN_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped",
                            "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE"})
# Alerts of a broker, controller or ISR fault, and the most seconds each may take to fire
# after kmon's view shows the fault.
FAULT_ALERTS = ("NoActiveController", "IsrShrinking", "UnderReplicatedPartitions", "UnderMinIsr",
                "OfflinePartitions", "BrokerDown")
FAULT_TO_ALERT_S = 15
AGGREGATIONS = ("sum", "min", "max", "avg", "group", "count", "stddev", "stdvar",
                "topk", "bottomk", "quantile", "count_values")


# ------------------------------------------------------------------ reading the rule file

def _scalar(text: str) -> str:
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)  # YAML double-quoted escapes, as used here, are JSON's
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    return re.sub(r"\s+#.*$", "", text)


def load_rules(path: Path = RULES) -> list[dict]:
    """Rules of a block-style rule file: group, name, kind, expr, for, labels, annotations.

    Handles what kmon-alerts.yml uses: ``- name:`` groups, ``- alert:``/``- record:`` items,
    ``key: scalar`` (plain, single- or double-quoted), ``key: |`` block scalars, and the
    ``labels:`` and ``annotations:`` maps. Anything else inside a rule is an error, not
    silently skipped.
    """
    rules: list[dict] = []
    rule: dict | None = None
    group = None
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        group_start = re.match(r"^\s*- name:\s*(.+)$", line)
        if group_start:
            group, rule = _scalar(group_start[1]), None
            continue
        start = re.match(r"^\s*- (alert|record):\s*(.+)$", line)
        if start:
            rule = {"group": group, "kind": start[1], "name": _scalar(start[2]),
                    "labels": {}, "annotations": {}, "_indent": indent + 2, "_map": None}
            rules.append(rule)
            continue
        if rule is None:
            continue
        if indent < rule["_indent"]:
            rule = None
            continue
        kv = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$", line)
        assert kv, f"{path}:{i}: unsupported line in rule {rule['name']}: {line!r}"
        key, value = kv[1], kv[2]
        if indent > rule["_indent"]:
            assert rule["_map"], f"{path}:{i}: unexpected nesting in rule {rule['name']}"
            rule[rule["_map"]][key] = _scalar(value)
            continue
        rule["_map"] = None
        if key in ("labels", "annotations") and not value:
            rule["_map"] = key
        elif value.startswith(("|", ">")):
            block = []
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip()) > rule["_indent"]):
                block.append(lines[i])
                i += 1
            margin = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            text = "\n".join(b[margin:] for b in block).strip("\n")
            rule[key] = text if value.startswith("|") else " ".join(text.split())
        else:
            rule[key] = _scalar(value)
    for r in rules:
        del r["_indent"], r["_map"]
    return rules


@pytest.fixture(scope="module")
def rules() -> list[dict]:
    return load_rules()


@pytest.fixture(scope="module")
def alerts(rules: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in rules if r["kind"] == "alert"}


@pytest.fixture(scope="module")
def records(rules: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in rules if r["kind"] == "record"}


def _strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)


def _series_name(name: str) -> str:
    """A regex of the series or recording rule ``name``, not of a longer name containing it."""
    return rf"(?<![\w:]){re.escape(name)}(?![\w:])"


def _inlined(expr: str, records: dict[str, dict]) -> str:
    """The expression with the recording rules it uses replaced by their expressions."""
    for name, rec in records.items():
        expr = re.sub(_series_name(name), lambda _m: f"({rec['expr']})", expr)
    return expr


@pytest.fixture(scope="module")
def rendered_config() -> str:
    """prometheus.yml as the local stack writes it."""
    return prometheus_config(["127.0.0.1:9308"], ["127.0.0.1:9310", "127.0.0.1:9311"], "127.0.0.1:9093")


# ------------------------------------------------------------------ promtool

def _run(*cmd: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_check_rules() -> None:
    res = _run(required_tool("promtool"), "check", "rules", str(RULES))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_promtool_unit_tests_pass() -> None:
    res = _run(required_tool("promtool"), "test", "rules", RULE_TESTS.name, cwd=RULES_DIR)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


# ------------------------------------------------------------------ the rules' content

def test_the_reader_sees_every_rule(rules: list[dict]) -> None:
    text = RULES.read_text()
    assert len(rules) == len(re.findall(r"^\s*- (?:alert|record):", text, re.M))
    for r in rules:
        assert r.get("expr"), f"{r['name']}: no expr"


def test_every_alert_of_the_design_brief_exists(alerts: dict[str, dict]) -> None:
    missing = [a for a in DESIGN_ALERTS if a not in alerts]
    assert not missing, f"alerts of the design brief without a rule: {missing}"


@pytest.mark.parametrize("name", DESIGN_ALERTS)
def test_alert_has_severity_and_annotations(alerts: dict[str, dict], name: str) -> None:
    rule = alerts[name]
    assert rule["labels"].get("severity") in ("critical", "warning"), rule["labels"]
    ann = rule["annotations"]
    for key in ("summary", "description", "runbook"):
        assert ann.get(key, "").strip(), f"{name}: no {key}"
    assert "$labels" in ann["description"], f"{name}: description names no label"
    assert "\n" not in ann["runbook"], f"{name}: runbook must be one line"
    assert "for" in rule, f"{name}: no `for:`"


def test_metric_names_exist(rules: list[dict], records: dict[str, dict]) -> None:
    known = known_series_names()
    problems = []
    for r in rules:
        expr = r["expr"]
        for pattern in re.findall(r'__name__\s*=~\s*"([^"]*)"', expr):
            if not any(re.fullmatch(pattern, n) for n in known):
                problems.append(f"{r['name']}: __name__=~{pattern!r} matches no catalogued metric")
        bare = _strip_strings(expr)
        for name in re.findall(r"(?<![\w:])(kmon_\w+)(?![\w:])", bare):
            if name not in known:
                problems.append(f"{r['name']}: unknown metric {name}")
        for name in re.findall(r"(?<![\w:.])([A-Za-z_]\w*:[\w:]*)(?![\w:])", bare):
            if name not in records:
                problems.append(f"{r['name']}: uses {name}, which no rule records")
        for name in re.findall(r"(?<![\w:])([A-Za-z_]\w*)\s*\{", bare):
            if not name.startswith("kmon_") and name not in BUILTIN_SERIES:
                problems.append(f"{r['name']}: {name} is neither a kmon metric nor a Prometheus built-in")
    assert not problems, "\n".join(problems)


def test_recording_rule_names_follow_their_metric(records: dict[str, dict]) -> None:
    known = known_series_names()
    for name, rec in records.items():
        level, metric, _ops = name.split(":")
        assert "cluster" in level.split("_"), name
        assert metric in known or metric + "_total" in known, f"{name}: {metric} is not catalogued"
        assert metric in rec["expr"], name


def test_every_aggregation_keeps_cluster(rules: list[dict]) -> None:
    problems = []
    for r in rules:
        bare = _strip_strings(r["expr"])
        for m in re.finditer(rf"\b({'|'.join(AGGREGATIONS)})\b\s*(by\s*\(([^)]*)\)|without\s*\(([^)]*)\)|\()",
                             bare):
            if m[3] is not None:
                if "cluster" not in [x.strip() for x in m[3].split(",")]:
                    problems.append(f"{r['name']}: {m[0]!r} drops cluster")
            elif m[4] is not None:
                if "cluster" in [x.strip() for x in m[4].split(",")]:
                    problems.append(f"{r['name']}: {m[0]!r} drops cluster")
            else:
                problems.append(f"{r['name']}: {m[1]}(...) without `by (cluster, ...)`")
    assert not problems, "\n".join(problems)


def test_burst_alerts_count_with_increase(alerts: dict[str, dict], records: dict[str, dict]) -> None:
    assert "increase(kmon_controller_changes_total[" in _inlined(alerts["ControllerFlapping"]["expr"], records)
    assert "increase(kmon_isr_shrinks_total[" in _inlined(alerts["IsrShrinking"]["expr"], records)
    assert "increase(kmon_elr_leader_elections_total[" in _inlined(alerts["EligibleLeaderElection"]["expr"], records)


def test_no_active_controller_reads_the_kraft_quorum_too(alerts: dict[str, dict]) -> None:
    """Under KRaft the active controller is the quorum leader: one alert for both entities that
    tell it, not a second page for the same fault."""
    expr = alerts["NoActiveController"]["expr"]
    assert "kmon_active_controller_count" in expr and "kmon_quorum_leader_id" in expr


def test_fault_alerts_fire_seconds_after_the_view_shows_the_fault(alerts: dict[str, dict],
                                                                  rendered_config: str) -> None:
    # An alert fires at most `for:` + one scrape + one evaluation after kmon's view shows
    # its condition; kmon's point is to page seconds after a change.
    lag = sum(prometheus_global(rendered_config, key) for key in ("scrape_interval", "evaluation_interval"))
    for name in FAULT_ALERTS:
        assert duration_s(alerts[name]["for"]) + lag <= FAULT_TO_ALERT_S, name
    # BrokerDown inhibits these in Alertmanager, so it must fire first, although on the fast
    # profile a leader can drop a dead follower from its ISRs before its session expires.
    for name in ("IsrShrinking", "UnderReplicatedPartitions", "UnderMinIsr"):
        assert duration_s(alerts["BrokerDown"]["for"]) < duration_s(alerts[name]["for"]), name


def test_for_durations_are_whole_evaluations(alerts: dict[str, dict], rendered_config: str) -> None:
    # an alert fires at the first evaluation at least `for:` after it became pending
    evaluation = prometheus_global(rendered_config, "evaluation_interval")
    for name, rule in alerts.items():
        assert duration_s(rule["for"]) % evaluation == 0, f"{name}: for: {rule['for']}"


def test_alerts_read_recording_rules_of_the_same_evaluation(rules: list[dict]) -> None:
    # A group evaluates its rules in order at one timestamp; a recording rule of another
    # group, or later in the same one, reaches the alert up to one evaluation late.
    for i, alert in enumerate(rules):
        if alert["kind"] != "alert":
            continue
        for j, record in enumerate(rules):
            if record["kind"] == "record" and re.search(_series_name(record["name"]), alert["expr"]):
                assert record["group"] == alert["group"] and j < i, \
                    f"{alert['name']} reads {record['name']} of group {record['group']}"


def test_rule_tests_sample_and_evaluate_like_the_prometheus_config(rendered_config: str) -> None:
    text = RULE_TESTS.read_text()
    scrape = prometheus_global(rendered_config, "scrape_interval")
    evaluation = prometheus_global(rendered_config, "evaluation_interval")
    # a sample per evaluation at least, else the bound of `for:` + 2 evaluations does not hold
    assert scrape <= evaluation
    assert [duration_s(d) for d in re.findall(r"^evaluation_interval:\s*(\S+)", text, re.M)] == [evaluation]
    assert {duration_s(d) for d in re.findall(r"^\s+interval:\s*(\S+)", text, re.M)} == {scrape}


def test_leader_imbalance_uses_kafkas_ten_percent(alerts: dict[str, dict]) -> None:
    expr = alerts["LeaderImbalance"]["expr"]
    assert re.search(r"kmon_broker_leader_imbalance_ratio\)\s*>\s*0\.10?\b", expr), expr


def test_every_alert_has_firing_and_silent_unit_tests() -> None:
    text = RULE_TESTS.read_text()
    firing: set[str] = set()
    silent: set[str] = set()
    # each alert_rule_test item runs from its alertname to the next eval_time/alertname
    for m in re.finditer(r"alertname:\s*([A-Za-z]+)(.*?)(?=eval_time:|alertname:|\Z)", text, re.S):
        body = m[2]
        if re.search(r"exp_alerts:\s*\[\s*\]", body):
            silent.add(m[1])
        elif "exp_labels:" in body and "summary:" in body:
            firing.add(m[1])
    assert not [a for a in DESIGN_ALERTS if a not in firing], f"no firing case: {set(DESIGN_ALERTS) - firing}"
    assert not [a for a in DESIGN_ALERTS if a not in silent], f"no silent case: {set(DESIGN_ALERTS) - silent}"


def test_job_names_match_the_scrape_config(rules: list[dict], rendered_config: str) -> None:
    jobs = set(re.findall(r"^\s*- job_name:\s*(\S+)", rendered_config, re.M))
    assert {"kmon-stream", "kmon-collector"} <= jobs
    used = {j for r in rules for j in re.findall(r'job\s*=\s*"([^"]+)"', r["expr"])}
    assert used and used <= jobs, used - jobs


# ------------------------------------------------------------------ Prometheus config

def test_prometheus_config_is_valid_and_loads_the_rules(rendered_config: str, tmp_path: Path) -> None:
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(rendered_config)
    res = _run(required_tool("promtool"), "check", "config", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    assert str(RULES) in res.stdout, "the rules file is not loaded"
    assert RULE_TESTS.name not in res.stdout, "the unit-test file must not be loaded as rules"
    assert not [line for line in rendered_config.splitlines() if "{{" in line.replace("{{ ", "")
                and not line.lstrip().startswith("#")], "unreplaced placeholder"


def test_a_secured_stack_is_scraped_over_tls_with_its_password(tmp_path: Path) -> None:
    ca, password = tmp_path / "ca.pem", tmp_path / "password"
    ca.write_text("")
    password.write_text("x")
    rendered = prometheus_config(["127.0.0.1:9308"], ["127.0.0.1:9310"], "127.0.0.1:9093",
                                 scrape_security(ca, "kmon", password))
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(rendered)
    res = _run(required_tool("promtool"), "check", "config", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    jobs = {job["job_name"]: job for job in yaml.safe_load(rendered)["scrape_configs"]}
    for job in ("kmon-stream", "kmon-collector"):
        assert jobs[job]["scheme"] == "https" and jobs[job]["tls_config"] == {"ca_file": str(ca)}
        assert jobs[job]["basic_auth"] == {"username": "kmon", "password_file": str(password)}


def test_prometheus_config_scrapes_the_given_targets(rendered_config: str) -> None:
    targets = dict(re.findall(r"- job_name:\s*(\S+).*?targets:\s*(\[.*?\])", rendered_config, re.S))
    assert json.loads(targets["kmon-stream"]) == ["127.0.0.1:9308"]
    assert json.loads(targets["kmon-collector"]) == ["127.0.0.1:9310", "127.0.0.1:9311"]
    alertmanagers = re.search(r"alertmanagers:.*?targets:\s*(\[.*?\])", rendered_config, re.S)
    assert alertmanagers and json.loads(alertmanagers[1]) == ["127.0.0.1:9093"]


# ------------------------------------------------------------------ Alertmanager config

def test_alertmanager_config_amtool() -> None:
    res = _run(required_tool("amtool"), "check-config", str(ALERTMANAGER_CONFIG))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_alertmanager_routes_and_inhibitions() -> None:
    text = ALERTMANAGER_CONFIG.read_text()
    live = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    group_by = re.search(r"^\s*group_by:\s*\[([^\]]*)\]", live, re.M)
    assert group_by and "cluster" in group_by[1]
    for severity in ("critical", "warning"):
        assert re.search(rf"matchers:.*severity\s*=\s*\\?\"?{severity}", live), severity
    inhibit = live[live.index("inhibit_rules:"):]
    blocks = re.split(r"^\s*- source_matchers:", inhibit, flags=re.M)[1:]
    broker_down = [b for b in blocks if re.match(r"\s*\[\s*'alertname=\"BrokerDown\"'", b)]
    assert broker_down, "no inhibition by BrokerDown"
    block = broker_down[0]
    for target in ("UnderReplicatedPartitions", "IsrShrinking", "UnderMinIsr"):
        assert target in block, target
    assert re.search(r"equal:\s*\[\s*cluster\s*\]", block)
