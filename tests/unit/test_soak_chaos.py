"""The soak's fault table counts the fault made, not the one drawn when the state did not allow it."""
from __future__ import annotations

import random
from typing import Any

from bench.soak.chaos import Chaos


class _OneMemberLoad:
    """A load whose groups each keep their one member: no member may leave."""
    groups = {"soak-classic": "classic"}

    def __init__(self) -> None:
        self.joined: list[str] = []

    def leave(self, group: str) -> bool:
        return False

    def join(self, group: str) -> None:
        self.joined.append(group)


def test_a_leave_drawn_where_no_member_may_leave_is_counted_as_the_join_made() -> None:
    said: list[str] = []
    load = _OneMemberLoad()
    chaos = Chaos(stack=Any, load=load, rng=random.Random(1), log=said.append)   # type: ignore[arg-type]
    chaos.weights = lambda: {chaos.member_leave: 1}   # type: ignore[method-assign]
    chaos.one()
    assert load.joined == ["soak-classic"]
    assert dict(chaos.injected) == {"member_join": 1}
    assert said == ["fault 1: member_join: a member joined soak-classic (0 s)"]
