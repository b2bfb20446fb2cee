"""Prometheus' text format (0.0.4), written by kmon itself: the views render each part of a
family (a topic, a group) once, when its records change, and a scrape only joins the parts.

prometheus_client's custom-Collector path would rebuild and format every sample at every
scrape (its cost: bench/README.md); its format is followed here (HELP/TYPE lines, label escaping,
Go-style floats; labels in kmon's order, `cluster` first, where it sorts them), and tests read it
with its parser.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping

from prometheus_client.utils import floatToGoString

from kmon.metrics import BY_NAME, CATALOG, MetricSpec

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# What the stream app serves: the views and the monitor itself (the collectors serve theirs).
EXPORTED: tuple[MetricSpec, ...] = tuple(m for m in CATALOG if m.family != "collector")
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(m.family for m in EXPORTED))   # controller .. self


@dataclass(frozen=True)
class Since:
    """A gauge rendered at scrape time: the seconds from ``ms`` to the scrape."""
    ms: int


Sample = tuple[str, Mapping[str, object], "float | Since"]   # name, labels besides cluster, value


@dataclass(frozen=True)
class Text:
    """Rendered samples of one part of a family: their lines per metric name, and the
    samples whose value is an age, as (line without value, since ms)."""
    lines: Mapping[str, str] = field(default_factory=dict)
    ages: Mapping[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)


def render(cluster: str, samples: Iterable[Sample]) -> Text:
    """Raises on a name outside the catalogue, labels not its own, or a value no float
    holds: the caller's family fails as a whole, not the scrape."""
    lines: dict[str, list[str]] = defaultdict(list)
    ages: dict[str, list[tuple[str, int]]] = defaultdict(list)
    first = _pair("cluster", cluster)   # every series' first label
    # label="value" texts met in this call: a topic's samples share its label, and a
    # partition's detail series their partition's
    pairs: dict[tuple[str, type, object], str] = {}
    for name, labels, value in samples:
        order, names = _LABELS[name]
        if labels.keys() != names:
            raise ValueError(f"{name}: labels {sorted(labels)}, the catalogue has {list(order)}")
        parts = [first]
        for label in order:
            v = labels[label]
            pair = pairs.get(key := (label, type(v), v))
            if pair is None:
                pair = pairs[key] = _pair(label, v)
            parts.append(pair)
        head = f"{name}{{{','.join(parts)}}} "
        if isinstance(value, Since):
            ages[name].append((head, value.ms))
        else:
            lines[name].append(f"{head}{go_float(value)}\n")
    return Text({name: "".join(ls) for name, ls in lines.items()}, {name: tuple(a) for name, a in ages.items()})


class Rows:
    """Series of several names over the same labels (a partition's detail), one row of label
    values and a value per name each: what render() writes for them, with each row's labels
    formatted once for all names and the catalogue checked once, not per sample (after a
    broker failure at 100k partitions, 75k rows). A row's lines can be kept and joined again
    into a later Text (the ISR family keeps a partition's until it is judged again). Raises as
    render() does."""

    def __init__(self, cluster: str, names: tuple[str, ...], labels: tuple[str, ...]):
        for name in names:
            if _LABELS[name][0] != labels:
                raise ValueError(f"{name}: labels {list(labels)}, the catalogue has {list(_LABELS[name][0])}")
        self._names, self._labels = names, labels
        self._first = _pair("cluster", cluster)
        self._pairs: dict[tuple[str, type, object], str] = {}

    def row(self, label_values: tuple[object, ...], values: tuple[float, ...]) -> tuple[str, ...]:
        """One line per name."""
        parts = [self._first]
        for label, v in zip(self._labels, label_values, strict=True):
            pair = self._pairs.get(key := (label, type(v), v))
            if pair is None:
                pair = self._pairs[key] = _pair(label, v)
            parts.append(pair)
        head = f"{{{','.join(parts)}}} "
        return tuple(f"{name}{head}{go_float(value)}\n" for name, value in zip(self._names, values, strict=True))

    def text(self, rows: Iterable[tuple[str, ...]]) -> Text:
        """The Text of rows made by row(), in their order."""
        per_name = tuple(zip(*rows)) or ((),) * len(self._names)
        return Text({name: "".join(lines) for name, lines in zip(self._names, per_name) if lines})


def joined(*texts: Text) -> Text:
    """One Text of parts that render different names."""
    return Text({name: lines for t in texts for name, lines in t.lines.items()},
                {name: ages for t in texts for name, ages in t.ages.items()})


# name -> its labels besides cluster, in order and as a set (checked against every sample's)
_LABELS: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    name: (spec.labels, frozenset(spec.labels)) for name, spec in BY_NAME.items()}


def go_float(value: object) -> str:
    """prometheus_client's floatToGoString, without its float round trip for the small ints
    most samples are (counts, ids): it writes those as Python's repr of the float does."""
    if type(value) is int and -10**15 < value < 10**6:   # from 10**6 on, Go's exponent form
        return f"{value}.0"
    return floatToGoString(float(value))   # type: ignore[arg-type]


def _pair(label: str, value: object) -> str:
    text = value if type(value) is str else str(value)
    if "\\" in text or "\n" in text or '"' in text:
        text = text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return f'{label}="{text}"'


def _header(spec: MetricSpec) -> str:
    help_ = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {spec.name} {help_}\n# TYPE {spec.name} {spec.type}\n"


@dataclass(frozen=True)
class Exposition:
    """A whole scrape's body, from the Texts of every family of every cluster."""
    texts: tuple[Text, ...]

    @classmethod
    def empty(cls) -> Exposition:
        return cls(())

    @cached_property   # once per published exposition; two scrapes racing here compute the same thing
    def _by_name(self) -> dict[str, tuple[list[str], list[tuple[str, int]]]]:
        out: dict[str, tuple[list[str], list[tuple[str, int]]]] = {spec.name: ([], []) for spec in EXPORTED}
        for text in self.texts:
            for name, lines in text.lines.items():
                out[name][0].append(lines)
            for name, ages in text.ages.items():
                out[name][1].extend(ages)
        return out

    def body(self, now_ms: int) -> bytes:
        parts: list[str] = []
        for spec in EXPORTED:
            lines, ages = self._by_name[spec.name]
            if lines or ages:
                parts.append(_header(spec))
                parts += lines
                parts += [f"{head}{floatToGoString(max(0, now_ms - ms) / 1000)}\n" for head, ms in ages]
        return "".join(parts).encode()
