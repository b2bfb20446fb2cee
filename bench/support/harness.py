"""The real parts a bench runs on: a local stack, the processes it measures, the events topic read back."""
from __future__ import annotations

import contextlib
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kmon.codec import decode
from kmon.events import Event
from kmon.toolchain import find_toolchain
from stack.local import LocalStack
from stack.state import StackRequest
from stack.process import Spawned, pid_alive, spawn, stop


@contextlib.contextmanager
def local_stack(brokers: int = 1, events_cluster: bool = False) -> Iterator[LocalStack]:
    """ZooKeeper and ``brokers`` brokers (and kmon's events cluster if asked) in a temporary directory,
    stopped on exit (and with this process)."""
    with tempfile.TemporaryDirectory(prefix="kmon-bench-") as tmp:
        stack = LocalStack(Path(tmp) / "stack", find_toolchain(), die_with_parent=True)
        stack.up(StackRequest(brokers=brokers, fast=True, prometheus=False, events_cluster=events_cluster))
        try:
            yield stack
        finally:
            stack.down(timeout=5)


def kmon_argv(*args: str) -> list[str]:
    """The `kmon` command of this interpreter's venv."""
    return [str(Path(sys.executable).with_name("kmon")), *args]


@contextlib.contextmanager
def process(argv: list[str], log: Path, marker: str) -> Iterator[Spawned]:
    """``argv`` running (output in ``log``) until the block ends; ``marker`` is in its command line."""
    proc = spawn(argv, log, log.parent, die_with_parent=True)
    try:
        yield proc
    finally:
        stop(proc.pid, marker, timeout=20)


def check_alive(proc: Spawned, what: str) -> None:
    """Raise (naming the log) if ``proc`` exited: a bench waiting on it would wait for nothing."""
    if not pid_alive(proc.pid):
        raise RuntimeError(f"{what} exited; see {proc.log}")


class TopicReader:
    """The events topic from the beginning; remembers the newest event per message key it is asked about."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "fetch.wait.max.ms": 5})   # the default 500 ms would dominate the delay
        self.assigned = False
        self.messages = 0

    def poll(self, keys: set[bytes]) -> dict[bytes, Event]:
        """Drain what is there; return the events (decoded) whose keys are in ``keys``."""
        if not self.assigned:
            meta = self.consumer.list_topics(self.topic, timeout=5).topics[self.topic]
            if meta.error is not None or not meta.partitions:
                return {}
            self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in meta.partitions])
            self.assigned = True
        found: dict[bytes, Event] = {}
        while batch := self.consumer.consume(10_000, timeout=0.01):
            for m in batch:
                if m.error():
                    continue
                self.messages += 1
                if m.key() in keys and m.value() is not None:
                    found[m.key()] = decode(m.value())
        return found

    def close(self) -> None:
        self.consumer.close()
