"""Who the controller of a KRaft cluster is, asked three ways twice a second through a run.

- **the Admin API's answer**: DescribeCluster's controller id, what kafka-ui, AKHQ and KMinion
  show as "the controller". A KRaft broker answers it with a broker of its choice, not the active
  controller (the quorum's leader, which a client reaches through the brokers anyway);
- **the quorum's own**: DescribeQuorum's leader and epoch, asked of the controllers
  (tests.support.quorum); every election steps the epoch;
- **kmon's**: ``kmon_controller_changes_total`` on the stream app's /metrics (a change of the
  quorum's leader, or of its epoch with the same leader, as the metadata log tells it).

:func:`flaps` counts how often each changed over a stretch of the run; a change of the Admin API's
answer with no epoch step between its two answers is one that no election made.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench.peers.report import Phase
from bench.support.measure import metric_sum
from bench.support.polling import Polling
from stack.local import LocalStack
from tests.support import quorum

POLL_S = 0.5


@dataclass(frozen=True)
class Sample:
    at: float                    # wall clock
    answered: int | None         # DescribeCluster's controller id (-1: none named); None: no answer
    leader: int | None           # the quorum's leader (-1: none); None: no controller described the quorum
    epoch: int | None            # the quorum's epoch; None: as leader
    kmon_changes: float | None   # kmon_controller_changes_total; None: kmon's /metrics did not answer


@dataclass(frozen=True)
class Flaps:
    answers: int = 0             # DescribeCluster answers in the stretch
    answer_changes: int = 0      # answers naming another controller than the answer before
    unelected: int = 0           # of those, the ones with no epoch step since the answer before
    epoch_steps: int = 0         # how far the quorum's epoch moved over the stretch
    leader_changes: int = 0      # changes of the quorum's leader seen between two samples
    kmon_changes: int = 0        # kmon_controller_changes_total's increase over the stretch

    def __add__(self, other: "Flaps") -> "Flaps":
        return Flaps(*(a + b for a, b in zip(self.__dict__.values(), other.__dict__.values())))


def flaps(samples: list[Sample], start: float, end: float) -> Flaps:
    """What changed in [start, end). Values carry over from the samples before the stretch: the
    first answer in it is a change if it differs from the last one before; the epoch and kmon's
    counter move from their last value before the stretch (or their first in it) to their last in it.
    A change of the answer is unelected when the quorum described at its sample had the epoch it
    had at the answer before's (a sample whose quorum was not described does not count it)."""
    answers = changes = unelected = leader_changes = 0
    answered = leader = epoch = kmon = epoch_at_answer = None
    epoch_from = kmon_from = None
    entered = False
    for s in sorted(samples, key=lambda x: x.at):
        if s.at >= end:
            break
        inside = s.at >= start
        if inside and not entered:
            entered = True
            epoch_from, kmon_from = epoch, kmon
        epoch = s.epoch if s.epoch is not None else epoch
        kmon = s.kmon_changes if s.kmon_changes is not None else kmon
        if inside:
            epoch_from = epoch if epoch_from is None else epoch_from
            kmon_from = kmon if kmon_from is None else kmon_from
        if s.leader is not None:
            leader_changes += inside and leader is not None and s.leader != leader
            leader = s.leader
        if s.answered is not None:
            if inside:
                answers += 1
                if answered is not None and s.answered != answered:
                    changes += 1
                    unelected += s.epoch is not None and s.epoch == epoch_at_answer
            answered, epoch_at_answer = s.answered, s.epoch
    if not entered:
        return Flaps()
    return Flaps(answers, changes, unelected,
                 epoch - epoch_from if epoch is not None and epoch_from is not None else 0,
                 leader_changes,
                 round(kmon - kmon_from) if kmon is not None and kmon_from is not None else 0)


def rows(samples: list[Sample], phases: list[Phase]) -> list[dict]:
    """A row per fault, then one for every quiet stretch together (the healthy cluster)."""
    def row(name: str, seconds: float, f: Flaps) -> dict:
        return {"stretch": name, "s": round(seconds), "describe_cluster_answers": f.answers,
                "describe_cluster_changes": f.answer_changes, "of_them_with_no_election": f.unelected,
                "quorum_epoch_steps": f.epoch_steps, "quorum_leader_changes": f.leader_changes,
                "kmon_controller_changes": f.kmon_changes}
    out = [row(p.run.name, p.end - p.start, flaps(samples, p.start, p.end)) for p in phases if p.run is not None]
    quiet = [p for p in phases if p.run is None]
    if quiet:
        total = sum((flaps(samples, p.start, p.end) for p in quiet), Flaps())
        out.append(row("quiet (all)", sum(p.end - p.start for p in quiet), total))
    return out


class ControllerWatch(Polling):
    """Samples the three answers every POLL_S in a thread of its own until the block ends, each also
    a JSON line in ``record`` as it is taken (what a run that dies on the way leaves behind)."""

    def __init__(self, stack: LocalStack, cluster: str, record: Path) -> None:
        assert stack.state
        super().__init__("peers-controllers", join_s=15)
        self.stack, self.cluster, self.stream_port, self.record = stack, cluster, stack.state.stream_port, record
        self.admin = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers, "log_level": 0})
        self.samples: list[Sample] = []

    def _run(self) -> None:
        with open(self.record, "a") as record:
            while not self._stop.is_set():
                began = time.time()
                sample = Sample(began, self._answered(), *self._quorum(), self._kmon())
                self.samples.append(sample)
                record.write(json.dumps(dataclasses.asdict(sample)) + "\n")
                record.flush()
                self._stop.wait(max(0.0, POLL_S - (time.time() - began)))

    def _answered(self) -> int | None:
        try:
            controller = self.admin.describe_cluster(request_timeout=2).result(timeout=3).controller
        except (KafkaException, TimeoutError):   # a cluster in a failover: no answer this time
            return None
        return controller.id if controller is not None else -1

    def _quorum(self) -> tuple[int | None, int | None]:
        try:
            q = quorum(self.stack, timeout=1)
        except (AssertionError, OSError):   # no controller describes it: an election under way
            return None, None
        return q.leader_id, q.epoch

    def _kmon(self) -> float | None:
        try:
            return metric_sum(self.stream_port, "kmon_controller_changes_total", cluster=self.cluster)
        except OSError:
            return None
