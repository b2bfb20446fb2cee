"""The self family: what the stream app saw and did, per cluster (events, malformed events,
delays, batch duration, state held, history rows, view families that failed to build)."""
from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from streaming.views.exposition import FAMILIES, Text, render
from streaming.views.stats import SelfStats

FAMILY = "self"
ClusterSample = tuple[str, str, Mapping[str, object], float]   # cluster first


def render_family(stats: SelfStats, clusters: Iterable[str]) -> list[Text]:
    by_cluster: dict[str, list] = {}
    for cluster, name, labels, value in _samples(stats, sorted(clusters)):
        by_cluster.setdefault(cluster, []).append((name, labels, value))
    return [render(cluster, samples) for cluster, samples in by_cluster.items()]


def render_errors(errors: Mapping[tuple[str, str], int], clusters: Iterable[str]) -> list[Text]:
    """kmon_view_errors_total of every family, from 0, so that increase() sees the first error."""
    return [render(cluster, [("kmon_view_errors_total", {"family": family}, errors.get((cluster, family), 0))
                             for family in FAMILIES]) for cluster in sorted(clusters)]


def _samples(s: SelfStats, clusters: list[str]) -> Iterator[ClusterSample]:
    for (cluster, source, kind), n in s.events.items():
        yield cluster, "kmon_events_total", {"source": source, "kind": kind}, n
    for (cluster, source), n in s.malformed.items():
        yield cluster, "kmon_malformed_total", {"source": source}, n
    for (cluster, source), ms in s.last_event_ms.items():
        yield cluster, "kmon_last_event_timestamp_seconds", {"source": source}, ms / 1000
    for cluster, delay in s.event_delay_s.items():
        yield cluster, "kmon_event_delay_seconds", {}, delay
    for cluster, n in s.input_rows.items():
        yield cluster, "kmon_stream_input_rows_total", {}, n
    for cluster, n in s.state_rows.items():
        yield cluster, "kmon_stream_state_rows", {}, n
    for cluster in clusters:   # from 0, so that increase() sees the first ones
        yield cluster, "kmon_history_rows_total", {}, s.history_rows.get(cluster, 0)
        yield cluster, "kmon_history_lost_rows_total", {}, s.history_lost.get(cluster, 0)
    if s.batch_duration_s is not None:
        # one pipeline serves every cluster: each cluster's series shows its batch duration
        for cluster in clusters:
            yield cluster, "kmon_stream_batch_duration_seconds", {}, s.batch_duration_s
