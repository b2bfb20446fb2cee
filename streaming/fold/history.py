"""The transitions of one applied event, as history rows: pure.

:func:`rows` compares an entity's state before and after an event that
:func:`streaming.fold.entity.apply_event` applies, and names what changed, one row per
transition; apply_event counts those rows (kmon.history.COUNTED), so that a counter always
equals the number of its rows. A first observation of an entity that was there before kmon
watched (part of a resync snapshot) is not a transition.
"""
from __future__ import annotations

from typing import Any

from kmon.events import BrokerState, ControllerState, Event, GroupState, PartitionState, TopicState
from kmon.history import Transition
from streaming.fold.transitions import (RECOVERING, broker_transitions, controller_transitions, group_transitions,
                                        partition_transitions, records_lost_from, saw_every_version)


def rows(prev: Any, new: Any, event: Event, first_sight: bool) -> tuple[Transition, ...]:
    """``prev``/``new``: the entity's state before and after (None: none, or deleted);
    ``first_sight``: kmon held no record of it at all, not even a deletion's."""
    if prev is None and new is not None and first_sight and event.snapshot_id is not None:
        return ()   # first seen in a resync: there before kmon watched
    return tuple(_rows_of(prev, new, event))


def _rows_of(prev: Any, new: Any, event: Event) -> list[Transition]:
    # when it happened: the controller's append time of a metadata record (a collector restarted reads
    # what happened while it was away later), else when a collector observed it
    when = event.log.append_ms if event.log is not None and event.log.append_ms is not None else event.observed_ms
    base = {"time_ms": when, "cluster": event.cluster, "entity": event.entity, "position": event.position}
    if isinstance(new, PartitionState) or isinstance(prev, PartitionState):
        return _partition(prev, new, base, saw_every_version(event))
    if isinstance(new, ControllerState):
        return _controller(prev, new, base)
    if isinstance(new, GroupState) or isinstance(prev, GroupState):
        return _group(prev, new, base)
    if isinstance(new, BrokerState) or isinstance(prev, BrokerState):
        return _broker(prev, new, base)
    if isinstance(new, TopicState) or isinstance(prev, TopicState):
        return _came_or_went(prev, new, base, "topic_created", "topic_deleted",
                             topic=(new or prev).topic) + _reassignments(prev, new, base)
    # KRaft's quorum is re-emitted every few seconds (its high watermark moves all the time): no
    # transition, its leader changes are the controller entity's
    return []


def _ids(brokers: Any) -> str:
    return ",".join(map(str, brokers))


def _came_or_went(prev: Any, new: Any, base: dict, came: str, went: str, **about: Any) -> list[Transition]:
    if prev is None and new is not None:
        return [Transition(**base, kind=came, **about)]
    if prev is not None and new is None:
        return [Transition(**base, kind=went, **about)]
    return []


def _partition(prev: PartitionState | None, new: PartitionState | None, base: dict,
               consecutive: bool) -> list[Transition]:
    if prev is None or new is None:   # no counted transition on a first sight or a deletion
        return []
    t = partition_transitions(prev, new, consecutive)
    at = {**base, "topic": new.topic, "partition": new.partition}
    isr = {"old": _ids(prev.isr), "new": _ids(new.isr), "epoch": new.leader_epoch}
    rows = [Transition(**at, **isr, kind="isr_shrink", broker=b) for b in sorted(t.shrinks)]
    rows += [Transition(**at, **isr, kind="isr_expand", broker=b) for b in sorted(t.expands)]
    rows += [Transition(**at, **isr, kind="replica_removed", broker=b) for b in sorted(t.removed)]
    if t.election:
        kind = "unclean_leader_election" if t.unclean else "elr_leader_election" if t.elr else "leader_election"
        rows.append(Transition(**at, kind=kind, broker=new.leader, old=str(prev.leader), new=str(new.leader),
                               epoch=new.leader_epoch, detail=_election_detail(prev, new)))
    return rows


def _election_detail(prev: PartitionState, new: PartitionState) -> str:
    detail = f"isr before {_ids(prev.isr) or 'empty'}"
    if new.elr is None:   # ZooKeeper mode
        return detail
    detail += f", elr before {_ids(prev.elr or ()) or 'empty'}"
    return detail + (", leader recovering" if new.leader_recovery_state == RECOVERING else "")


def _broker(prev: BrokerState | None, new: BrokerState | None, base: dict) -> list[Transition]:
    broker = (new or prev).broker_id
    if prev is None or new is None:
        return _came_or_went(prev, new, base, "broker_registered", "broker_gone", broker=broker,
                             detail=_registration(new) if new is not None else None)
    t = broker_transitions(prev, new)
    gone = [Transition(**base, kind="broker_gone", broker=broker, detail="unseen: registered again since")
            ] if t.gone_between else []
    steps = (("broker_registered", t.reregistered or t.gone_between), ("broker_controlled_shutdown",
             t.controlled_shutdown), ("broker_fenced", t.fenced), ("broker_unfenced", t.unfenced))
    return gone + [Transition(**base, kind=kind, broker=broker, detail=_registration(new))
                   for kind, happened in steps if happened]


