"""The metadata quorum as kmon tells it: DescribeQuorum's answer made a QuorumState, and when the
collector sends it. Pure: the clock is passed in."""
from __future__ import annotations

from dataclasses import dataclass, replace
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


# No leader has answered the collector's fetches for this long: the quorum has none. A live leader
# answers every fetch within its wait (0.5 s), Kafka elects a new one within its fetch and election
# timeouts (about 3 s by default), and a leader that lost its majority resigns after 1.5 fetch timeouts.
LEADERLESS_S = 5.0


@dataclass
class QuorumTeller:
    """Which description of the quorum the collector sends, and when: a change other than progress
    at once; otherwise every ``progress_interval_s``, unchanged too, so the views know the description
    is fresh (a high watermark that stopped, QuorumStalled, is told apart from a collector that
    stopped telling it); and the quorum without a leader once none has answered for ``LEADERLESS_S``
    (a majority of voters down or cut off: the log says nothing more, and the voters answer
    DescribeQuorum with an error; the views kept the last leader for as long as that lasted)."""
    progress_interval_s: float
    last: QuorumState | None = None
    _due: float = 0.0

    def described(self, state: QuorumState, now: float) -> QuorumState | None:
        last = self.last
        if last is None or (state != last and not progress_only(last, state)) or now >= self._due:
            return self._sent(state, now)
        return None

    def unanswered(self, last_answer: float, now: float) -> QuorumState | None:
        """``last_answer``: when a leader last answered a fetch."""
        last = self.last
        if last is None or last.leader_id < 0 or now - last_answer < LEADERLESS_S:
            return None
        # no leader, at the last epoch known; the voters as last described (who lags, only a leader says)
        return self._sent(replace(last, leader_id=-1), now)

    def _sent(self, state: QuorumState, now: float) -> QuorumState:
        self.last, self._due = state, now + self.progress_interval_s
        return state
