"""tests/exposition.py, the integration tests' reader of /metrics, reads what prometheus_client's
parser reads: kmon's whole exposition, odd label values, every value Prometheus writes."""
import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from kmon.events import GroupState
from streaming.views import ViewOptions, Views
from tests.exposition import samples
from streaming.views.stats import BatchStats, SelfStats
from tests.unit.views_builders import BROKERS, keyed, part, rec, topic

ODD = ['a"b\\c\nd', "", "}", '} 1 ', "x\\ny", "\\\\", "\u2028line\x85sep\x1c", "ünï ✓", "a,b=c", "\\t"]


def official(text: str) -> dict:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def same(text: str) -> None:
    mine, theirs = samples(text), official(text)
    assert mine.keys() == theirs.keys()
    for key, value in theirs.items():
        assert mine[key] == value or (math.isnan(mine[key]) and math.isnan(value)), key


def test_kmons_own_exposition_with_odd_group_names_reads_as_prometheus_client_reads_it():
    views = Views(ViewOptions())
    records = [*BROKERS, topic("t", {0: (1, 2, 3), 1: (2, 3, 1)}), part("t", 0, 2, (2, 3)), part("t", 1, 2, (2,))]
    views.apply(keyed([*records, *(rec("group", f"group:{name}", GroupState(name, "Stable", 1), source="groups")
                                   for name in ODD)]))
    stats = SelfStats().add(BatchStats(duration_s=0.25, finished_ms=5_000, input_rows={"c1": 7},
                                       events={("c1", "zk", "partition"): 6}, malformed={("c1", "zk"): 1},
                                       newest_observed_ms={("c1", "zk"): 4_000}, state_rows={"c1": 40}))
    text = views.exposition(stats).body(10_000).decode()
    assert len(samples(text)) > 100
    same(text)


class Odd:
    def collect(self):
        gauge = GaugeMetricFamily("g", "a gauge", labels=["v", "w"])
        for i, name in enumerate(ODD):
            gauge.add_metric([name, str(i)], i)
        for value in (float("nan"), float("inf"), float("-inf"), 1e-9, -12_345_678, 2**63 - 1):
            gauge.add_metric(["n", repr(value)], value)
        counter = CounterMetricFamily("c", "a counter", labels=["v"])
        counter.add_metric(['q"'], 3)
        histogram = HistogramMetricFamily("h", "a histogram", labels=["v"])
        histogram.add_metric(["x"], [("0.5", 1), ("+Inf", 2)], 1.5)
        plain = GaugeMetricFamily("no_labels", "none")
        plain.add_metric([], 7)
        yield from (gauge, counter, histogram, plain)


def test_odd_labels_and_every_value_read_as_prometheus_client_reads_them():
    registry = CollectorRegistry()
    registry.register(Odd())
    text = generate_latest(registry).decode()
    same(text)
    assert samples(text)[("g", frozenset({"v": 'a"b\\c\nd', "w": "0"}.items()))] == 0


@pytest.mark.parametrize("line", ['x{a="1" 2', 'x{a=1} 2', "x", '{a="1"} 2', 'x{a="1"}'])
def test_a_line_that_is_no_sample_is_named(line):
    with pytest.raises(ValueError, match="x|a"):
        samples(f"ok 1\n{line}\n")
