"""Consumer groups judged from their committed and end offsets over a sliding window."""
from __future__ import annotations

from collectors.groups.consumer_status import ConsumerStatus

P = ("orders", 0)


def run(*polls: tuple[int, int], every: float = 5.0, window: float = 60.0) -> list[str | None]:
    """The group's status after each poll of (committed, end) offsets."""
    status, seen = ConsumerStatus(window), []
    for i, (committed, end) in enumerate(polls):
        status.observe(i * every, {"g": {P: committed}}, {P: end})
        seen.append(status.group("g"))
    return seen


def test_nothing_is_said_until_the_samples_span_the_window() -> None:
    assert run(*[(0, 10)] * 12) == [None] * 12          # 55 s of samples
    assert run(*[(0, 10)] * 13)[-1] == "stopped"         # 60 s


def test_a_consumer_that_polls_but_never_commits_while_messages_arrive_is_stalled() -> None:
    seen = run(*[(100, 100 + 10 * i) for i in range(14)])
    assert seen[12:] == ["stalled", "stalled"]


def test_caught_up_is_ok_however_old_the_last_commit_on_a_quiet_topic() -> None:
    assert run(*[(500, 500)] * 20)[-1] == "ok"


def test_a_slow_consumer_catching_up_is_ok() -> None:
    # commits move, lag shrinks (1000 behind at first)
    assert run(*[(100 * i, 1000 + 50 * i) for i in range(20)])[-1] == "ok"


def test_a_consumer_whose_lag_grows_at_every_sample_is_falling_behind() -> None:
    assert run(*[(10 * i, 20 * i + 5) for i in range(20)])[-1] == "falling_behind"
    # one sample where it gained ends the verdict
    polls = [(10 * i, 20 * i + 5) for i in range(17)] + [(190, 345), (190, 365), (200, 385)]
    assert run(*polls)[-1] == "ok"


def test_a_committed_offset_that_went_back_is_a_rewind_until_it_leaves_the_window() -> None:
    polls = [(1000 + i, 1100 + i) for i in range(13)] + [(0, 1113)] + [(i, 1114 + i) for i in range(1, 20)]
    seen = run(*polls)
    assert seen[13] == "rewound" and seen[-1] != "rewound"


def test_the_group_is_its_worst_partition_and_a_partition_no_longer_committed_to_goes() -> None:
    status = ConsumerStatus(60)
    q = ("orders", 1)
    for i in range(13):
        status.observe(5 * i, {"g": {P: 100, q: 10 * i}}, {P: 100 + i, q: 10 * i})
    assert status.partitions("g") == {P: "stalled", q: "ok"} and status.group("g") == "stalled"
    status.observe(65, {"g": {q: 130}}, {P: 113, q: 130})
    assert status.partitions("g") == {q: "ok"} and status.group("g") == "ok"
    status.observe(70, {}, {})
    assert status.group("g") is None
