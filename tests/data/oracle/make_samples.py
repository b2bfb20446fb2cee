"""Makes the real sample files of tests/unit/test_oracle_*.py again, from a short-lived local stack of
one broker (each run changes them: new ids, times, zxids; the tests' expectations then change too).

    PYTHONPATH=. .venv/bin/python tests/data/oracle/make_samples.py zk      # ZooKeeper mode, Kafka 3.9
    PYTHONPATH=. .venv/bin/python tests/data/oracle/make_samples.py kraft   # KRaft, Kafka 4

zk: ZooKeeper's transaction log (its preallocated zero tail cut to 64 bytes), the Kafka tree under
the chroot /kafka; kraft: the metadata log's segment, and what Kafka's DumpLogSegments prints of it.
Both: the ``__consumer_offsets`` records of the run, one JSON line each.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmon.toolchain import find_toolchain
from stack.local import LocalStack
from stack.state import StackRequest
from tests.support import eventually, leave_group

HERE = Path(__file__).parent
ZK_TAIL = 64   # zero bytes kept after the last transaction: the reader must stop at them


def _topic(admin: AdminClient, name: str, partitions: int, create: bool) -> None:
    def request() -> bool:   # a broker just restarted may not know the cluster yet: asked again
        futures = admin.create_topics([NewTopic(name, partitions, 1)]) if create else admin.delete_topics([name])
        futures[name].result(30)
        return True
    eventually(request, what=f"{name}: created {create}", interval=2)
    eventually(lambda: (name in admin.list_topics(timeout=10).topics) == create, what=f"{name} {create}")


def _group_rounds(bootstrap: str, group: str, protocol: str) -> None:
    """One member joins, a second joins, the second leaves, the first leaves: four group changes."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
              "auto.offset.reset": "earliest"}
    if protocol == "classic":
        config["session.timeout.ms"] = 6000

    members: list[Consumer] = []
    for _ in range(2):
        members.append(Consumer(config))
        members[-1].subscribe(["orders"])
        # every member polls: a rebalance waits for the members already there to join again
        eventually(lambda: all([m.poll(0.1) is None for m in members]) and all(m.assignment() for m in members),
                   timeout=60, what=f"{group}: {len(members)} members assigned")
    while members:
        leave_group(members.pop())
        settle = time.monotonic() + 4
        while time.monotonic() < settle:   # the one left polls through its rebalance
            for m in members:
                m.poll(0.1)


def _offsets_records(bootstrap: str) -> list[dict]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "oracle-samples", "enable.auto.commit": False})
    try:
        partitions = c.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
        out = []
        for p in sorted(partitions):
            low, high = c.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=10)
            if high <= low:
                continue
            c.assign([TopicPartition("__consumer_offsets", p, low)])
            while True:
                m = c.poll(5)
                assert m is not None and not m.error(), m and m.error()
                out.append({"partition": p, "offset": m.offset(), "key": m.key().hex() if m.key() else None,
                            "value": m.value().hex() if m.value() is not None else None})
                if m.offset() >= high - 1:
                    break
        return out
    finally:
        c.close()


def _restart(stack: LocalStack, sig: int) -> None:
    stack.kill_broker(1, sig)
    time.sleep(12)   # ZooKeeper mode: the session (6 s) expires; KRaft: the node is gone a while
    stack.start_broker(1)


def _scenario(stack: LocalStack, protocol: str) -> list[dict]:
    bootstrap = stack.state.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _topic(admin, "orders", 2, create=True)
    _group_rounds(bootstrap, "g1", protocol)
    _restart(stack, signal.SIGTERM)   # controlled shutdown
    _restart(stack, signal.SIGKILL)
    admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers})
    _topic(admin, "orders", 2, create=False)
    _topic(admin, "orders", 1, create=True)   # the same name again: a new topic
    time.sleep(3)
    return _offsets_records(stack.state.bootstrap_servers)


def zk(out: Path, work: Path) -> None:
    stack = LocalStack(work, find_toolchain(), die_with_parent=True)
    stack.up(StackRequest(brokers=1, chroot="/kafka", fast=True, prometheus=False, events_cluster=False))
    try:
        records = _scenario(stack, "classic")
    finally:
        stack.down(timeout=20)
    (log,) = sorted(work.rglob("version-2/log.*"))
    data = log.read_bytes()
    end = len(data.rstrip(b"\0"))   # a transaction ends in its EOR byte, 'B': never a zero
    (out / "zk" / "version-2").mkdir(parents=True, exist_ok=True)
    (out / "zk" / "version-2" / log.name).write_bytes(data[:end + ZK_TAIL])
    _write_records(out / "zk-consumer-offsets.jsonl", records)


def kraft(out: Path, work: Path) -> None:
    tools = find_toolchain()
    stack = LocalStack(work, tools, die_with_parent=True)
    stack.up(StackRequest(brokers=1, kraft=True, prometheus=False, events_cluster=False))
    try:
        records = _scenario(stack, "consumer")
    finally:
        stack.down(timeout=20)
    (segment,) = sorted(work.rglob("__cluster_metadata-0/*.log"))
    target = out / "kraft" / "__cluster_metadata-0"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(segment, target / segment.name)
    dump = subprocess.run([tools.java, "-cp", tools.kafka4_classpath, "org.apache.kafka.tools.DumpLogSegments",
                           "--cluster-metadata-decoder", "--files", segment.name],
                          cwd=target, check=True, capture_output=True, text=True).stdout
    (out / "kraft-dump.txt").write_text(dump)
    _write_records(out / "kraft-consumer-offsets.jsonl", records)


def _write_records(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


if __name__ == "__main__":
    work = Path("/tmp/oracle-stack")
    try:
        {"zk": zk, "kraft": kraft}[sys.argv[1]](HERE, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
