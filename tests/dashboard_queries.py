"""The dashboards' queries as the tests read them: listed per panel, annotation and variable, the metric
names they use, and written out for a real Prometheus with a cluster's values. The tests hold every
query to the metric catalogue (kmon.metrics), to a real PromQL parser and to a real Prometheus."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from dashboards.catalog import panels

# Prometheus' own series a panel may use besides kmon_*.
BUILTIN_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})

_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                       "and", "or", "unless", "offset", "inf", "nan", "atan2"})
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
# Label lists of grouping/matching modifiers, label matchers and range/subquery selectors
# hold label names and durations, never metric names.
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_BRACED = re.compile(r"\{[^}]*\}|\[[^\]]*\]")
_IDENT = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)(?![\w:]|\s*\()")
# label_values(<selector>, <label>) of a variable query: only the selector names a metric.
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", re.DOTALL)
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


@dataclass(frozen=True)
class Query:
    dashboard: str  # uid
    panel: str  # title, or the annotation's name
    ref_id: str
    expr: str
    # a PromQL-driven annotation: Grafana runs it over the dashboard's time range and marks
    # each moment it returns something; most of the time it returns nothing
    annotation: bool = False


def queries(dashboard: Mapping[str, Any]) -> list[Query]:
    """Every panel query, then every annotation query."""
    return [Query(dashboard["uid"], panel.get("title", ""), target.get("refId", ""), target["expr"])
            for panel in panels(dashboard)
            for target in panel.get("targets", [])
            if target.get("expr")] + [
        Query(dashboard["uid"], a["name"], "annotation", a["expr"], annotation=True)
        for a in annotations(dashboard)]


def annotations(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The dashboard's PromQL annotations (not Grafana's built-in one)."""
    return [a for a in dashboard.get("annotations", {}).get("list", []) if a.get("expr")]


def variable_queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, query) of each query variable, e.g. ("topic", "label_values(kmon_partitions{...}, topic)")."""
    result = []
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var.get("query")
            result.append((var["name"], query.get("query", "") if isinstance(query, dict) else query or ""))
    return result


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression (or a label_values() variable query) selects.

    Returns every series name, kmon_* or not, so that a typo shows up as an unknown name
    rather than vanishing; function names, keywords, label names, durations and
    template variables are not metric names.
    """
    selector = _LABEL_VALUES.match(expr)
    text = _STRINGS.sub('""', selector.group(1) if selector else expr)
    text = _LABEL_LISTS.sub(" ", text)
    text = _BRACED.sub(" ", text)
    return {name for name in _IDENT.findall(text) if name not in _KEYWORDS}


def variables(expr: str) -> set[str]:
    """Grafana template variables an expression uses ($name and ${name} forms)."""
    return {a or b for a, b in _VARIABLE.findall(expr)}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace $name/${name} by ``values[name]``; an unknown variable is a KeyError."""
    return _VARIABLE.sub(lambda m: values[m.group(1) or m.group(2)], expr)


def regex_literal(value: str) -> str:
    """``value`` as a regex matching only itself, written inside a PromQL double-quoted string."""
    escaped = re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", value)
    return escaped.replace("\\", "\\\\")


def template_values(cluster: str, *, rate_interval: str = "1m", range_: str = "1h") -> dict[str, str]:
    """What Grafana would substitute, for one cluster, all topics, groups and group types."""
    return {"cluster": regex_literal(cluster), "topic": ".*", "group": ".*", "type": ".*",
            "__rate_interval": rate_interval, "__interval": rate_interval, "__range": range_}


def queries_for_prometheus(dashboard: Mapping[str, Any], cluster: str, *, rate_interval: str = "1m",
                           range_: str = "1h", annotation: bool = False) -> list[tuple[str, str]]:
    """(panel title, expression) of every panel query, or with ``annotation`` of every
    annotation query, ready for Prometheus' query API."""
    values = template_values(cluster, rate_interval=rate_interval, range_=range_)
    return [(q.panel, substitute(q.expr, values)) for q in queries(dashboard) if q.annotation == annotation]
