"""A log of records folded into one state per key, as a coordinator replays its topic."""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

R = TypeVar("R")
K = TypeVar("K")
V = TypeVar("V")


def fold_by_key(records: Iterable[R], key_of: Callable[[R], K | None], step: Callable[[V | None, R], V | None]
                ) -> dict[K, V]:
    """Each key's state after a sequence of records (in offset order). ``step`` takes a key's
    state (None before its first record) and one more of its records, and gives None once
    nothing of it is left; records whose ``key_of`` is None change nothing."""
    states: dict[K, V] = {}
    for record in records:
        key = key_of(record)
        if key is None:
            continue
        state = step(states.get(key), record)
        if state is None:
            states.pop(key, None)
        else:
            states[key] = state
    return states
