"""State shared by the collector's two threads (Admin API poller, __consumer_offsets
reader), each access under one lock: committed offsets, the last state the poller
emitted per group, and which groups were deleted."""
from __future__ import annotations

import threading
import time
from enum import Enum
from typing import Mapping

from collectors.groups.states import Partition
from kmon.events import GroupState


class Seen(Enum):
    CHANGED = "changed"
    SAME = "same"
    # deleted after the observation began: emitting it would resurrect the group downstream
    DELETED_MEANWHILE = "deleted_meanwhile"


class GroupBook:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._committed: dict[str, dict[Partition, int]] = {}
        self._emitted: dict[str, GroupState] = {}     # last admin-origin state emitted (lag aside)
        self._deleted_at: dict[str, float] = {}       # group -> monotonic time its delete was emitted

    # ----------------------------------------------------------- committed offsets

    def commit(self, group: str, partition: Partition, offset: int) -> None:
        with self._lock:
            self._committed.setdefault(group, {})[partition] = offset

    def uncommit(self, group: str, partition: Partition) -> None:
        with self._lock:
            offsets = self._committed.get(group)
            if offsets is not None:
                offsets.pop(partition, None)
                if not offsets:
                    del self._committed[group]

    def replace_committed(self, group: str, offsets: Mapping[Partition, int]) -> None:
        with self._lock:
            if offsets:
                self._committed[group] = dict(offsets)
            else:
                self._committed.pop(group, None)

    def committed(self, groups: list[str]) -> dict[str, dict[Partition, int]]:
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
