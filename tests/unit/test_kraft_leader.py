"""Finding the metadata quorum's leader from the controllers' answers (collectors/kraft/leader.py)."""
from __future__ import annotations

from collectors.kraft import wire
from collectors.kraft.leader import LeaderFinder, Move

C1, C2, C3 = ("127.0.0.1", 9001), ("127.0.0.1", 9002), ("127.0.0.1", 9003)
FENCED, NOT_LEADER, UNKNOWN = wire.FENCED_LEADER_EPOCH, wire.NOT_LEADER_OR_FOLLOWER, wire.UNKNOWN_LEADER_EPOCH


def leads(node: int, epoch: int) -> wire.LeaderAndEpoch:
    return wire.LeaderAndEpoch(node, epoch)


def test_a_follower_naming_the_leader_and_its_address_sends_kmon_there() -> None:
    finder = LeaderFinder((C1, C2, C3))
    assert finder.target() == C1
    finder.learn({3: C3})
    assert finder.refused(C1, FENCED, leads(3, 4)) is Move.ELSEWHERE
    assert finder.target() == C3 and finder.epoch == 4


def test_the_leader_refusing_an_old_epoch_is_asked_again_at_its_epoch() -> None:
    finder = LeaderFinder((C3,))
    finder.learn({3: C3})
    assert finder.refused(C3, FENCED, leads(3, 4)) is Move.AGAIN
    assert finder.epoch == 4


def test_the_leader_refusing_an_epoch_kmon_ran_ahead_to_lowers_it() -> None:
    finder = LeaderFinder((C3,), leader_id=3, epoch=9)
    finder.learn({3: C3})
    assert finder.refused(C3, UNKNOWN, leads(3, 4)) is Move.AGAIN
    assert finder.epoch == 4


def test_a_node_answering_the_same_refusal_twice_is_left_for_the_next_controller() -> None:
    """The CI failure: an address held for the leader that is not the leader's (or a leader kmon
    keeps asking at an epoch it refuses) was asked again and again, a silent busy loop."""
    finder = LeaderFinder((C1, C2, C3))
    finder.learn({3: C1})                 # wrong: node 1's address held as the leader's
    assert finder.refused(C1, NOT_LEADER, leads(3, 4)) is Move.AGAIN
    assert finder.refused(C1, NOT_LEADER, leads(3, 4)) is Move.WAIT
    assert 3 not in finder.endpoints
    assert [finder.target() for _ in range(3)] == [C1, C2, C3]


def test_a_leader_whose_address_nobody_says_is_sought_among_every_controller_given_and_named() -> None:
    finder = LeaderFinder((C1, C2, C3))
    asked = []
    for _ in range(3):
        address = finder.target()
        asked.append(address)
        if address != C3:
            assert finder.refused(address, FENCED, leads(3, 4)) is Move.ELSEWHERE
    assert asked == [C1, C2, C3]
    lost = finder.why_lost()
    assert lost and "node 3 (epoch 4)" in lost and "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003" in lost
    finder.learn({3: C3})
    assert finder.why_lost() is None


def test_no_leader_named_means_an_election_wait_then_the_next_controller() -> None:
    finder = LeaderFinder((C1, C2), leader_id=2, epoch=3)
    finder.learn({2: C2})
    assert finder.refused(C2, NOT_LEADER, leads(-1, 4)) is Move.WAIT
    assert finder.leader_id == -1 and finder.why_lost() is None
    assert finder.target() == C1


def test_a_fetch_served_names_the_leader_and_clears_a_refusal() -> None:
    finder = LeaderFinder((C1,))
    finder.learn({1: C1})
    assert finder.refused(C1, FENCED, leads(1, 2)) is Move.AGAIN
    finder.served(leads(1, 2))
    assert finder.refused(C1, FENCED, leads(1, 2)) is Move.AGAIN   # after records were served, a refusal is news again
    assert (finder.leader_id, finder.epoch) == (1, 2)


def test_a_restarted_voter_that_cannot_say_where_the_leader_listens_then_a_follower_that_can() -> None:
    """The sequence of the CI failure: node 1, restarted with static voters, knew the leader only on
    the first controller listener, so it named leader 3 with no address on the mTLS listener; node 2
    named it with its address. The collector kept asking node 2, which kept refusing."""
    finder = LeaderFinder((C1, C2, C3))
    assert finder.target() == C1
    assert finder.refused(C1, FENCED, leads(3, 1)) is Move.ELSEWHERE
    assert finder.target() == C2
    finder.learn({3: C3})
    assert finder.refused(C2, NOT_LEADER, leads(3, 1)) is Move.ELSEWHERE
    assert finder.target() == C3
