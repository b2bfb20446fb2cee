"""What one change of a partition, an assignment, the controller, a broker or a topic is worth in
transitions, as kmon's history defines each kind (kmon/history.py; streaming/fold/transitions.py and
history.py), written again here: the oracle must not share kmon's mistakes. Both ZooKeeper mode and
KRaft use these; where their sources differ, the caller says so (``elr`` None: ZooKeeper mode)."""
from __future__ import annotations

from dataclasses import dataclass

from bench.oracle import OracleTransition

NO_LEADER = -1


@dataclass(frozen=True)
class At:
    """Where in the source a change is: its position (zxid or offset) and when it was written."""
    position: int
    time_ms: int | None


@dataclass(frozen=True)
class PartitionVersion:
    leader: int                          # -1: none (ZooKeeper mode: -2 while its topic is being deleted)
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...] | None = None   # KRaft's eligible leader replicas (KIP-966); None in ZooKeeper mode
    recovering: bool = False             # KRaft: the leader was elected uncleanly and has not recovered (KIP-704)


def ids(brokers: tuple[int, ...]) -> str:
    return ",".join(map(str, brokers))


def partition_steps(topic: str, partition: int, prev: PartitionVersion, new: PartitionVersion, at: At,
                    target: tuple[int, ...] | None) -> list[OracleTransition]:
    """The transitions between two consecutive versions of a partition: each broker that left or
    joined the ISR, then the election if a real leader (a broker id) took over. ``target``: the
    replicas the partition's assignment keeps when ``new`` was written (None: unknown); a broker
    outside it left the ISR because a move took it out of the partition, not as a shrink."""
    base = {"entity": f"partition:{topic}:{partition}", "position": at.position, "time_ms": at.time_ms,
            "topic": topic, "partition": partition}
    isr = {"old": ids(prev.isr), "new": ids(new.isr), "epoch": new.leader_epoch}
    left = sorted(set(prev.isr) - set(new.isr))
    rows = [OracleTransition(kind="isr_shrink" if target is None or b in target else "replica_removed", broker=b,
                             **base, **isr) for b in left]
    rows += [OracleTransition(kind="isr_expand", broker=b, **base, **isr) for b in sorted(set(new.isr) - set(prev.isr))]
    if new.leader != prev.leader and new.leader >= 0:
        rows.append(OracleTransition(kind=_election(prev, new), broker=new.leader, old=str(prev.leader),
                                     new=str(new.leader), epoch=new.leader_epoch, **base))
    return rows


def _election(prev: PartitionVersion, new: PartitionVersion) -> str:
    # the ISR a partition kept while offline (ZooKeeper keeps the last one, KRaft too or moves it to the
    # ELR) judges the election that brings it back
    outside_isr = new.leader not in prev.isr
    from_elr = outside_isr and prev.elr is not None and new.leader in prev.elr
    # KRaft marks an unclean election itself: the new leader starts recovering
    marked = new.recovering and not prev.recovering
    if marked or (outside_isr and not from_elr):
        return "unclean_leader_election"
    return "elr_leader_election" if from_elr else "leader_election"


@dataclass(frozen=True)
class Assignment:
    """A partition's replicas, and those being added and removed while it moves."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)

    def before_move(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.adding)

    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)


def reassignment_steps(topic: str, partition: int, prev: Assignment, new: Assignment,
                       at: At) -> list[OracleTransition]:
    """A move starting (old: the replicas before it, new: its target) or finishing (old: the replicas
    before it, new: after); a move whose target changes while it runs goes on."""
    base = {"entity": f"topic:{topic}", "position": at.position, "time_ms": at.time_ms, "topic": topic,
            "partition": partition}
    if new.moving and not prev.moving:
        return [OracleTransition(kind="reassignment_started", old=ids(new.before_move()), new=ids(new.target()),
                                 **base)]
    if prev.moving and not new.moving:
        return [OracleTransition(kind="reassignment_finished", old=ids(prev.before_move()), new=ids(new.replicas),
                                 **base)]
    return []


def controller_change(old: int, new: int, epoch: int | None, at: At) -> OracleTransition:
    return OracleTransition(kind="controller_change", entity="controller", position=at.position, time_ms=at.time_ms,
                            broker=new, old=str(old), new=str(new), epoch=epoch)


def broker_step(kind: str, broker: int, at: At) -> OracleTransition:
    return OracleTransition(kind=kind, entity=f"broker:{broker}", position=at.position, time_ms=at.time_ms,
                            broker=broker)


def topic_step(kind: str, topic: str, at: At) -> OracleTransition:
    return OracleTransition(kind=kind, entity=f"topic:{topic}", position=at.position, time_ms=at.time_ms, topic=topic)
