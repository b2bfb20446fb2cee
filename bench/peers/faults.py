"""The scripted faults of `python -m bench peers`, one after the other on one cluster.

Each fault returns a :class:`FaultRun`: its moment (the action an alert
should follow: a kill, a stop, a stalled commit...) and its culprit (the broker, topic or
group an on-call person must find); it returns once the cluster is whole again. Every wait
is on the cluster's own state (ZooKeeper, or under KRaft the quorum's own description and the
brokers' metadata; the Admin API), never on what kmon or a peer shows, so no system under test
paces the script; only the two group faults that take
minutes end early, once every system that could say something did. A fault's topic or
group is its own and is deleted after it, so a later fault does not disturb it.
"""
from __future__ import annotations

import json
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from confluent_kafka import Consumer, ConsumerGroupState, ElectionType, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)
from kazoo.exceptions import KazooException, NoNodeError

from bench.support.measure import wait as _measure_wait
from bench.peers.watch import HEALTHY, KMON, Recorder
from stack.local import LocalStack
from tests.support import quorum, reassign

HOLD_S = 30.0          # a fault stays at least this long after Kafka itself noticed it: both rule sets' `for:`
STALL_S = 11.0         # SIGSTOP: past replica.lag.time.max.ms (5 s), short of the session timeout (18 s; see PROFILE)
# KRaft (KRAFT_PROFILE): past replica.lag.time.max.ms (4 s; the leader checks every 2 s), short of the
# broker session (9 s from the last heartbeat, sent every 2 s: 7 s from the stop at the earliest)
STALL_KRAFT_S = 6.5
# a restarted broker serves again (ZooKeeper: registered; KRaft: caught up and unfenced) within this:
# seconds on an idle machine, but a KRaft node restarted with the agent on a loaded one (load 16 to 44
# on 2 cores) was unfenced just past the stack's 90 s default
RESTART_S = 300.0
STUCK_CAP_S = 270.0    # a held rebalance: kmon's alert needs 180 s in the state; the member's poll interval is 300 s
LAG_CAP_S = 900.0      # a stalled consumer: kmon's alert needs lag > 5 min for 5 min


@dataclass
class FaultRun:
    name: str
    what: str
    culprit: dict[str, str]     # label -> value the on-call person must find; {} when the cluster is the culprit
    moment: float = 0.0         # set when the fault's action happens
    notes: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)   # the lag faults' samples (lag_faults.py)


@dataclass
class Ctx:
    stack: LocalStack
    admin: AdminClient
    recorder: Recorder
    progress: Callable[[str], None]
    # broker -> when a fault last hit it: a fault picks the broker hit longest ago among those it
    # may hit, so that alerts counting over a window (ISR shrinks over 10 minutes) answer this fault
    hit: dict[int, float] = field(default_factory=dict)

    def victim(self, candidates: list[int], prefer: Callable[[int], float] = lambda b: 0.0) -> int:
        """The candidate hit longest ago (``prefer`` ranks ties, lowest first), marked as hit now."""
        chosen = min(candidates, key=lambda b: (self.hit.get(b, 0.0), prefer(b)))
        self.hit[chosen] = time.time()
        return chosen

    @property
    def bootstrap(self) -> str:
        assert self.stack.state
        return self.stack.state.bootstrap_servers

    @property
    def kraft(self) -> bool:
        assert self.stack.state
        return self.stack.state.kraft

    def controller(self) -> int:
        """The active controller now: /controller in ZooKeeper mode; under KRaft the quorum's leader
        as the controllers describe it (never DescribeCluster's answer, a random broker there);
        -1 while there is none or no controller answers."""
        if not self.kraft:
            return self.stack.controller_id()
        try:
            return quorum(self.stack, timeout=2).leader_id
        except (AssertionError, OSError):   # no controller describes the quorum: an election under way
            return -1

    def active_controller(self) -> int:
        """The active controller, waited for while there is none (a failover under way)."""
        return wait_for(self.controller, lambda c: c >= 0, 120, "an active controller")

    def gone(self) -> str:
        """What Kafka does to a broker that died, in the words of the cluster's mode."""
        return "it was fenced" if self.kraft else "its registration expired"


