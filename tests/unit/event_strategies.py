"""Hypothesis strategies of valid events of every kind (events()), and the events topic's key of one (key_of)."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kmon.events import (KINDS, MARKER_KINDS, STATE_TYPES, BrokerState, ControllerState, Endpoint, Event, GroupMember,
                         GroupState, IsrChangeState, PartitionState, PreferredElectionState, QuorumReplica,
                         QuorumState, ReassignmentState, SnapshotMarker, TopicDeletionState, TopicLag, TopicState,
                         ZnodeMeta, entity_key)
from kmon.metrics import GROUP_STATES

strings = st.text(max_size=6)
small = st.integers(0, 5)
millis = st.integers(0, 2**42)
brokers = st.integers(0, 4)
broker_ids = st.lists(brokers, max_size=4, unique=True).map(tuple)
partition_map = st.dictionaries(st.integers(0, 3), broker_ids, max_size=3)
topics = st.sampled_from(["t", "orders"])


def optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.none() | strategy


STATES: dict[str, st.SearchStrategy] = {   # kind -> its valid states; built once, as drawing is the cost
    "controller": st.builds(ControllerState, st.integers(-1, 4), optional(small), optional(millis), optional(small)),
    "broker": st.builds(
        BrokerState, brokers, optional(strings), optional(st.integers(-1, 65535)), optional(strings),
        st.lists(st.builds(Endpoint, strings, strings, st.integers(0, 65535), strings), max_size=2).map(tuple),
        st.integers(-1, 65535), optional(millis), small,
        st.dictionaries(strings, st.dictionaries(strings, st.integers(0, 2**15 - 1), max_size=2), max_size=2),
        st.booleans(), st.booleans(), optional(strings), optional(millis)),
    "topic": st.builds(
        TopicState, topics, optional(strings), partition_map, partition_map, partition_map,
        st.dictionaries(st.just("min.insync.replicas") | strings, st.sampled_from(["2", "-1", "x"]) | strings,
                        max_size=2), small),
    "partition": st.builds(PartitionState, topics, st.integers(0, 3), st.integers(-2, 4), small, broker_ids, small,
                           st.integers(0, 1), small, partition_epoch=optional(small), elr=optional(broker_ids),
                           last_known_elr=optional(broker_ids)),
    "reassignment": st.builds(
        ReassignmentState, st.dictionaries(st.sampled_from(["t:0", "orders:1"]) | strings, broker_ids, max_size=2)),
    "preferred_election": st.builds(PreferredElectionState, st.lists(strings, max_size=3).map(tuple)),
    "topic_deletion": st.builds(TopicDeletionState, topics),
    "isr_change": st.builds(IsrChangeState, st.lists(strings, max_size=3).map(tuple)),
    "group": st.builds(
        GroupState, st.sampled_from("gh"), st.sampled_from([*{s for states in GROUP_STATES.values() for s in states}, "Unknown"]), st.integers(-1, 20),
        strings, strings, optional(strings),
        st.lists(st.builds(GroupMember, strings, strings, strings, optional(strings),
                           st.lists(strings, max_size=2).map(tuple)), max_size=2).map(tuple),
        optional(st.integers(-1, 4)), strings, optional(millis),
        st.dictionaries(topics, st.builds(TopicLag, millis, optional(st.floats(0, 1e9)),
                                          st.dictionaries(st.integers(0, 3), millis, max_size=2)), max_size=2),
        st.sampled_from(["admin", "offsets"])),
    "quorum": st.builds(
        QuorumState, st.integers(-1, 4), small, st.integers(-1, 2**42),
        *[st.lists(st.builds(QuorumReplica, brokers, st.integers(-1, 2**42), millis, millis),
                   max_size=3).map(tuple)] * 2,
        st.dictionaries(st.just("metadata.version") | strings, st.integers(0, 2**15 - 1), max_size=2)),
    "snapshot_begin": st.builds(SnapshotMarker, st.sampled_from(["s1", "s2"]), strings, small, optional(millis)),
}
STATES["snapshot_end"] = STATES["snapshot_begin"]
IDENTITY: dict[str, Any] = {   # kind -> the entity id's parts, from the state
    "broker": lambda s: (s.broker_id,), "topic": lambda s: (s.topic,), "partition": lambda s: (s.topic, s.partition),
    "topic_deletion": lambda s: (s.topic,), "isr_change": lambda s: (len(s.partitions),), "group": lambda s: (s.group,),
    "snapshot_begin": lambda s: ("zk",), "snapshot_end": lambda s: ("zk",),
}
assert set(STATES) == set(KINDS) == set(STATE_TYPES)


@st.composite
def events(draw: st.DrawFn, kinds: tuple[str, ...] = KINDS) -> Event:
    kind = draw(st.sampled_from(kinds))
    state = draw(STATES[kind])
    op = "marker" if kind in MARKER_KINDS else draw(st.sampled_from(["upsert", "upsert", "delete"]))
    # brokers and partitions of either collector: the views judge KRaft's (fencing, ELR) apart
    kraft = kind == "quorum" or (kind in ("broker", "partition") and draw(st.booleans()))
    source = "groups" if kind == "group" else "kraft" if kraft else "zk"
    return Event(cluster=draw(st.sampled_from(["c1", "c2"])), source=source,
                 kind=kind, entity=entity_key(kind, *IDENTITY.get(kind, lambda s: ())(state)), op=op,
                 observed_ms=draw(millis), data=None if op == "delete" else state, zxid=draw(optional(millis)),
                 znode=draw(optional(st.builds(ZnodeMeta, strings, millis, small, millis, small))),
                 snapshot_id=draw(optional(st.sampled_from(["s1", "s2"]))))


def key_of(event: Event) -> str:
    return f"{event.cluster}/{event.entity}"
