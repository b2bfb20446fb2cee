"""Ports of the local stack's servers: outside the kernel's ephemeral range, so that a stopped
broker's port cannot be handed to another process's automatic socket while it is down."""
from pathlib import Path

import pytest

from stack.process import FIRST_PICKED_PORT, ephemeral_ports, free_port, port_slice


def test_picked_ports_are_below_the_ephemeral_range() -> None:
    ports = {free_port((32768, 60999)) for _ in range(50)}
    assert all(FIRST_PICKED_PORT <= p < 32768 for p in ports), ports
    assert len(ports) > 1


def test_a_range_that_leaves_little_below_picks_above() -> None:
    assert all(50001 <= free_port((1024, 50000)) <= 65535 for _ in range(20))


def test_no_room_outside_the_range_takes_what_the_kernel_gives() -> None:
    assert 0 < free_port((1024, 65535)) <= 65535


def test_the_kernel_range_is_read_and_defaults_where_unreadable(tmp_path: Path) -> None:
    given = tmp_path / "range"
    given.write_text("40000\t50000\n")
    assert ephemeral_ports(given) == (40000, 50000)
    assert ephemeral_ports(tmp_path / "missing") == (32768, 60999)
    given.write_text("garbage")
    assert ephemeral_ports(given) == (32768, 60999)


def test_a_port_to_avoid_is_never_picked() -> None:
    avoid = set(range(FIRST_PICKED_PORT, 32768)) - {30000}
    assert {free_port((32768, 60999), avoid=avoid) for _ in range(5)} <= {30000} | set(range(32768, 65536))


def test_port_slices_share_the_range_without_meeting() -> None:
    whole = range(FIRST_PICKED_PORT, 32768)
    slices = [port_slice(whole, {"KMON_PORT_SLICE": f"{i}/3"}) for i in range(3)]
    assert sorted(p for s in slices for p in s) == list(whole)
    assert port_slice(whole, {}) == whole


def test_free_port_picks_in_its_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMON_PORT_SLICE", "3/4")
    assert {(free_port((32768, 60999)) - FIRST_PICKED_PORT) % 4 for _ in range(30)} == {3}


@pytest.mark.parametrize("given", ["4/4", "1", "a/b", "-1/2"])
def test_a_bad_port_slice_is_named(given: str) -> None:
    with pytest.raises(ValueError, match=f"KMON_PORT_SLICE='{given}'"):
        port_slice(range(10), {"KMON_PORT_SLICE": given})
