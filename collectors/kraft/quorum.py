"""The metadata quorum as kmon tells it: DescribeQuorum's answer made a QuorumState. Pure."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from collectors.kraft import wire
from kmon.events import QuorumReplica, QuorumState


def quorum_state(info: wire.QuorumInfo, now_ms: int, features: Mapping[str, int] | None = None) -> QuorumState:
    """``features``: the finalized feature levels the metadata log says (the sampled mode has none)."""
    return QuorumState(leader_id=info.leader_id, epoch=info.epoch, high_watermark=info.high_watermark,
                       voters=tuple(quorum_replica(r, info.high_watermark, now_ms) for r in info.voters),
                       observers=tuple(quorum_replica(r, info.high_watermark, now_ms) for r in info.observers),
                       features=dict(sorted((features or {}).items())))


def quorum_replica(r: wire.ReplicaInfo, high_watermark: int, now_ms: int) -> QuorumReplica:
    """A voter or observer, its lag: records behind the high watermark, and since it last caught up."""
    behind = max(0, high_watermark - r.log_end_offset) if r.log_end_offset >= 0 else 0
    lag_ms = max(0, now_ms - r.last_caught_up_ms) if behind and r.last_caught_up_ms >= 0 else 0
    return QuorumReplica(replica_id=r.replica_id, log_end_offset=max(r.log_end_offset, -1), lag_records=behind,
                         lag_ms=lag_ms)


def progress_only(old: QuorumState, new: QuorumState) -> bool:
    """The two differ at most in how far the log went: the high watermark and the replicas' log end
    offsets, which the active controller's no-op records move every 500 ms. Such a change is sent at
    most every quorum progress interval; any other one (leader, epoch, voters, lag, features) at once."""
    return _without_progress(old) == _without_progress(new)


def _without_progress(state: QuorumState) -> QuorumState:
    return replace(state, high_watermark=0, voters=tuple(replace(r, log_end_offset=0) for r in state.voters),
                   observers=tuple(replace(r, log_end_offset=0) for r in state.observers))