# A cluster in the middle of a failover answers with timeouts and refusals: not yet, not a failure.
TRANSIENT = (KafkaException, KazooException, TimeoutError, OSError)


def wait(done: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> float:
    return _measure_wait(done, timeout, what, interval, retry_on=TRANSIENT)


def wait_for(get: Callable[[], int], good: Callable[[int], bool], timeout: float, what: str) -> int:
    """``get()``'s first value that is ``good``, polled every 0.2 s."""
    last: list[int] = []

    def done() -> bool:
        last[:] = [get()]
        return good(last[0])
    wait(done, timeout, what, interval=0.2)
    return last[0]


# ---------------------------------------------------------------- the cluster's own state

def _partitions(ctx: Ctx) -> dict[tuple[str, int], dict]:
    """Every partition's leader, ISR and replicas: its state znode and its topic's assignment; under
    KRaft the brokers' metadata (the replicas of a partition being moved are its old and new ones)."""
    if ctx.kraft:
        topics = ctx.admin.list_topics(timeout=30).topics
        return {(topic, p): {"leader": m.leader, "isr": list(m.isrs), "replicas": list(m.replicas)}
                for topic, t in topics.items() if t.error is None for p, m in t.partitions.items()}
    out = {}
    with ctx.stack.zk() as zk:
        for topic in zk.get_children("/brokers/topics"):
            try:
                assigned = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"]
                for p in zk.get_children(f"/brokers/topics/{topic}/partitions"):
                    state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
                    out[(topic, int(p))] = {**state, "replicas": assigned.get(p, [])}
            except NoNodeError:   # being deleted
                continue
    return out


def whole(ctx: Ctx) -> bool:
    """Every broker registered (KRaft: and unfenced), no reassignment, every partition led and with its full ISR."""
    stack = ctx.stack
    if sorted(stack.registered_brokers()) != sorted(stack.broker_ids()):
        return False
    if not ctx.kraft and stack.zk_exists("/admin/reassign_partitions"):
        return False
    return all(state["leader"] >= 0 and sorted(state["isr"]) == sorted(state["replicas"])
               for state in _partitions(ctx).values())


def wait_whole(ctx: Ctx, what: str, timeout: float = 300) -> None:
    """Until the cluster is whole, then preferred elections until every partition is led by its
    first replica, as an operator restores it after a restart (auto.leader.rebalance is off)."""
    wait(lambda: whole(ctx), timeout, f"the cluster whole again after {what}", interval=1)
    wait(lambda: _balanced(ctx), 120, f"the leaders back on their preferred replicas after {what}", interval=3)


def _leaders(ctx: Ctx) -> dict[int, int]:
    """Broker -> partitions it leads (every broker listed)."""
    counts = {b: 0 for b in ctx.stack.broker_ids()}
    for state in _partitions(ctx).values():
        if state["leader"] in counts:
            counts[state["leader"]] += 1
    return counts


def _gone(ctx: Ctx, broker: int) -> bool:
    return broker not in ctx.stack.registered_brokers()


def _preferred_election(ctx: Ctx) -> None:
    try:
        ctx.admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=40)
    except KafkaException as e:   # partitions already led by their preferred replica are reported as errors
        if "ELECTION_NOT_NEEDED" not in str(e):
            raise


def _balanced(ctx: Ctx) -> bool:
    """A preferred election, then: does every partition's first replica lead it?"""
    _preferred_election(ctx)
    return all(state["leader"] == state["replicas"][0] for state in _partitions(ctx).values())


