"""State shared by the collector's two threads (Admin API poller, __consumer_offsets
reader), each access under one lock: committed offsets, the last state the poller
emitted per group, which groups were deleted, and the groups of Kafka 4's protocols the
reader holds."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Mapping

from collectors.groups.consumer_status import PartitionKey
from collectors.groups.outputs import Emitter
from kmon.events import GroupState, TopicLag


class Seen(Enum):
    CHANGED = "changed"
    SAME = "same"
    # deleted after the observation began: emitting it would resurrect the group downstream
    DELETED_MEANWHILE = "deleted_meanwhile"


class GroupBook:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._committed: dict[str, dict[PartitionKey, int]] = {}
        self._emitted: dict[str, GroupState] = {}     # last admin-origin state emitted (lag aside)
        self._deleted_at: dict[str, float] = {}       # group -> monotonic time its delete was emitted

    # ----------------------------------------------------------- committed offsets

    def commit(self, group: str, partition: PartitionKey, offset: int) -> None:
        with self._lock:
            self._committed.setdefault(group, {})[partition] = offset

    def uncommit(self, group: str, partition: PartitionKey) -> None:
        with self._lock:
            offsets = self._committed.get(group)
            if offsets is not None:
                offsets.pop(partition, None)
                if not offsets:
                    del self._committed[group]

    def replace_committed(self, group: str, offsets: Mapping[PartitionKey, int]) -> None:
        with self._lock:
            if offsets:
                self._committed[group] = dict(offsets)
            else:
                self._committed.pop(group, None)

    def committed(self, groups: list[str]) -> dict[str, dict[PartitionKey, int]]:
        """A copy, for the poller to compute lag from without holding the lock."""
        with self._lock:
            return {g: dict(self._committed[g]) for g in groups if g in self._committed}

    # ----------------------------------------------------------- lifecycle

    def observe(self, state: GroupState, cycle_started: float) -> Seen:
        """Record an admin observation (lag aside) made since `cycle_started` (monotonic)."""
        with self._lock:
            deleted = self._deleted_at.get(state.group)
            if deleted is not None and deleted >= cycle_started:
                return Seen.DELETED_MEANWHILE
            self._deleted_at.pop(state.group, None)
            if self._emitted.get(state.group) == state:
                return Seen.SAME
            self._emitted[state.group] = state
            return Seen.CHANGED

    def revive(self, group: str) -> None:
        """A GroupMetadata record of `group` was read: it exists (again)."""
        with self._lock:
            self._deleted_at.pop(group, None)

    def delete(self, group: str) -> bool:
        """Forget the group; True the first time (emit one delete), False if already deleted."""
        with self._lock:
            if group in self._deleted_at:
                return False
            self._deleted_at[group] = time.monotonic()
            self._committed.pop(group, None)
            self._emitted.pop(group, None)
            return True

    def emitted_groups(self) -> set[str]:
        with self._lock:
            return set(self._emitted)


@dataclass(frozen=True)
class Offsets:
    """What the poller measures of a group's offsets: its lag and the verdict on its consumers."""
    lag: Mapping[str, TopicLag] = field(default_factory=dict)
    status: str | None = None
    partition_status: Mapping[str, str] = field(default_factory=dict)

    def on(self, state: GroupState) -> GroupState:
        return replace(state, lag=self.lag, status=self.status, partition_status=self.partition_status)


NO_OFFSETS = Offsets()


class ModernStates:
    """The groups of Kafka 4's protocols (consumer, share, streams) as the __consumer_offsets reader
    folded them. Their records are the exact source (the Admin API's descriptions know neither
    their epochs nor Assigning and Reconciling), so the poller only adds what it measures of their
    offsets; both threads emit them under one lock, so that no emission carries an older state
    after a newer one."""

    def __init__(self, emitter: Emitter) -> None:
        self._emitter = emitter
        self._lock = threading.Lock()
        self._states: dict[str, GroupState] = {}
        self._offsets: dict[str, Offsets] = {}

    def upsert(self, state: GroupState) -> None:
        with self._lock:
            self._states[state.group] = state
            self._emitter.upsert(self._offsets.get(state.group, NO_OFFSETS).on(state))

    def forget(self, group: str) -> bool:
        """No longer a group of these protocols (deleted, or moved back to the classic protocol);
        True if it was one."""
        with self._lock:
            self._offsets.pop(group, None)
            return self._states.pop(group, None) is not None

    def groups(self) -> dict[str, str]:
        """Each group and its type."""
        with self._lock:
            return {group: state.group_type for group, state in self._states.items()}

    def emit_offsets(self, offsets: Mapping[str, Offsets], groups: set[str] | None = None) -> None:
        """Groups again with what the poller measured: every one (the lag interval, a resync), or
        ``groups`` (their consumers' status changed)."""
        with self._lock:
            for group, state in self._states.items():
                if groups is None or group in groups:
                    self._offsets[group] = offsets.get(group, NO_OFFSETS)
                    self._emitter.upsert(self._offsets[group].on(state))
