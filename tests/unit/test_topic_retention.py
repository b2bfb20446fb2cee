"""The topics' retention.ms as the groups collector keeps it (collectors/groups/retention.py)."""
from __future__ import annotations

from types import SimpleNamespace

from collectors.groups.gather import Gathered
from collectors.groups.retention import TTL_S, TopicRetention


def entries(ms: str | None) -> dict:
    return {"retention.ms": SimpleNamespace(value=ms)}


def test_each_topic_is_asked_once_a_ttl_and_what_failed_or_is_garbage_has_none() -> None:
    now = [0.0]
    retention = TopicRetention(clock=lambda: now[0])
    assert retention.stale(["a", "b", "c", "d"]) == ["a", "b", "c", "d"]
    retention.learn(["a", "b", "c", "d"], Gathered(results={"a": entries("604800000"), "b": entries("-1"),
                                                             "c": entries("soon")}, failures={"d": TimeoutError()}))
    assert retention.of(["a", "b", "c", "d"]) == {"a": 604800000, "b": -1}
    assert retention.stale(["a", "b", "c", "d", "e"]) == ["e"]
    now[0] = TTL_S + 1
    assert retention.stale(["a", "e"]) == ["a", "e"]
    retention.forget_except(["e"])
    assert retention.of(["a", "b"]) == {}