def load_topics(ctx: Ctx, names: tuple[str, ...], partitions: int = 6) -> None:
    """The steady load's topics, led across the brokers (bench/support/load.py writes and reads them)."""
    for name in names:
        create_topic(ctx, name, spread(ctx, partitions))


def create_topic(ctx: Ctx, name: str, assignment: list[list[int]], **config: str) -> None:
    ctx.admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment, config=config)])[name].result(60)

    def created() -> bool:
        states = _partitions(ctx)
        return all(len(states.get((name, p), {}).get("isr", ())) == len(r) for p, r in enumerate(assignment))
    wait(created, 60, f"topic {name} created", interval=0.5)


def spread(ctx: Ctx, partitions: int) -> list[list[int]]:
    """An assignment on every broker, each partition's preferred leader the next broker."""
    brokers = ctx.stack.broker_ids()
    return [brokers[p % len(brokers):] + brokers[:p % len(brokers)] for p in range(partitions)]


def delete_topic(ctx: Ctx, name: str) -> None:
    ctx.admin.delete_topics([name])[name].result(60)
    if ctx.kraft:
        gone = lambda: name not in ctx.admin.list_topics(timeout=30).topics   # noqa: E731
    else:
        gone = lambda: not ctx.stack.zk_exists(f"/brokers/topics/{name}")   # noqa: E731
    wait(gone, 120, f"topic {name} deleted", interval=1)


def _others(ctx: Ctx, *not_these: int) -> list[int]:
    return [b for b in ctx.stack.broker_ids() if b not in not_these]


def _hold_after(ctx: Ctx, noticed: Callable[[], bool], what: str) -> None:
    """Wait until Kafka noticed the fault (``noticed``), then HOLD_S more."""
    wait(noticed, 120, what, interval=0.2)
    time.sleep(HOLD_S)


# ---------------------------------------------------------------- broker faults

def follower_kill(ctx: Ctx) -> FaultRun:
    leaders = _leaders(ctx)
    victim = ctx.victim(_others(ctx, ctx.active_controller()), lambda b: leaders[b])
    run = FaultRun("follower kill", f"SIGKILL broker {victim} (leads {leaders[victim]} partitions), restart "
                   f"{HOLD_S:g} s after {ctx.gone()}", {"broker": str(victim)})
    run.moment = time.time()
    ctx.stack.kill_broker(victim)
    _hold_after(ctx, lambda: _gone(ctx, victim), f"broker {victim}: {ctx.gone()}")
    ctx.stack.start_broker(victim, RESTART_S)
    wait_whole(ctx, run.name)
    return run


def controller_kill(ctx: Ctx) -> FaultRun:
    victim = ctx.victim([ctx.active_controller()])
    run = FaultRun("controller kill", f"SIGKILL the controller, broker {victim}; restart {HOLD_S:g} s after "
                   "a new one took over", {"broker": str(victim)})
    run.moment = time.time()
    ctx.stack.kill_broker(victim)
    _hold_after(ctx, lambda: ctx.controller() not in (-1, victim), "a new controller")
    ctx.stack.start_broker(victim, RESTART_S)
    wait_whole(ctx, run.name)
    return run


def controller_flapping(ctx: Ctx, kills: int = 3) -> FaultRun:
    run = FaultRun("controller flapping", f"{kills} controllers SIGKILLed in a row, each restarted once the "
                   "next took over", {})
    run.moment = time.time()
    for _ in range(kills):
        victim = ctx.victim([ctx.active_controller()])
        ctx.stack.kill_broker(victim)
        wait(lambda: ctx.controller() not in (-1, victim), 120, "a new controller", interval=0.2)
        ctx.stack.start_broker(victim, RESTART_S)
    time.sleep(HOLD_S)
    wait_whole(ctx, run.name)
    return run


