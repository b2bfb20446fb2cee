"""Which clusters one stream app takes when a fleet's clusters are split among several apps
(``kmon stream --cluster-share I/N``), each scraped by the same Prometheus.

A cluster belongs to share ``crc32(name) mod N``: every app of the fleet agrees without talking to
the others, a cluster added later lands in exactly one share, and Spark's executors (its ``crc32``
of the message key's cluster part) and the driver (zlib's) decide alike.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from streaming.fold.entity import UNKNOWN_CLUSTER


@dataclass(frozen=True)
class ClusterShare:
    index: int = 0
    count: int = 1   # 1: the only share, every cluster

    def __post_init__(self) -> None:
        if not (self.count >= 1 and 0 <= self.index < self.count):
            raise ValueError(f"cluster share {self.index}/{self.count}: expected I/N with N >= 1 and 0 <= I < N")

    @property
    def everything(self) -> bool:
        return self.count == 1

    def takes(self, cluster: str) -> bool:
        return self.everything or zlib.crc32(cluster.encode()) % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_cluster_share(text: str) -> ClusterShare:
    """``I/N`` (e.g. ``0/3``, ``1/3``, ``2/3`` for a fleet split in three); ValueError naming it otherwise."""
    index, sep, count = text.strip().partition("/")
    if not (sep and index.isdigit() and count.isdigit()):
        raise ValueError(f"cluster share {text!r}: expected I/N, e.g. 0/3 (this app's share of N)")
    return ClusterShare(int(index), int(count))


def cluster_column(key):
    """The Spark column of a message key's cluster, as :func:`streaming.fold.entity.cluster_of` reads it."""
    from pyspark.sql import functions as F

    return F.when(F.instr(key, "/") > 1, F.substring_index(key, "/", 1)).otherwise(F.lit(UNKNOWN_CLUSTER))


def spark_condition(share: ClusterShare, key):
    """The Spark condition true for the rows whose key's cluster ``share`` takes."""
    from pyspark.sql import functions as F

    return F.pmod(F.crc32(cluster_column(key).cast("binary")), F.lit(share.count)) == F.lit(share.index)
