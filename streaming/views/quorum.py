"""The quorum family (KRaft): the metadata quorum's leader, epoch and high watermark, its voters and
observers, each voter's lag, and the finalized feature levels. A ZooKeeper-mode cluster has no quorum
entity and none of these series; a voter that left the quorum leaves with its series."""
from __future__ import annotations

from typing import Iterator

from kmon.events import QuorumReplica, QuorumState
from streaming.views.cluster import ClusterModel
from streaming.views.exposition import Sample, Text, render

FAMILY = "quorum"
METADATA_VERSION = "metadata.version"


def render_family(model: ClusterModel) -> list[Text]:
    return [render(model.name, _samples(model))]


def _samples(model: ClusterModel) -> Iterator[Sample]:
    for record in model.live("quorum"):   # one entity: "quorum"; none until the KRaft collector described it
        q: QuorumState = record.state
        yield "kmon_quorum_leader_id", {}, q.leader_id
        yield "kmon_quorum_epoch", {}, q.epoch
        if q.high_watermark >= 0:   # -1: the leader does not know it yet
            yield "kmon_quorum_high_watermark", {}, q.high_watermark
        voters = {v.replica_id: v for v in q.voters}   # one series each, whatever the event holds
        yield "kmon_quorum_voters", {}, len(voters)
        yield "kmon_quorum_observers", {}, len(q.observers)
        for voter, v in sorted(voters.items()):
            records, seconds = _lag(v)
            yield "kmon_quorum_voter_lag_records", {"voter": voter}, records
            yield "kmon_quorum_voter_lag_seconds", {"voter": voter}, seconds
        if METADATA_VERSION in q.features:
            yield "kmon_metadata_version", {}, q.features[METADATA_VERSION]
        for feature, level in sorted(q.features.items()):
            yield "kmon_feature_level", {"feature": feature}, level


def _lag(voter: QuorumReplica) -> tuple[float, float]:
    """Records and seconds behind. A voter the leader has not heard from (log end offset -1: dead
    since before the leader was elected, say) is behind by an unknown amount, not by nothing."""
    if voter.log_end_offset < 0:
        return float("inf"), float("inf")
    return voter.lag_records, voter.lag_ms / 1000
