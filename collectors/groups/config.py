"""Settings of the consumer-group collector (one instance per monitored cluster)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Mapping

OffsetsStart = Literal["beginning", "end"]


@dataclass(frozen=True)
class NameFilter:
    """Include/exclude regexes, matched against the whole name (``re.fullmatch``).

    An empty exclude excludes nothing, so the defaults let every name through.
    """
    include: str = ".*"
    exclude: str = ""

    def __post_init__(self) -> None:
        for pattern in (self.include, self.exclude):
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"bad regex {pattern!r}: {e}") from None

    def __call__(self, name: str) -> bool:
        # re caches compiled patterns, so a frozen dataclass of strings costs nothing here
        if not re.fullmatch(self.include, name):
            return False
        return not (self.exclude and re.fullmatch(self.exclude, name))


@dataclass(frozen=True)
class GroupsConfig:
    bootstrap_servers: str
    cluster: str
    poll_interval_s: float = 10.0       # Admin API poll: live state, end-offset samples
    lag_interval_s: float = 30.0        # lag events (per group) at most this often
    # a partition whose committed offset has not moved this long, with lag, is stalled or stopped
    # (collectors/groups/consumer_status.py)
    stall_window_s: float = 60.0
    groups: NameFilter = NameFilter()
    topics: NameFilter = NameFilter()   # topics whose lag is measured
    describe_batch_size: int = 50       # groups per describe_consumer_groups call
    concurrency: int = 4                # Admin API requests in flight at once
    request_timeout_s: float = 10.0     # per Admin API request; a late answer counts as failed
    # Where the __consumer_offsets reader starts: "beginning" replays the compacted
    # history, so committed offsets and the latest generation of every group are known
    # without asking each group; "end" only sees what happens from now on.
    offsets_start: OffsetsStart = "beginning"
    read_offsets_topic: bool = True     # False: Admin API only (no exact rebalance history)
    # lag in seconds as the age of the record at the committed offset (needs READ on the topic; where it
    # is not granted, and when False, interpolated from end-offset samples: collectors/groups/record_times.py)
    lag_from_records: bool = True
    client_config: Mapping[str, str] = field(default_factory=dict)  # extra librdkafka settings (TLS, SASL)

    def __post_init__(self) -> None:
        if not self.cluster:
            raise ValueError("cluster name must not be empty")
        for name in ("poll_interval_s", "lag_interval_s", "stall_window_s", "request_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be greater than 0")
        for name in ("describe_batch_size", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.offsets_start not in ("beginning", "end"):
            raise ValueError(f"offsets_start must be 'beginning' or 'end', not {self.offsets_start!r}")

    def client(self, **overrides: object) -> dict[str, object]:
        """librdkafka settings for the collector's own clients."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.client_config, **overrides}

    def admin_client(self, **overrides: object) -> dict[str, object]:
        """The Admin API client's settings. An admin client never refreshes the leader epochs
        it caches (librdkafka keeps them metadata.max.age.ms, 15 min by default): after a
        leader moved, list_offsets was answered FENCED_LEADER_EPOCH at every poll and that
        partition's lag went missing. Trusting cached metadata for half a poll interval makes
        each poll look its leaders up afresh (the client config may still set its own)."""
        return {"metadata.max.age.ms": max(1000, int(self.poll_interval_s * 500)), **self.client(**overrides)}