def leader_kill(ctx: Ctx) -> FaultRun:
    topic = "peers-leaders"
    create_topic(ctx, topic, spread(ctx, 6))
    wait(lambda: _balanced(ctx), 120, "every partition led by its preferred replica", interval=3)
    leaders = _leaders(ctx)
    victim = ctx.victim(_others(ctx, ctx.active_controller()), lambda b: -leaders[b])
    run = FaultRun("leader kill", f"SIGKILL broker {victim} (leads {leaders[victim]} partitions), restart "
                   f"{HOLD_S:g} s after {ctx.gone()}, then {HOLD_S:g} s imbalanced, then a "
                   "preferred election", {"broker": str(victim)})
    run.moment = time.time()
    ctx.stack.kill_broker(victim)
    _hold_after(ctx, lambda: _gone(ctx, victim), f"broker {victim}: {ctx.gone()}")
    ctx.stack.start_broker(victim, RESTART_S)
    wait_whole(ctx, run.name)
    time.sleep(HOLD_S)
    wait(lambda: _balanced(ctx), 120, "a preferred election restoring every leader", interval=3)
    delete_topic(ctx, topic)
    return run


def follower_stall(ctx: Ctx) -> FaultRun:
    leaders = _leaders(ctx)
    victim = ctx.victim(_others(ctx, ctx.active_controller()), lambda b: leaders[b])
    stall = STALL_KRAFT_S if ctx.kraft else STALL_S
    run = FaultRun("follower stall", f"SIGSTOP broker {victim} for {stall:g} s (past replica.lag.time.max.ms, "
                   f"within its {'broker' if ctx.kraft else 'ZooKeeper'} session), then SIGCONT", {"broker": str(victim)})
    run.moment = time.time()
    ctx.stack.send_signal(f"broker-{victim}", signal.SIGSTOP)
    expired = False
    try:
        stop_until = time.monotonic() + stall
        while time.monotonic() < stop_until:
            expired = expired or _gone(ctx, victim)
            time.sleep(0.5)
    finally:
        ctx.stack.send_signal(f"broker-{victim}", signal.SIGCONT)
    if expired:
        run.notes.append(f"broker {victim}: {ctx.gone()} during the stop: it was a death too")
    wait_whole(ctx, run.name)
    return run


def min_isr(ctx: Ctx) -> FaultRun:
    topic = "peers-min-isr"
    create_topic(ctx, topic, spread(ctx, 3), **{"min.insync.replicas": "3"})
    victim = ctx.victim(_others(ctx, ctx.active_controller()))
    run = FaultRun("under min ISR", f"topic {topic} (RF 3, min.insync.replicas 3): SIGKILL broker {victim}, restart "
                   f"{HOLD_S:g} s after {ctx.gone()}", {"topic": topic})
    run.moment = time.time()
    ctx.stack.kill_broker(victim)
    _hold_after(ctx, lambda: _gone(ctx, victim), f"broker {victim}: {ctx.gone()}")
    ctx.stack.start_broker(victim, RESTART_S)
    wait_whole(ctx, run.name)
    delete_topic(ctx, topic)
    return run


def unclean_election(ctx: Ctx) -> FaultRun:
    topic = "peers-unclean"
    follower = ctx.victim(_others(ctx, ctx.active_controller()))
    leader = ctx.victim(_others(ctx, ctx.active_controller(), follower))
    create_topic(ctx, topic, [[leader, follower]], **{"unclean.leader.election.enable": "true"})

    def state() -> dict:
        return _partitions(ctx)[(topic, 0)]
    run = FaultRun("unclean election", f"topic {topic} (RF 2, unclean elections allowed): its follower {follower} "
                   f"SIGKILLed and out of the ISR, then its leader {leader} SIGKILLed (offline), then the follower "
                   "restarted (elected uncleanly), then the old leader", {"topic": topic})
    ctx.stack.kill_broker(follower)
    wait(lambda: state()["isr"] == [leader], 120, "the follower out of the ISR", interval=0.2)
    run.moment = time.time()   # from here the partition's only in-sync replica dies
    ctx.stack.kill_broker(leader)
    wait(lambda: state()["leader"] == -1, 120, "the partition offline", interval=0.2)
    time.sleep(HOLD_S)
    ctx.stack.start_broker(follower, RESTART_S)
    wait(lambda: state()["leader"] == follower, 120, "the unclean election", interval=0.2)
    run.notes.append(f"offline from the leader's kill for {time.time() - run.moment:.0f} s, until the unclean election")
    ctx.stack.start_broker(leader, RESTART_S)
    wait_whole(ctx, run.name)
    delete_topic(ctx, topic)
    return run


