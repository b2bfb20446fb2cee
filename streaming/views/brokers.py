"""The brokers family: which brokers are registered, and which hold replicas but are not (down)."""
from __future__ import annotations

from typing import Iterator

from streaming.views.cluster import ClusterModel
from streaming.views.exposition import Sample, Text, render

FAMILY = "brokers"


def texts(model: ClusterModel) -> list[Text]:
    return [render(model.name, _samples(model))]


def _samples(model: ClusterModel) -> Iterator[Sample]:
    holding = set().union(*model.per_topic(_replicas).values())
    yield "kmon_brokers", {}, len(model.registered)
    for b in sorted(holding | set(model.registered)):
        yield "kmon_broker_up", {"broker": b}, int(b in model.registered)
    for b, s in sorted(model.registered.items()):
        # registrations without a PLAINTEXT listener have no host/port: use the first endpoint
        first = s.endpoints[0] if s.endpoints else None
        host = s.host or (first.host if first else "")
        port = s.port if s.port not in (None, -1) else (first.port if first else "")
        yield "kmon_broker_info", {"broker": b, "host": host, "port": port, "rack": s.rack or ""}, 1


def _replicas(model: ClusterModel, topic: str) -> frozenset[int]:
    return frozenset(b for p in model.partitions(topic) for b in p.replicas)
