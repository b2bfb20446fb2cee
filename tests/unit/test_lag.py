"""Tests of collectors.groups.lag: lag seconds from (end offset, time) samples."""

from __future__ import annotations

import pytest

from collectors.groups.lag import EndOffsetSamples, LagTable


def samples(*points: tuple[int, float], max_samples: int = 60) -> EndOffsetSamples:
    table = EndOffsetSamples(max_samples)
    for offset, time in points:
        table.add(offset, time)
    return table


# End offset 100 at t=10, 200 at t=20, 400 at t=30.
STEADY = ((100, 10.0), (200, 20.0), (400, 30.0))


def test_no_samples_no_estimate() -> None:
    assert EndOffsetSamples().lag_seconds(5, now=100.0) is None
    assert LagTable().lag_seconds("t", 0, 5, now=100.0) is None


@pytest.mark.parametrize("committed", [400, 401, 10_000])
def test_caught_up_is_zero(committed: int) -> None:
    assert samples(*STEADY).lag_seconds(committed, now=99.0) == 0.0


@pytest.mark.parametrize(("committed", "time"), [(100, 10.0), (200, 20.0)])
def test_exact_sample_hit(committed: int, time: float) -> None:
    assert samples(*STEADY).lag_seconds(committed, now=35.0) == 35.0 - time


@pytest.mark.parametrize(("committed", "seconds"), [(150, 20.0), (300, 10.0), (399, 5.05)])
def test_interpolated(committed: int, seconds: float) -> None:
    assert samples(*STEADY).lag_seconds(committed, now=35.0) == pytest.approx(seconds)


def test_interpolation_error_is_within_sampling_interval() -> None:
    # The true production times: offset o was written at o / 10 s. Sampling every
    # 10 s, any committed offset's estimate is within one interval of the truth.
    table = samples(*((10 * t, float(t)) for t in range(0, 101, 10)))
    now = 100.0
    for committed in range(0, 1000, 7):
        estimate = table.lag_seconds(committed, now)
        assert estimate is not None
        assert abs(estimate - (now - committed / 10)) <= 10.0


def test_extrapolated_from_two_oldest_samples() -> None:
    # Rate between the two oldest samples: 100 offsets / 10 s, so offset 50 was at t=5.
    assert samples(*STEADY).lag_seconds(50, now=35.0) == pytest.approx(30.0)


def test_extrapolated_from_single_sample_is_the_time_since_it() -> None:
    assert samples((100, 10.0)).lag_seconds(50, now=35.0) == 25.0   # a lower bound of the true 30 s


def test_single_sample_caught_up() -> None:
    assert samples((100, 10.0)).lag_seconds(100, now=35.0) == 0.0


def test_offsets_not_advancing_are_dropped_keeping_earliest_time() -> None:
    table = samples((100, 10.0), (200, 20.0))
    assert not table.add(200, 25.0)
    assert not table.add(200, 60.0)
    assert len(table) == 2
    # The consumer stuck at 150 stays 15 s behind t=20's end offset, growing with now.
    assert table.lag_seconds(150, now=80.0) == pytest.approx(65.0)


def test_time_not_advancing_is_dropped() -> None:
    table = samples((100, 10.0))
    assert not table.add(200, 10.0)
    assert not table.add(300, 9.0)
    assert len(table) == 1


def test_offset_going_backwards_restarts_the_table() -> None:
    table = samples(*STEADY)
    assert table.add(50, 40.0)  # topic recreated: a new log
    assert len(table) == 1
    assert table.lag_seconds(50, now=45.0) == 0.0


def test_table_is_bounded_to_newest_samples() -> None:
    table = samples(*((100 * i, float(i)) for i in range(10)), max_samples=3)
    assert len(table) == 3  # offsets 700, 800, 900 at t = 7, 8, 9
    assert table.lag_seconds(750, now=10.0) == pytest.approx(2.5)
    assert table.lag_seconds(100, now=10.0) == pytest.approx(9.0)  # evicted: extrapolated at 100/s


def test_now_before_sample_is_not_negative() -> None:
    assert samples(*STEADY).lag_seconds(200, now=15.0) == 0.0


@pytest.mark.parametrize("max_samples", [0, -1])
def test_max_samples_must_be_positive(max_samples: int) -> None:
    with pytest.raises(ValueError, match="max_samples"):
        EndOffsetSamples(max_samples)
    with pytest.raises(ValueError, match="max_samples"):
        LagTable(max_samples)


def test_lag_table_keeps_partitions_apart_and_forgets() -> None:
    table = LagTable(max_samples=5)
    assert table.add("orders", 0, 100, 10.0)
    assert table.add("orders", 0, 200, 20.0)
    assert table.add("orders", 1, 1000, 20.0)
    assert table.lag_seconds("orders", 0, 150, now=30.0) == pytest.approx(15.0)
    assert table.lag_seconds("orders", 1, 150, now=30.0) == 10.0   # one sample: the time since it
    table.forget("orders", 1)
    table.forget("orders", 9)  # unknown partitions are fine
    assert table.lag_seconds("orders", 1, 150, now=30.0) is None
    assert table.lag_seconds("orders", 0, 200, now=30.0) is not None
