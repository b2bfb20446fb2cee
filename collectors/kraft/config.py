"""How the KRaft collectors are configured: following the metadata log as an observer (KraftCollectorConfig),
or sampling the brokers' metadata where the controllers cannot be reached (SampledConfig). Apart from the
collectors, so that `kmon collect kraft`'s flags read their defaults without importing them."""
from __future__ import annotations

from dataclasses import dataclass

from collectors.kraft.connection import ClientSecurity


@dataclass(frozen=True)
class KraftCollectorConfig:
    controllers: tuple[tuple[str, int], ...]     # the controller listeners kmon may ask first
    cluster: str
    security: ClientSecurity = ClientSecurity()
    max_wait_ms: int = 500          # a fetch waits this long for new records
    max_bytes: int = 8 << 20        # per fetch and per snapshot chunk
    quorum_interval_s: float = 2.0  # DescribeQuorum this often
    # a quorum whose log only went on is sent this often (each event is a micro-batch of the stream app)
    quorum_progress_interval_s: float = 10.0
    timeout_s: float = 10.0         # connect and request timeout

    @property
    def address(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.controllers)


@dataclass(frozen=True)
class SampledConfig:
    bootstrap: tuple[tuple[str, int], ...]    # the brokers
    cluster: str
    security: ClientSecurity = ClientSecurity()
    interval_s: float = 5.0
    timeout_s: float = 10.0

    @property
    def address(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.bootstrap)
