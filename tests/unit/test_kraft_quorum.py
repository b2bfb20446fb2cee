"""The quorum as kmon tells it (collectors/kraft/quorum.py): which changes are only the log going on."""
from __future__ import annotations

from dataclasses import replace

from collectors.kraft.quorum import progress_only, quorum_state
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
