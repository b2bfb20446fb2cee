"""The soak's verdict: kmon's history, counters and views against the oracle and the cluster itself.

Transitions are compared two ways:

* where both sides have the source's exact position (a partition's state: its ZooKeeper zxid, or
  its metadata offset under KRaft), row by row at that position. In ZooKeeper mode a position is
  comparable only where kmon read the version right before it too (its event's ``version_gap`` is 0):
  ZooKeeper may apply several versions between two notifications, and what happened across the
  versions kmon never read is *coalesced*, as many versions as kmon said it skipped;
* elsewhere (controllers, brokers, topics, reassignments, groups, whose rows kmon may place at another
  position: a deletion seen through its parent, a topic's changes sent once a fetch), by count per
  entity, kind and broker.

A transition of the oracle that kmon lacks is *lost*, one kmon has and the oracle not *extra*.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.oracle import OracleTransition
from bench.soak.memory import MemoryRow, MemorySampler, memory_row
from kmon.events import EVENTS_TOPIC, Event
from kmon.history import Transition
from stack.local import LocalStack
from stack.probes import metadata_brokers
from tests.support import eventually, events_on, history_disagreements, history_rows, metrics, quorum, value

if TYPE_CHECKING:
    from bench.soak.chaos import Chaos

# kinds compared at their exact position; the others by count
AT_POSITION = ("isr_shrink", "isr_expand", "replica_removed", "leader_election", "unclean_leader_election",
               "elr_leader_election")
GROWTH_LIMIT = 0.05        # of resident memory an hour, after warm-up
WARM_UP_S = 600.0
SETTLE_S = 300.0

Key = tuple[str, str, int | None]   # kind, entity, broker


@dataclass
class Verdict:
    minutes: float
    faults: Counter[str]
    oracle: Counter[str] = field(default_factory=Counter)        # oracle transitions by kind
    matched: Counter[str] = field(default_factory=Counter)
    lost: Counter[str] = field(default_factory=Counter)
    extra: Counter[str] = field(default_factory=Counter)
    coalesced: Counter[str] = field(default_factory=Counter)
    kmon_over_gaps: Counter[str] = field(default_factory=Counter)   # kmon's rows across versions it skipped
    versions_skipped: tuple[int, int] = (0, 0)   # (by the oracle's count, as kmon said)
    lost_examples: list[str] = field(default_factory=list)
    extra_examples: list[str] = field(default_factory=list)
    counters: list[str] = field(default_factory=list)     # counters that disagree with their rows
    views: list[str] = field(default_factory=list)        # views that disagree with the cluster
    memory: dict[str, MemoryRow] = field(default_factory=dict)   # by kmon part
    restarts: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)

    @property
    def memory_checked(self) -> bool:
        return self.minutes * 60 >= WARM_UP_S + 600   # ten minutes past warm-up at least

    def problems(self) -> list[str]:
        out = [f"lost {dict(self.lost)}: {self.lost_examples[:5]}"] if self.lost else []
        out += [f"extra {dict(self.extra)}: {self.extra_examples[:5]}"] if self.extra else []
        if self.versions_skipped[0] != self.versions_skipped[1]:
            out.append(f"versions skipped {self.versions_skipped[0]}, kmon said {self.versions_skipped[1]}")
        out += [f"counter: {c}" for c in self.counters] + [f"view: {v}" for v in self.views]
        if self.memory_checked:
            out += [f"memory of {part} grew {m.growth:.1%}/h beyond its JVM heap and code cache"
                    for part, m in self.memory.items() if m.growth > GROWTH_LIMIT]
        return out + [f"restart: {r}" for r in self.restarts] + [f"traceback in {t}" for t in self.tracebacks]

    @property
    def ok(self) -> bool:
        return not self.problems()

    def tables(self) -> dict[str, list[dict]]:
        """For bench/README.md: faults by kind; transitions by kind; memory per process."""
        kinds = sorted(set(self.oracle) | set(self.extra) | set(self.kmon_over_gaps))
        return {
            "faults": [{"fault": f, "injected": n} for f, n in sorted(self.faults.items())],
            "transitions": [{"kind": k, "oracle": self.oracle[k], "in kmon's history": self.matched[k],
                             "lost": self.lost[k], "extra": self.extra[k], "coalesced": self.coalesced[k],
                             "kmon across skipped versions": self.kmon_over_gaps[k]} for k in kinds],
            "memory": [{"process": part, "MB after warm-up": round(m.first), "MB at the end": round(m.last),
                        "JVM heap committed": f"{m.heap_first:.0f} -> {m.heap_last:.0f}" if m.heap_last else "-",
                        "JIT code cache resident": f"{m.code_first:.0f} -> {m.code_last:.0f}" if m.code_last else "-",
                        "growth per hour beyond both": f"{m.growth:.1%}"}
                       for part, m in sorted(self.memory.items())],
        }


def judge(stack: LocalStack, cluster: str, minutes: float, boundary: int, chaos: Chaos, memory: MemorySampler,
          restarts: list[str], progress: Callable[[str], None]) -> Verdict:
    assert stack.state
    verdict = Verdict(minutes, chaos.injected, restarts=restarts)
    _settle(stack, cluster, progress)
    kraft = stack.state.kraft
    oracle = [t for t in _oracle(stack) if t.position > boundary] + _group_oracle(stack)
    kmon = [t for t in history_rows(stack, cluster) if t.group is not None or (t.position or 0) > boundary]
    verdict.oracle = Counter(t.kind for t in oracle)
    events = [e for e in events_on(stack.state.events_bootstrap_servers, EVENTS_TOPIC) if e.cluster == cluster]
    comparable = None if kraft else _consecutive(events)
    _compare(verdict, oracle, kmon, comparable)
    if not kraft:
        verdict.versions_skipped = _versions_skipped(stack, events)
    verdict.counters = history_disagreements(stack, cluster)
    verdict.views = _views(stack, cluster)
    # a short run's table still shows each part's memory, from a third of the way in (not judged)
    warm_up = WARM_UP_S if verdict.memory_checked else minutes * 60 / 3
    verdict.memory = {part: row for part, samples in memory.longest_lived().items()
                      if (row := memory_row(samples, warm_up)) is not None}
    verdict.tracebacks = _tracebacks(stack)
    return verdict


# ---------------------------------------------------------------- the two sides
def _oracle(stack: LocalStack) -> list[OracleTransition]:
    from bench.oracle import kraft, zookeeper
    if stack.state and stack.state.kraft:
        return kraft.transitions(stack.dir / "broker-1-data" / "__cluster_metadata-0", stack.tools)
    return zookeeper.transitions(stack.dir / "zookeeper-data")


def _group_oracle(stack: LocalStack) -> list[OracleTransition]:
    from bench.oracle import groups
    return groups.transitions(_records(stack, "__consumer_offsets"))


def _records(stack: LocalStack, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic``, partition by partition (a group's records are in one)."""
    assert stack.state
    consumer = Consumer({"bootstrap.servers": stack.state.bootstrap_servers, "group.id": "kmon-soak-oracle",
                         "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        out: list[tuple[bytes | None, bytes | None]] = []
        for p in partitions:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            while True:
                m = consumer.poll(10)
                if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
                    break
                if not m.error():
                    out.append((m.key(), m.value()))
        return out
    finally:
        consumer.close()


def _consecutive(events: list[Event]) -> set[int]:
    """The zxids of partition states kmon read right after the version before them (ZooKeeper mode)."""
    return {e.zxid for e in events if e.kind == "partition" and e.znode is not None and e.zxid is not None
            and e.znode.version_gap == 0 and e.snapshot_id is None}


def _versions_skipped(stack: LocalStack, events: list[Event]) -> tuple[int, int]:
    """Versions of the partition states that kmon never read, as the oracle counts them (every version
    of each state znode, its creation included) and as kmon says (its events' version_gap), for the
    partitions kmon followed from their creation to their end."""
    from bench.oracle.zookeeper import znode_versions
    versions = znode_versions(stack.dir / "zookeeper-data")
    # a version is its write's zxid: a znode created again restarts its version numbers, and an
    # event read again (a collector restarted) says its gap again
    seen: dict[str, dict[int, int]] = {}   # path -> mzxid -> the gap kmon said before it
    created: set[str] = set()
    for e in events:
        if e.kind == "partition" and e.znode is not None:
            seen.setdefault(e.znode.path, {})[e.znode.mzxid] = e.znode.version_gap
            if e.znode.version == 0:
                created.add(e.znode.path)
    followed = [path for path in seen if path in created and path in versions]
    return (sum(versions[path] - len(seen[path]) for path in followed),
            sum(sum(seen[path].values()) for path in followed))


def _compare(verdict: Verdict, oracle: list[OracleTransition], kmon: list[Transition],
             comparable: set[int] | None) -> None:
    """``comparable``: the positions kmon saw consecutively (None: all, KRaft)."""
    def at(rows: Iterable[OracleTransition | Transition]) -> Counter[tuple[str, str, int | None, int | None]]:
        return Counter((t.kind, t.entity, t.broker, t.position) for t in rows if t.kind in AT_POSITION)

    def counted(rows: Iterable[OracleTransition | Transition]) -> Counter[Key]:
        return Counter((t.kind, t.entity, t.broker) for t in rows if t.kind not in AT_POSITION)

    known = {t.kind for t in oracle} | {"isr_shrink", "isr_expand", "replica_removed", "leader_election",
                                        "controller_change", "broker_registered", "broker_gone", "topic_created",
                                        "topic_deleted", "rebalance"}
    kmon = [t for t in kmon if t.kind in known]   # kinds the oracle does not tell (group states) are not judged
    theirs, ours = at(oracle), at(kmon)
    for key in theirs.keys() | ours.keys():
        kind, position = key[0], key[3]
        if comparable is not None and position not in comparable:
            verdict.coalesced[kind] += theirs[key]
            verdict.kmon_over_gaps[kind] += ours[key]
            continue
        _tally(verdict, kind, theirs[key], ours[key], key)
    theirs_n, ours_n = counted(oracle), counted(kmon)
    for key in theirs_n.keys() | ours_n.keys():
        _tally(verdict, key[0], theirs_n[key], ours_n[key], key)


def _tally(verdict: Verdict, kind: str, theirs: int, ours: int, key: tuple) -> None:
    verdict.matched[kind] += min(theirs, ours)
    if theirs > ours:
        verdict.lost[kind] += theirs - ours
        verdict.lost_examples.append(repr(key))
    elif ours > theirs:
        verdict.extra[kind] += ours - theirs
        verdict.extra_examples.append(repr(key))


# ---------------------------------------------------------------- the end state
def _settle(stack: LocalStack, cluster: str, progress: Callable[[str], None]) -> None:
    """Everything running, the cluster whole by its own account, then kmon's views caught up."""
    assert stack.state
    stack.restart_stopped()
    started = time.monotonic()
    eventually(lambda: not _unhealthy(stack), SETTLE_S, "the cluster whole by its own account", interval=2)
    port = stack.state.stream_port
    eventually(lambda: value(port, "kmon_brokers", cluster) == len(stack.broker_ids())
               and sum(v for (n, labels), v in metrics(port).items()
                       if n == "kmon_under_replicated_partitions" and ("cluster", cluster) in labels) == 0,
               SETTLE_S, "kmon's views caught up", interval=2)
    time.sleep(15)   # the last events of the settling (leader moves back) through the stream
    progress(f"settled in {time.monotonic() - started:.0f} s")


def _unhealthy(stack: LocalStack) -> list[str]:
    """What the cluster itself says is not whole: brokers not serving, partitions short of their ISR."""
    assert stack.state
    admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers, "log_level": 0})
    md = admin.list_topics(timeout=10)
    out = [f"broker {b} not serving" for b in stack.broker_ids() if b not in md.brokers]
    for topic in md.topics.values():
        out += [f"{topic.topic}:{p.id}" for p in topic.partitions.values() if len(p.isrs) < len(p.replicas) or p.leader < 0]
    return out