def reassignment(ctx: Ctx, megabytes: int = 20, rate: int = 2_000_000) -> FaultRun:
    topic = "peers-move"
    controller = ctx.active_controller()
    a, b = _others(ctx, controller)[:2]
    create_topic(ctx, topic, [[a, b]])
    producer = Producer({"bootstrap.servers": ctx.bootstrap, "acks": "all", "linger.ms": 20})
    for _ in range(megabytes * 1024):
        while True:
            try:
                producer.produce(topic, value=b"x" * 1024)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)
    brokers = [ConfigResource(ResourceType.BROKER, str(x), incremental_configs=[
        ConfigEntry(name, str(rate), incremental_operation=AlterConfigOpType.SET)
        for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")])
        for x in ctx.stack.broker_ids()]
    throttled = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, "*", incremental_operation=AlterConfigOpType.SET)
        for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")])
    alter_configs(ctx, [*brokers, throttled])
    target = [a, controller]
    run = FaultRun("reassignment", f"topic {topic}'s partition ({megabytes} MB) moved from {[a, b]} to {target} "
                   f"at {rate / 1e6:g} MB/s (throttled)", {})
    run.moment = time.time()
    if ctx.kraft:   # AlterPartitionReassignments; done once the old replica left the partition
        reassign(ctx.stack, topic, 0, target)
        done = lambda: _partitions(ctx)[(topic, 0)]["replicas"] == target   # noqa: E731
    else:
        with ctx.stack.zk() as zk:
            zk.create("/admin/reassign_partitions", json.dumps(
                {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": target}]}).encode())
        done = lambda: not ctx.stack.zk_exists("/admin/reassign_partitions")   # noqa: E731
    wait(done, 600, "the reassignment done", interval=0.5)
    run.notes.append(f"the reassignment took {time.time() - run.moment:.0f} s")
    for resource in brokers:   # the throttle rates leave the brokers (the topic goes with its deletion)
        for entry in resource.incremental_configs:
            entry.incremental_operation = AlterConfigOpType.DELETE
    alter_configs(ctx, brokers)
    wait_whole(ctx, run.name)
    delete_topic(ctx, topic)
    return run


def alter_configs(ctx: Ctx, resources: list[ConfigResource]) -> None:
    """Through a client of its own: on 2026-11-28 the run's long-lived one sent a broker's AlterConfigs
    to broker 1 and then waited 60 s for broker 2, restarted by the fault before, which never got it."""
    admin = AdminClient({"bootstrap.servers": ctx.bootstrap, "log_level": 0})
    for resource in resources:   # the Admin API takes one broker resource a call
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(60)


# ---------------------------------------------------------------- group faults

class Member(threading.Thread):
    """One consumer of a group in a thread of its own. Clearing ``polling`` stops its polls, so
    it cannot take part in a rebalance; clearing ``committing`` stops its commits (it goes on
    consuming). It commits what it consumed once a second."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: object) -> None:
        super().__init__(daemon=True, name=f"member-{group}")
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "session.timeout.ms": 10000,
                                  "heartbeat.interval.ms": 1000, **conf})
        self.consumer.subscribe([topic])
        self.polling, self.committing, self._done = threading.Event(), threading.Event(), threading.Event()
        self.polling.set()
        self.committing.set()
        self.start()

    def run(self) -> None:
        committed = 0.0
        while not self._done.is_set():
            if not self.polling.is_set():
                time.sleep(0.1)
                continue
            self.consumer.poll(0.2)
            if self.committing.is_set() and time.monotonic() - committed >= 1:
                committed = time.monotonic()
                try:
                    self.consumer.commit(asynchronous=False)
                except KafkaException:   # nothing consumed since the last commit
                    pass
        # leave through the poll loop: a close() that must serve a rebalance can hang (librdkafka#4884)
        self.consumer.unsubscribe()
        settle = time.monotonic() + 1
        while time.monotonic() < settle or (self.consumer.assignment() and time.monotonic() < settle + 10):
            self.consumer.poll(0.2)
        self.consumer.close()

    def leave(self) -> None:
        self.polling.set()
        self._done.set()
        self.join(30)


def _group(ctx: Ctx, group: str) -> tuple[ConsumerGroupState, int]:
    """(state, members) as the group coordinator says."""
    d = ctx.admin.describe_consumer_groups([group])[group].result(30)
    return d.state, len(d.members)


def stable(ctx: Ctx, group: str, members: int) -> bool:
    return _group(ctx, group) == (ConsumerGroupState.STABLE, members)


def delete_group(ctx: Ctx, group: str) -> None:
    try:
        ctx.admin.delete_consumer_groups([group], request_timeout=30)[group].result(60)
    except KafkaException as e:
        if "GROUP_ID_NOT_FOUND" not in str(e):
            raise


def _group_topic(ctx: Ctx, name: str) -> None:
    create_topic(ctx, name, spread(ctx, 2))


def rebalance_storm(ctx: Ctx, pairs: int = 5) -> FaultRun:
    group = topic = "peers-storm"
    _group_topic(ctx, topic)
    ctx.recorder.watch_group(group)
    steady = Member(ctx.bootstrap, group, topic)
    try:
        wait(lambda: stable(ctx, group, 1), 120, f"{group} stable", interval=0.5)
        run = FaultRun("rebalance storm", f"group {group}: a second member joined and left {pairs} times "
                       f"({2 * pairs} rebalances)", {"group": group})
        run.moment = time.time()
        for _ in range(pairs):
            joining = Member(ctx.bootstrap, group, topic)
            try:
                wait(lambda: stable(ctx, group, 2), 120, "a member joined", interval=0.3)
            finally:
                joining.leave()
            wait(lambda: stable(ctx, group, 1), 120, "it left", interval=0.3)
        time.sleep(HOLD_S)
    finally:
        steady.leave()
    delete_group(ctx, group)
    delete_topic(ctx, topic)
    return run


def stuck_rebalance(ctx: Ctx) -> FaultRun:
    group = topic = "peers-stuck"
    _group_topic(ctx, topic)
    ctx.recorder.watch_group(group)
    # the rebalance waits for every member up to the longest max.poll.interval.ms
    held = Member(ctx.bootstrap, group, topic, **{"max.poll.interval.ms": 300_000})
    newcomer = None
    try:
        wait(lambda: stable(ctx, group, 1), 120, f"{group} stable", interval=0.5)
        run = FaultRun("stuck rebalance", f"group {group}: its member stops polling, a second one joins; the "
                       f"rebalance waits for the first (max.poll.interval.ms 300 s), released after "
                       f"kmon's alert or {STUCK_CAP_S:g} s", {"group": group})
        held.polling.clear()
        run.moment = time.time()
        newcomer = Member(ctx.bootstrap, group, topic)
        wait(lambda: _group(ctx, group)[0] == ConsumerGroupState.PREPARING_REBALANCING, 60, "the rebalance waiting", interval=0.5)
        _hold_until_said(ctx, run, "ConsumerGroupStuckRebalancing", STUCK_CAP_S)
        run.notes.append(f"in rebalance for {time.time() - run.moment:.0f} s when released")
    finally:
        held.leave()
        if newcomer is not None:
            newcomer.leave()
    delete_group(ctx, group)
    delete_topic(ctx, topic)
    return run


def _hold_until_said(ctx: Ctx, run: FaultRun, alert: str, cap: float) -> None:
    """Hold a group fault until kmon's ``alert`` fired for the group and Burrow's status of it left
    OK (where Burrow runs), or ``cap`` seconds; what did not come is noted."""
    group = run.culprit["group"]
    burrow = ctx.recorder.burrow is not None

    def kmon_fired() -> bool:
        return any(a.system == KMON and a.name == alert and a.labels.get("group") == group and a.fired_at
                   and a.active_at >= run.moment - 1 for a in ctx.recorder.recorded())

    def burrow_left_ok() -> bool:
        if not burrow:
            return True
        status = ctx.recorder.groups.get(group)
        return status is not None and any(t >= run.moment and s not in HEALTHY for t, s in status.changes)
    try:
        wait(lambda: kmon_fired() and burrow_left_ok(), cap, f"{alert}{' and Burrow' if burrow else ''} on {group}",
             interval=1)
    except TimeoutError:
        missing = [what for what, said in ((f"kmon's {alert}", kmon_fired()), ("Burrow", burrow_left_ok()))
                   if not said]
        run.notes.append(f"nothing from {' or '.join(missing)} within {cap:g} s")


def stalled_consumer(ctx: Ctx, rate: float = 20.0) -> FaultRun:
    group = topic = "peers-lag"
    _group_topic(ctx, topic)
    ctx.recorder.watch_group(group)
    producing = threading.Event()
    producing.set()

    def produce() -> None:
        p = Producer({"bootstrap.servers": ctx.bootstrap, "linger.ms": 5})
        while producing.is_set():
            p.produce(topic, value=b"%f" % time.time())
            p.poll(0)
            time.sleep(1 / rate)
        p.flush(30)
    producer = threading.Thread(target=produce, name="peers-lag-producer", daemon=True)
    producer.start()
    member = Member(ctx.bootstrap, group, topic)
    try:
        wait(lambda: stable(ctx, group, 1), 120, f"{group} stable", interval=0.5)
        # both systems see a healthy consumer first: Burrow needs its window of commits (10)
        time.sleep(60)
        run = FaultRun("stalled consumer", f"group {group}: its consumer goes on polling but stops committing "
                       f"while {rate:g} messages/s arrive; released after kmon's lag alert or {LAG_CAP_S:g} s",
                       {"group": group})
        member.committing.clear()
        run.moment = time.time()
        _hold_until_said(ctx, run, "ConsumerGroupLagSeconds", LAG_CAP_S)
        if ctx.recorder.burrow is not None:
            run.notes.append(f"Burrow: {ctx.recorder.burrow_owners(group)}")
    finally:
        producing.clear()
        member.leave()
        producer.join(30)
    delete_group(ctx, group)
    delete_topic(ctx, topic)
    return run


FAULTS: dict[str, Callable[[Ctx], FaultRun]] = {
    "follower-kill": follower_kill,
    "controller-kill": controller_kill,
    "controller-flapping": controller_flapping,
    "leader-kill": leader_kill,
    "follower-stall": follower_stall,
    "min-isr": min_isr,
    "unclean-election": unclean_election,
    "reassignment": reassignment,
    "rebalance-storm": rebalance_storm,
    "stuck-rebalance": stuck_rebalance,
    "stalled-consumer": stalled_consumer,
}
# the faults a KRaft cluster of three combined nodes cannot stage as written, and why
NOT_ON_KRAFT: dict[str, str] = {
    "unclean-election": "its partition's follower and then its leader must be dead at once, two of the three nodes: "
                        "with every node a controller too that is two of three voters, the quorum has no majority and "
                        "no controller is left to elect anyone (kmon's own KRaft test of unclean and ELR elections "
                        "runs them on a dedicated controller: tests/integration/test_kraft_elections.py)",
}

