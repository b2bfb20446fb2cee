"""The brokers family: which brokers are registered and serve, which hold replicas but do not (down),
and under KRaft which are fenced or shutting down."""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from streaming.views.cluster import ClusterModel, PartitionView, SplitTally
from streaming.views.exposition import Sample, Text, render

FAMILY = "brokers"


def render_family(model: ClusterModel) -> list[Text]:
    return [render(model.name, _samples(model))]


class HoldersTally(SplitTally):
    """The replicas each broker holds in one topic, kept by difference (cluster.Tally): a broker
    failure changes a quarter of the partitions, not where replicas are."""

    def __init__(self) -> None:
        self.replicas: Counter[int] = Counter()

    def _placement(self, p: PartitionView, sign: int) -> None:
        for b in p.replicas:   # not Counter.update: its Python-level checks cost more than the count
            self.replicas[b] += sign


def _samples(model: ClusterModel) -> Iterator[Sample]:
    holding = {b for topic in model.topics() for b, n in model.tally(HoldersTally, topic).replicas.items() if n}
    serving = model.serving
    yield "kmon_brokers", {}, len(serving)
    # A fenced broker that holds no replica is not down: KRaft keeps the registration of a broker
    # stopped for good (until it is unregistered), and kmon_broker_fenced shows it.
    for b in sorted(holding | serving):
        yield "kmon_broker_up", {"broker": b}, int(b in serving)
    for b, s in sorted(model.registered.items()):
        # registrations without a PLAINTEXT listener have no host/port: use the first endpoint
        first = s.endpoints[0] if s.endpoints else None
        host = s.host or (first.host if first else "")
        port = s.port if s.port not in (None, -1) else (first.port if first else "")
        yield "kmon_broker_info", {"broker": b, "host": host, "port": port, "rack": s.rack or ""}, 1
    if any(r.source == "kraft" for r in model.live("broker")):
        for b, s in sorted(model.registered.items()):
            yield "kmon_broker_fenced", {"broker": b}, int(s.fenced)
        # a stopped broker stays fenced with its flag set: only those not fenced yet are shutting down
        yield ("kmon_brokers_in_controlled_shutdown", {},
               sum(s.in_controlled_shutdown and not s.fenced for s in model.registered.values()))