def _views(stack: LocalStack, cluster: str) -> list[str]:
    """kmon's views against what the cluster says now: brokers, controller, partitions per topic, each
    exported partition's leader."""
    assert stack.state
    port = stack.state.stream_port
    out = []
    serving = metadata_brokers(stack.component(f"broker-{stack.broker_ids()[0]}").port)
    if value(port, "kmon_brokers", cluster) != len(serving):
        out.append(f"kmon_brokers {value(port, 'kmon_brokers', cluster)} != {len(serving)} serving")
    controller = quorum(stack).leader_id if stack.state.kraft else stack.controller_id()
    if value(port, "kmon_controller_id", cluster) != controller:
        out.append(f"kmon_controller_id {value(port, 'kmon_controller_id', cluster)} != {controller}")
    md = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers, "log_level": 0}).list_topics(timeout=30)
    for name, topic in md.topics.items():
        if value(port, "kmon_partitions", cluster, topic=name) != len(topic.partitions):
            out.append(f"kmon_partitions{{topic={name}}} {value(port, 'kmon_partitions', cluster, topic=name)} "
                       f"!= {len(topic.partitions)}")
        for p in topic.partitions.values():   # the soak exports every partition's detail
            seen = (value(port, "kmon_partition_leader", cluster, topic=name, partition=str(p.id)),
                    value(port, "kmon_partition_isr_size", cluster, topic=name, partition=str(p.id)))
            if seen != (p.leader, len(p.isrs)):
                out.append(f"{name}:{p.id} leader, ISR size: kmon {seen}, the cluster {(p.leader, len(p.isrs))}")
    return out


def _tracebacks(stack: LocalStack) -> list[str]:
    """Each kmon log with a traceback, and the first one's lines (the logs go with the soak's directory)."""
    out = []
    for p in sorted(Path(stack.dir / "logs").glob("*.log")):
        text = p.read_text(errors="replace")
        if p.name.startswith(("collector-", "stream")) and "Traceback" in text:
            start = text.rfind("\n", 0, text.index("Traceback")) + 1
            out.append(f"{p.name}:\n" + "\n".join(text[start:].splitlines()[:25]))
    return out
