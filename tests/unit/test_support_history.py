"""The tests' own comparison of the history with the counters (tests/support.py): pure parts."""
from __future__ import annotations

from kmon.history import Transition
from tests.support import current_incarnations


def row(kind: str, topic: str | None, at: int) -> Transition:
    return Transition(time_ms=at, cluster="c", kind=kind, entity=f"topic:{topic}" if topic else "controller",
                      topic=topic)


def test_a_topic_created_again_is_compared_from_its_last_creation() -> None:
    """Its counters started again with it (its series went with the deletion); the history keeps both."""
    rows = [row("topic_created", "t", 1), row("isr_shrink", "t", 2), row("topic_deleted", "t", 3),
            row("controller_change", None, 4), row("isr_shrink", "u", 5), row("topic_created", "t", 6),
            row("isr_shrink", "t", 7)]
    assert [r.time_ms for r in current_incarnations(rows)] == [4, 5, 6, 7]
