"""The groups collector's poll gate: held while a listed broker refuses connections, run anyway every hold."""
from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

from collectors.groups.refusing import Broker, PollGate, refuses, refusing


def test_the_poll_runs_while_no_broker_refuses() -> None:
    gate = PollGate(hold_s=30)
    assert all(gate.admit(False, t) for t in (0, 2, 4))
    assert not gate.holding


def test_a_refusal_holds_the_poll_and_it_runs_anyway_once_per_hold() -> None:
    gate = PollGate(hold_s=30)
    admitted = [t for t in range(0, 70, 2) if gate.admit(True, t)]
    assert admitted == [30, 60]
    assert gate.holding


def test_the_poll_runs_at_once_when_the_refusal_ends_and_a_new_one_holds_again() -> None:
    gate = PollGate(hold_s=30)
    assert not gate.admit(True, 0)
    assert gate.admit(False, 6) and not gate.holding
    assert not gate.admit(True, 8)   # a new refusal: held from its own start
    assert gate.admit(True, 38)


def test_a_closed_port_refuses_and_a_listening_one_does_not() -> None:
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))   # bound, not listening: the kernel refuses connections
        up = Broker(1, "127.0.0.1", listening.getsockname()[1])
        down = Broker(2, "127.0.0.1", closed.getsockname()[1])
        assert not refuses(up)
        assert refuses(down)
        with ThreadPoolExecutor(2) as pool:
            assert refusing([down, up], pool) == [down]
        assert str(down) == f"2 (127.0.0.1:{down.port})"
