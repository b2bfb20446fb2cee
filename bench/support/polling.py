"""A loop on a thread of its own for the length of a ``with`` block: what the benches record from
outside while faults run (alerts, who the controller is) keeps going whatever the fault blocks."""
from __future__ import annotations

import threading


class Polling:
    """Subclasses give :meth:`_run`, which loops until ``self._stop`` is set."""

    def __init__(self, name: str, join_s: float) -> None:
        self._join_s = join_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self._join_s)

    def _run(self) -> None:
        raise NotImplementedError
