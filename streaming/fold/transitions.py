"""What changed between two consecutive states of one entity: the counted transitions.

Pure functions of (previous, new) state. ``prev is None`` means a first observation
(or the first after a deletion): nothing is counted, because kmon cannot know what
happened before it was watching.
"""
from __future__ import annotations

from typing import NamedTuple

from kmon.events import BrokerState, ControllerState, Event, GroupState, PartitionState

NO_LEADER = -1
RECOVERING = 1   # PartitionState.leader_recovery_state of a leader elected uncleanly, until it recovered (KIP-704)


class PartitionTransitions(NamedTuple):
    """A tuple: the fold makes one per partition event, and a frozen dataclass' __init__
    costs several times a tuple's."""
    shrinks: frozenset[int] = frozenset()   # brokers that left the ISR
    removed: frozenset[int] = frozenset()   # ... as a reassignment took them out of the partition: no failure
    expands: frozenset[int] = frozenset()   # brokers that joined the ISR
    election: bool = False                  # a new real leader (not a move to -1)
    unclean: bool = False                   # ... that was not in the previous ISR (KRaft: nor ELR)
    elr: bool = False                       # ... from the previous ELR, outside the previous ISR (KRaft)


def partition_transitions(prev: PartitionState | None, new: PartitionState,
                          consecutive: bool = True) -> PartitionTransitions:
    """``consecutive``: ``prev`` was the state just before ``new`` (see saw_every_version)."""
    # A topic being deleted loses its replicas one by one: the controller's doing, not a failure.
    if prev is None or new.deleting:
        return PartitionTransitions()
    old_isr, new_isr = frozenset(prev.isr), frozenset(new.isr)
    # Going offline (leader -> -1) is not an election; coming back (-1 -> b) is one.
    election = new.leader != prev.leader and new.leader != NO_LEADER
    # ZooKeeper keeps the last ISR of an offline partition (KRaft too, or moves it to the ELR),
    # so this also judges an election that brings an offline partition back. It judges only an
    # election from the ISR kmon saw last: a broker that rejoined the ISR in a state kmon missed,
    # then was elected cleanly, would look unclean.
    outside_isr = election and consecutive and new.leader not in old_isr
    # KIP-966: a replica removed from an ISR that fell below min.insync.replicas stays eligible,
    # with every committed record: electing it loses nothing
    from_elr = outside_isr and prev.elr is not None and new.leader in prev.elr
    # KRaft marks an unclean election itself, whatever kmon saw before: the new leader starts
    # RECOVERING. (ZooKeeper-mode states are judged by the ISR alone, as they always were.)
    recovering = (election and new.elr is not None and new.leader_recovery_state == RECOVERING
                  and prev.leader_recovery_state != RECOVERING)
    unclean = recovering or (outside_isr and not from_elr)
    left = old_isr - new_isr
    removed = left.difference(new.remaining) if new.remaining is not None else frozenset()
    return PartitionTransitions(shrinks=left - removed, removed=removed, expands=new_isr - old_isr, election=election,
                                unclean=unclean, elr=from_elr and not unclean)


class BrokerTransitions(NamedTuple):
    """What changed in a broker's registration (KRaft: ZooKeeper-mode states are never fenced)."""
    reregistered: bool = False          # a new process of the broker registered (a new incarnation id)
    # ZooKeeper mode: its registration znode was made again since the last read, its deletion unseen
    # (kmon stopped, or a ZooKeeper restart hid it): the broker was gone in between, and is back
    gone_between: bool = False
    fenced: bool = False
    unfenced: bool = False
    controlled_shutdown: bool = False   # began one


def broker_transitions(prev: BrokerState, new: BrokerState) -> BrokerTransitions:
    """Between two registrations of one broker; a first registration is not one of these."""
    if new.incarnation_id != prev.incarnation_id:
        # a restarted broker's registration replaces the old one and starts fenced: one step
        return BrokerTransitions(reregistered=True)
    if None not in (prev.registration_zxid, new.registration_zxid) and prev.registration_zxid != new.registration_zxid:
        return BrokerTransitions(gone_between=True)   # an ephemeral znode made again: the old one was deleted
    return BrokerTransitions(fenced=new.fenced and not prev.fenced, unfenced=prev.fenced and not new.fenced,
                             controlled_shutdown=new.in_controlled_shutdown and not prev.in_controlled_shutdown)


def saw_every_version(event: Event) -> bool:
    """Whether the state before ``event``'s is the one kmon saw last: ZooKeeper coalesces the
    watch notifications of quick successive writes (the collector counts the versions it
    never read, ``version_gap``), a resync snapshot follows a spell kmon was blind, and a sample
    of the brokers' metadata (KRaft without the controllers) may follow several changes."""
    return (event.snapshot_id is None and not event.sampled
            and (event.znode is None or event.znode.version_gap == 0))


def controller_transitions(prev: ControllerState | None, new: ControllerState) -> int:
    """1 if the active controller changed (incl. to none, -1), else 0."""
    if prev is None:
        return 0
    if new.broker_id != prev.broker_id:
        return 1
    if new.broker_id == NO_LEADER:
        return 0
    # The same broker re-elected itself. Its /controller registration is new (new
    # timestamp); the epoch bump may arrive as a separate event of the same election,
    # so it only decides when the registration timestamps are unknown.
    if prev.timestamp_ms is not None and new.timestamp_ms is not None:
        return int(new.timestamp_ms != prev.timestamp_ms)
    return int(prev.epoch is not None and new.epoch is not None and new.epoch > prev.epoch)


def group_transitions(prev: GroupState | None, new: GroupState) -> int:
    """Rebalances completed: generation steps, so generations missed between polls count."""
    if prev is None or prev.generation < 0 or new.generation < 0:  # -1: generation unknown
        return 0
    return max(0, new.generation - prev.generation)


def records_lost_from(start_before: int | None, committed: int | None, start: int) -> int | None:
    """The first offset of the records a partition's log start offset passed unread, since it was
    ``start_before``, now that it is ``start`` and the group's committed offset ``committed``; None if none.
    Those below ``start_before`` were counted then; those below ``committed`` the group had read. (A group
    that caught up past the old start and was reset to the new one between two looks shows nothing lost:
    kmon counts what it saw behind the log start.)"""
    if start_before is None or committed is None:
        return None
    first = max(committed, start_before)
    return first if start > first else None
