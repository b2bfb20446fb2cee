"""Where the metadata quorum's leader listens, from what the controllers answer. Pure: no I/O.

A controller that does not lead answers a fetch with the leader's id and epoch, and the leader's
address on the listener asked when it knows it. It may not know it (a voter restarted with static
voters knows their first listener only), and the address kmon holds may be stale. Whatever the
answers, the collector must never ask one node the same question twice in a row and expect another
answer: that was a silent busy loop, a collector that never caught up and said nothing but "no
answer yet". So a refusal that teaches nothing sends the collector to the next controller it was
given, and :meth:`LeaderFinder.why_lost` words what is missing for the operator.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from collectors.kraft import wire

Address = tuple[str, int]


class Move(enum.Enum):
    AGAIN = "ask the same node again"        # it leads, and told kmon the epoch to ask at
    ELSEWHERE = "ask another node"           # close, and connect to target()
    WAIT = "wait for an election"            # nobody leads yet: close, pause, then target()


@dataclass
class LeaderFinder:
    bootstrap: tuple[Address, ...]          # the controllers kmon was given, asked in turn
    leader_id: int = -1
    epoch: int = -1
    endpoints: dict[int, Address] = field(default_factory=dict)   # node id -> its address on this listener
    _next: int = 0
    _last_refusal: tuple[Address, int, int, int] | None = None

    @property
    def leader_address(self) -> Address | None:
        """Where the leader kmon knows of listens on this listener, if a controller said so."""
        return self.endpoints.get(self.leader_id) if self.leader_id >= 0 else None

    def target(self) -> Address:
        """The leader's address if known, else the next controller given."""
        if (known := self.leader_address) is not None:
            return known
        address = self.bootstrap[self._next % len(self.bootstrap)]
        self._next += 1
        return address

    def learn(self, endpoints: dict[int, Address]) -> None:
        self.endpoints.update(endpoints)

    def served(self, leader: wire.LeaderAndEpoch | None) -> None:
        """A fetch was answered with records: the node asked leads (at the epoch it says)."""
        self._last_refusal = None
        if leader is not None and leader.leader_id >= 0:
            self.leader_id, self.epoch = leader.leader_id, max(self.epoch, leader.epoch)

    def forget(self) -> None:
        self.leader_id = -1

    def refused(self, asked: Address, error: int, leader: wire.LeaderAndEpoch | None) -> Move:
        """``asked`` answered ``error`` (not the leader, or not at the epoch asked), naming ``leader``."""
        if leader is None or leader.leader_id < 0:
            self.forget()
            self._last_refusal = None
            return Move.WAIT
        refusal = (asked, error, leader.leader_id, leader.epoch)
        repeated, self._last_refusal = refusal == self._last_refusal, refusal
        by_leader = self.endpoints.get(leader.leader_id) == asked   # as far as kmon knows
        if by_leader and not repeated:
            # the leader itself: its epoch is the truth, lower than kmon's too (UNKNOWN_LEADER_EPOCH)
            self.leader_id, self.epoch = leader.leader_id, leader.epoch
            return Move.AGAIN
        if by_leader:
            del self.endpoints[leader.leader_id]   # said the same twice: not where the leader listens after all
        self.leader_id, self.epoch = leader.leader_id, max(self.epoch, leader.epoch)
        return Move.WAIT if repeated else Move.ELSEWHERE

    def why_lost(self) -> str | None:
        """What stops kmon finding the leader, while it is named but its address on this listener is unknown."""
        if self.leader_id < 0 or self.leader_address is not None:
            return None
        given = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        return (f"the quorum's leader is node {self.leader_id} (epoch {self.epoch}), and none of the controllers "
                f"given ({given}) said where it listens on this listener: give --controllers every controller "
                "of the quorum")
