"""Helpers for integration tests: topics through the Admin API, partition state from ZooKeeper."""
from __future__ import annotations

import json
import time
from typing import Any, Callable, TypeVar

from confluent_kafka.admin import AdminClient, NewTopic

from kmon.stack.local import LocalStack

T = TypeVar("T")


def eventually(probe: Callable[[], T], timeout: float = 60, what: str = "condition",
               interval: float = 0.5) -> T:
    """Poll until ``probe`` returns a truthy value; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except Exception as e:  # the cluster may be mid-failover
            last = e
        time.sleep(interval)
    raise AssertionError(f"{what}: not true after {timeout}s (last: {last!r})")


def create_topic(stack: LocalStack, name: str, partitions: int = 1, rf: int = 3,
                 config: dict[str, str] | None = None) -> None:
    assert stack.state
    admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])
    futures[name].result(timeout=30)
    eventually(lambda: all(partition_state(stack, name, p) for p in range(partitions)), 30,
               f"state znodes of {name}")


def partition_state(stack: LocalStack, topic: str, partition: int) -> dict[str, Any]:
    client = stack.zk()
    try:
        data, _ = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)
    finally:
        client.stop(); client.close()


def assigned_replicas(stack: LocalStack, topic: str, partition: int) -> list[int]:
    client = stack.zk()
    try:
        data, _ = client.get(f"/brokers/topics/{topic}")
        return json.loads(data)["partitions"][str(partition)]
    finally:
        client.stop(); client.close()
