"""The hand-off between the driver, which publishes after every micro-batch, and the
exporter, which serves scrapes: the rendered views and the app's own statistics."""
from __future__ import annotations

import threading
from dataclasses import dataclass

from streaming.views.exposition import Exposition
from streaming.views.stats import SelfStats


@dataclass(frozen=True)
class Published:
    """What scrapes read: the exposition rendered after the latest batch, and the statistics
    it was rendered with."""
    exposition: Exposition
    stats: SelfStats


class LatestPublished:
    """The latest Published, swapped whole by the driver and read by scrapes."""

    def __init__(self, initial: Published | None = None) -> None:
        self._lock = threading.Lock()
        self._latest = initial or Published(Exposition.empty(), SelfStats())

    def set(self, published: Published) -> None:
        with self._lock:
            self._latest = published

    def get(self) -> Published:
        with self._lock:
            return self._latest
