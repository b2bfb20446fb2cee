"""The transition history's row: what changed, when, in the order it happened.

The streaming app writes one :class:`Transition` per transition its views count and per
moment around them (brokers and topics coming and going, reassignments, group states) to an
append-only table (see streaming/history_log.py); ``kmon history`` reads it. This module is
the one description of that row, as kmon/events.py is of an event and kmon/metrics.py of a
metric: the writer, the reader, the README and the tests take the kinds and columns from here.
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

# kind -> what one row of it says. "old"/"new" hold the values before and after.
TRANSITION_KINDS: dict[str, str] = {
    "isr_shrink": "a broker left a partition's ISR (old/new: the ISR)",
    "isr_expand": "a broker joined a partition's ISR (old/new: the ISR)",
    "replica_removed": "a reassignment took a broker out of a partition, and so out of its ISR (old/new: the ISR)",
    "leader_election": "a partition got a new leader from its ISR (old/new: the leader, epoch: leader epoch)",
    "elr_leader_election": "a partition got a new leader from its eligible leader replicas, outside its last ISR "
                           "(KRaft, KIP-966: clean)",
    "unclean_leader_election": "a partition got a new leader from outside its last ISR (KRaft: and outside its "
                               "eligible leader replicas, or entering leader recovery)",
    "controller_change": "the active controller changed, -1 meaning none (old/new: broker, or KRaft's quorum leader; "
                         "epoch: controller epoch, or the quorum's raft epoch)",
    "broker_registered": "a broker registered (ZooKeeper, or KRaft's metadata log: also a restarted broker's new "
                         "registration)",
    "broker_gone": "a broker's registration disappeared (shutdown, crash or lost session; KRaft: unregistered; "
                   "ZooKeeper: also one found made again, its deletion unseen, told before the new one)",
    "broker_fenced": "a registered broker was fenced: it missed its heartbeats or completed its shutdown (KRaft)",
    "broker_unfenced": "a fenced broker was unfenced: caught up with the metadata log, it serves again (KRaft)",
    "broker_controlled_shutdown": "a broker began a controlled shutdown: its leaders move away (KRaft)",
    "topic_created": "a topic appeared",
    "topic_deleted": "a topic disappeared",
    "reassignment_started": "a partition began moving (old: its replicas, new: the target)",
    "reassignment_finished": "a partition's move completed (old: its replicas before, new: after)",
    "group_state_change": "a consumer group changed state (old/new: the state)",
    "rebalance": "a consumer group completed a rebalance (generation: the new one)",
    "records_lost": "a partition's log start offset passed records a consumer group had not read: retention or "
                    "DeleteRecords deleted them (old: the first of them, new: the new log start offset; counted: "
                    "new - old)",
}

class Counted(NamedTuple):
    """One counted transition, named once: the counter the views export, the key of its count in an
    entity's record (per broker where ``per_broker``, per topic where ``per_topic``), and the history
    kinds whose rows it counts, one each unless ``amount`` says how many a row holds. The fold counts
    from the rows (streaming/fold/entity.py), so a counter is the sum of the rows of its kinds with its
    labels, by construction."""
    metric: str
    key: str
    kinds: tuple[str, ...]
    per_broker: bool = False
    per_topic: bool = False
    amount: Callable[["Transition"], int] | None = None

    def of(self, row: "Transition") -> int:
        return 1 if self.amount is None else self.amount(row)


ISR_SHRINKS = "isr_shrinks"
ISR_EXPANDS = "isr_expands"
LEADER_ELECTIONS = "leader_elections"
UNCLEAN_LEADER_ELECTIONS = "unclean_leader_elections"
ELR_LEADER_ELECTIONS = "elr_leader_elections"
CONTROLLER_CHANGES = "controller_changes"
REBALANCES = "rebalances"
LOST_MESSAGES = "lost_messages"


def _records_between(row: "Transition") -> int:
    return int(row.new or 0) - int(row.old or 0)


COUNTED: tuple[Counted, ...] = (
    Counted("kmon_isr_shrinks_total", ISR_SHRINKS, ("isr_shrink",), per_broker=True),
    Counted("kmon_isr_expands_total", ISR_EXPANDS, ("isr_expand",), per_broker=True),
    Counted("kmon_leader_elections_total", LEADER_ELECTIONS,
            ("leader_election", "elr_leader_election", "unclean_leader_election")),
    Counted("kmon_unclean_leader_elections_total", UNCLEAN_LEADER_ELECTIONS, ("unclean_leader_election",)),
    Counted("kmon_elr_leader_elections_total", ELR_LEADER_ELECTIONS, ("elr_leader_election",)),
    Counted("kmon_controller_changes_total", CONTROLLER_CHANGES, ("controller_change",)),
    Counted("kmon_consumer_group_rebalances_total", REBALANCES, ("rebalance",)),
    Counted("kmon_consumer_group_lost_messages_total", LOST_MESSAGES, ("records_lost",), per_topic=True,
            amount=_records_between),
)
def topic_key(key: str, topic: str) -> str:
    """Where a ``per_topic`` counter of an entity keeps one topic's count among its counters."""
    return f"{key}:{topic}"


def topic_counts(counters: Mapping[str, int], key: str) -> dict[str, int]:
    """A ``per_topic`` counter's count of each topic, from an entity's counters (topic_key's inverse)."""
    prefix = topic_key(key, "")
    return {k[len(prefix):]: n for k, n in counters.items() if k.startswith(prefix)}


# history kind -> the counters one of its rows adds to
COUNTED_BY_KIND: dict[str, tuple[Counted, ...]] = {
    kind: tuple(c for c in COUNTED if kind in c.kinds) for kind in {k for c in COUNTED for k in c.kinds}}


class Transition(NamedTuple):
    """A tuple in COLUMNS order: the app makes hundreds of thousands per broker failure at 100k
    partitions, and turns rows into columns in one step (streaming/history_log.py)."""
    # when it happened (ms since the epoch): under KRaft the controller's append time of the record,
    # else when a collector observed it
    time_ms: int
    cluster: str
    kind: str                    # one of TRANSITION_KINDS
    entity: str                  # the event entity it was seen on, e.g. partition:orders:3
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None    # the broker it is about: left/joined, new leader, new controller
    group: str | None = None
    old: str | None = None
    new: str | None = None
    epoch: int | None = None     # leader epoch or controller epoch
    generation: int | None = None
    # the source's order of the change (a zxid, or a metadata offset under KRaft): orders what one
    # millisecond holds
    position: int | None = None
    detail: str | None = None    # the rest, for people: members, assignor, leader of a group


COLUMNS: tuple[str, ...] = Transition._fields


# order_key's columns, for a columnar sort (a missing position first, as order_key's -1)
ORDER: tuple[str, ...] = ("time_ms", "position", "entity", "kind")


def order_key(t: Transition) -> tuple[int, int, str, str]:
    """Time, then the source's order, then the entity: a stable order for rows of one instant."""
    return t.time_ms, t.position if t.position is not None else -1, t.entity, t.kind