def _registration(state: BrokerState) -> str | None:
    """A KRaft registration, for people: which process, and whether it is shutting down."""
    if state.incarnation_id is None:
        return None
    return f"incarnation {state.incarnation_id}" + (", in controlled shutdown" if state.in_controlled_shutdown else "")


def _controller(prev: ControllerState | None, new: ControllerState, base: dict) -> list[Transition]:
    if prev is None or not controller_transitions(prev, new):
        return []
    return [Transition(**base, kind="controller_change", broker=new.broker_id, old=str(prev.broker_id),
                       new=str(new.broker_id), epoch=new.epoch,
                       detail=f"epoch {prev.epoch} -> {new.epoch}")]


def _group(prev: GroupState | None, new: GroupState | None, base: dict) -> list[Transition]:
    if prev is None or new is None:
        return []
    at = {**base, "group": new.group, "broker": new.coordinator}
    rows = []
    members = _members(new)
    if prev.state != new.state:
        # Kafka 4's protocols: who is reconciling (or was) as the group went Assigning, Reconciling, Stable
        rows.append(Transition(**at, kind="group_state_change", old=prev.state, new=new.state,
                               generation=new.generation, detail=members if new.assignment_epoch is not None else None))
    steps = group_transitions(prev, new)
    # generations stepped over between two polls are rebalances too: one row each, as counted
    for generation in range(new.generation - steps + 1, new.generation + 1):
        rows.append(Transition(**at, kind="rebalance", generation=generation, old=str(generation - 1),
                               new=str(generation),
                               detail=members if generation == new.generation else "between two polls"))
    return rows + _records_lost(prev, new, at)


def _records_lost(prev: GroupState, new: GroupState, at: dict) -> list[Transition]:
    """The records each partition's log start offset passed since the last lag while the group's committed
    offset was behind them: from the new committed offset or the last log start, whichever is later, to the
    new log start (transitions.records_lost_from)."""
    rows = []
    for topic, lag in sorted(new.lag.items()):
        before = prev.lag.get(topic)
        if before is None:
            continue
        for partition, start in sorted(lag.log_start.items()):
            first = records_lost_from(before.log_start.get(partition), lag.committed.get(partition), start)
            if first is not None:
                rows.append(Transition(**at, kind="records_lost", topic=topic, partition=partition, old=str(first),
                                       new=str(start), detail=f"{start - first} record(s) deleted unread; committed "
                                                              f"offset {lag.committed[partition]}"))
    return rows


SHOWN_MEMBERS = 10   # a rebalance row names this many of the members still reconciling, at most


def _members(g: GroupState) -> str:
    """A rebalance's group, for people: its members and assignor; under Kafka 4's protocols also the
    target assignment and who has not reconciled with it yet (their epoch and state)."""
    said = f"{len(g.members)} member(s), assignor {g.protocol or '-'}"
    if g.assignment_epoch is None:   # a classic group: its leader chose the assignment
        return f"{said}, leader {g.leader or '-'}"
    said += f", {g.group_type} protocol, target assignment epoch {g.assignment_epoch}, {g.reconciling} reconciling"
    behind = [m for m in g.members if m.member_epoch != g.assignment_epoch or m.member_state not in (None, "STABLE")]
    shown = ", ".join(f"{m.member_id} (client {m.client_id}, epoch {m.member_epoch}, {m.member_state or '-'})"
                      for m in behind[:SHOWN_MEMBERS])
    return said + (f": {shown}" if shown else "") + (" ..." if len(behind) > SHOWN_MEMBERS else "")


def _reassignments(prev: TopicState | None, new: TopicState | None, base: dict) -> list[Transition]:
    if prev is None or new is None:
        return []
    moving_before, moving_now = set(prev.adding) | set(prev.removing), set(new.adding) | set(new.removing)
    rows = []
    for p in sorted(moving_now - moving_before):
        target = [b for b in new.replicas.get(p, ()) if b not in new.removing.get(p, ())]
        rows.append(Transition(**base, kind="reassignment_started", topic=new.topic, partition=p,
                               old=_original(new, p), new=_ids(target)))
    for p in sorted(moving_before - moving_now):
        rows.append(Transition(**base, kind="reassignment_finished", topic=new.topic, partition=p,
                               old=_original(prev, p), new=_ids(new.replicas.get(p, ()))))
    return rows


def _original(state: TopicState, p: int) -> str:
    """A moving partition's replicas before the move: its assignment without those being added."""
    return _ids(b for b in state.replicas.get(p, ()) if b not in state.adding.get(p, ()))
