"""The views: every value of the design brief's metric table, one module per view family
(``MetricSpec.family`` in kmon/metrics.py): controller.py, quorum.py (KRaft), brokers.py, isr.py,
balance.py, groups.py and self.py each compute their metrics from one cluster's records
(cluster.py) and render them (exposition.py).

:class:`Views` keeps every cluster's model up to date with each micro-batch's changed
records and re-renders what changed; a scrape serves the result as it is.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Callable, Mapping

from streaming.fold.entity import EntityRecord, cluster_of
from streaming.views import balance, brokers, controller, groups, isr, quorum
from streaming.views import self as self_family
from streaming.views.cluster import ClusterModel, ViewOptions
from streaming.views.exposition import Exposition, Text
from streaming.views.health import ClusterHealth, cluster_health
from streaming.views.shared import SharedValues
from streaming.views.stats import SelfStats

log = logging.getLogger("kmon.stream")

# The families built from one cluster's model, by name.
CLUSTER_FAMILIES: dict[str, Callable[[ClusterModel], list[Text]]] = {
    module.FAMILY: module.render_family for module in (controller, quorum, brokers, isr, balance, groups)}
LOG_FAILURE_EVERY_S = 60.0   # a family failing at every batch logs once a minute, not at every batch


class Views:
    """Each family of each cluster is built on its own: one that raises is left out (until it
    builds again), counted in kmon_view_errors_total and logged, and the others are served."""

    def __init__(self, options: ViewOptions, clock: Callable[[], float] = time.monotonic):
        self._options = options
        self._clock = clock
        self._models: dict[str, ClusterModel] = {}
        self._texts: dict[tuple[str, str], list[Text]] = {}   # (cluster, family) -> its latest texts
        self._stale: set[str] = set()                         # clusters changed since they were rendered
        self._errors: Counter[tuple[str, str]] = Counter()    # (cluster, family) -> failed builds
        self._logged: dict[str, float] = {}                   # family -> when its failure was last logged
        self._health: list[ClusterHealth] | None = None       # as last asked, until a change is applied
        self._shared = SharedValues()

    def apply(self, changed: Mapping[str, EntityRecord | None]) -> None:
        """Take changed records by message key (<cluster>/<entity>; None: gone). The records are the
        views' from now on: parsed for them, not held elsewhere (their repeated values get shared)."""
        self._health = None
        by_cluster: dict[str, dict[str, EntityRecord | None]] = {}
        for key, record in changed.items():
            if record is not None:
                record = self._shared.record(record)
            cluster, entity = (record.cluster, record.entity) if record is not None \
                else (cluster_of(key), key.partition("/")[2])
            by_cluster.setdefault(cluster, {})[entity] = record
        for cluster, records in by_cluster.items():
            if cluster not in self._models and not any(records.values()):
                continue   # nothing of a cluster never seen (a key of garbage the step dropped)
            model = self._models.setdefault(cluster, ClusterModel(cluster, self._options))
            try:
                model.apply(records)
            except Exception as e:   # a bug meeting odd data: start the cluster's model afresh from its records
                fresh = ClusterModel(cluster, self._options)
                self._models[cluster] = fresh
                everything = {**model.records, **records}
                self._failed(list(CLUSTER_FAMILIES), [cluster], e)
                fresh.apply({entity: r for entity, r in everything.items() if r is not None})
            if self._models[cluster].records:
                self._stale.add(cluster)
            else:   # nothing left of it: no series either
                del self._models[cluster]
                self._stale.discard(cluster)
                self._texts = {k: texts for k, texts in self._texts.items() if k[0] != cluster}

    def record_counts(self) -> dict[str, int]:
        """Records held per cluster, tombstones included."""
        return {cluster: len(model.records) for cluster, model in self._models.items()}

    def health(self) -> list[ClusterHealth]:
        """What is wrong now in each cluster, by name (the API's /api/v1/health); the same answer again
        while no change was applied (asked again and again, it costs nothing more)."""
        if self._health is None:
            self._health = [cluster_health(self._models[cluster]) for cluster in sorted(self._models)]
        return self._health

    def record(self, cluster: str, entity: str) -> EntityRecord | None:
        """An entity's record as the views hold it (a tombstone too), None when they hold none."""
        model = self._models.get(cluster)
        return model.records.get(entity) if model is not None else None

    def refresh(self) -> None:
        """Render what the changes applied since the last refresh touched."""
        for cluster in sorted(self._stale):
            for family, build in CLUSTER_FAMILIES.items():
                self._texts[(cluster, family)] = self._isolated(family, [cluster],
                                                                lambda: build(self._models[cluster]))
        self._stale.clear()

    def exposition(self, stats: SelfStats) -> Exposition:
        self.refresh()
        clusters = sorted(set(self._models) | set(stats.state_rows))
        own = self._isolated(self_family.FAMILY, clusters, lambda: self_family.render_family(stats, clusters))
        errors = self_family.render_errors(self._errors, clusters)
        return Exposition(tuple(t for texts in self._texts.values() for t in texts) + tuple(own) + tuple(errors))

    def _isolated(self, family: str, clusters: list[str], build: Callable[[], list[Text]]) -> list[Text]:
        try:
            return build()
        except Exception as e:   # a bug meeting odd data costs its family, not every metric of every cluster
            self._failed([family], clusters, e)
            return []

    def _failed(self, families: list[str], clusters: list[str], failure: Exception) -> None:
        self._errors.update((cluster, family) for cluster in clusters for family in families)
        now = self._clock()
        for family in families:
            last = self._logged.get(family)
            if last is None or now - last >= LOG_FAILURE_EVERY_S:
                self._logged[family] = now
                log.error("building the %s metrics of cluster(s) %s failed; they are left out until they build "
                          "again (logged at most every %.0f s)", family, ", ".join(clusters), LOG_FAILURE_EVERY_S,
                          exc_info=failure)


__all__ = ["Views", "ViewOptions", "CLUSTER_FAMILIES"]
