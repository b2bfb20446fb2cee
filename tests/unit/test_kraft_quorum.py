"""The quorum as kmon tells it (collectors/kraft/quorum.py): which changes are only the log going on."""
from __future__ import annotations

from dataclasses import replace

from collectors.kraft.quorum import LEADERLESS_S, QuorumTeller, progress_only, quorum_state
from collectors.kraft.wire import QuorumInfo, ReplicaInfo

NOW = 1_000_000


def info(high_watermark: int, ends: tuple[int, int, int], leader: int = 3001, epoch: int = 7,
         caught_up: int = NOW) -> QuorumInfo:
    voters = tuple(ReplicaInfo(3001 + i, end, caught_up, caught_up) for i, end in enumerate(ends))
    return QuorumInfo(error=0, message=None, leader_id=leader, epoch=epoch, high_watermark=high_watermark,
                      voters=voters, observers=(ReplicaInfo(1, high_watermark, caught_up, caught_up),), endpoints={})


def test_the_log_going_on_is_progress_only() -> None:
    before = quorum_state(info(100, (100, 100, 100)), NOW)
    after = quorum_state(info(104, (104, 104, 104)), NOW + 2000)
    assert after != before and progress_only(before, after)


def test_a_new_leader_epoch_lagging_voter_or_feature_is_more_than_progress() -> None:
    before = quorum_state(info(100, (100, 100, 100)), NOW, {"metadata.version": 27})
    for changed in (quorum_state(info(104, (104, 104, 104), leader=3002), NOW, {"metadata.version": 27}),
                    quorum_state(info(104, (104, 104, 104), epoch=8), NOW, {"metadata.version": 27}),
                    quorum_state(info(104, (104, 104, 90), caught_up=NOW - 3000), NOW, {"metadata.version": 27}),
                    quorum_state(info(104, (104, 104, 104)), NOW, {"metadata.version": 28}),
                    replace(before, voters=before.voters[:2])):
        assert not progress_only(before, changed), changed


def test_the_description_is_sent_on_a_change_and_every_progress_interval_unchanged_too() -> None:
    teller = QuorumTeller(progress_interval_s=10)
    first = quorum_state(info(100, (100, 100, 100)), NOW)
    assert teller.described(first, now=0) == first
    assert teller.described(first, now=5) is None                 # unchanged, not due
    went_on = quorum_state(info(104, (104, 104, 104)), NOW)
    assert teller.described(went_on, now=6) is None               # progress only, not due
    new_leader = quorum_state(info(104, (104, 104, 104), leader=3002, epoch=8), NOW)
    assert teller.described(new_leader, now=7) == new_leader      # more than progress: at once
    assert teller.described(new_leader, now=16) is None
    assert teller.described(new_leader, now=17) == new_leader     # unchanged, but due: the views see it fresh


def test_no_leader_answering_for_a_while_is_a_quorum_without_leader_sent_once() -> None:
    teller = QuorumTeller(progress_interval_s=10)
    assert teller.unanswered(last_answer=0, now=60) is None        # nothing described yet: nothing to tell
    described = quorum_state(info(100, (100, 100, 100), leader=3002, epoch=8), NOW)
    teller.described(described, now=100)
    assert teller.unanswered(last_answer=99, now=99 + LEADERLESS_S - 0.1) is None   # an election takes seconds
    leaderless = teller.unanswered(last_answer=99, now=99 + LEADERLESS_S)
    assert leaderless == replace(described, leader_id=-1)          # the last epoch, voters and high watermark
    assert teller.unanswered(last_answer=99, now=120) is None      # said once
    back = quorum_state(info(110, (110, 110, 110), leader=3002, epoch=9), NOW)
    assert teller.described(back, now=121) == back                 # a leader again: at once
