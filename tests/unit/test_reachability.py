"""kmon.reachability: when an address out of reach is worth a line, which line, and when to give up;
and the client-log adapters that feed it (collectors/client_logs.py)."""
from __future__ import annotations

import argparse
import logging
import socket
import threading
from typing import Callable

import pytest

from collectors.client_logs import KazooLog
from kmon.flags import non_negative_float
from kmon.reachability import (
    EVENTS_BOOTSTRAP,
    MONITORED_ZOOKEEPER,
    Reachability,
    gave_up_line,
    keep_probing,
    reached_line,
    tcp_probe,
    unreachable_line,
    watch,
)

from tests.unit.fakes import Clock

LOGGER = "test.reachability"



@pytest.fixture
def clock() -> Clock:
    return Clock()


Lines = Callable[[], list[tuple[int, str]]]


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Lines:
    """What was logged through LOGGER so far, as (level, message)."""
    caplog.set_level(logging.DEBUG, LOGGER)
    return lambda: [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def reach(clock: Clock, role: str = EVENTS_BOOTSTRAP, address: str = "k:9092") -> Reachability:
    return Reachability(role, address, "retrying every 2 s", logging.getLogger(LOGGER), clock=clock,
                        grace_s=3, repeat_s=60)


def test_lines_name_role_address_reason_and_what_follows() -> None:
    assert unreachable_line("events bootstrap", "k:9092", 3.4, "Connection refused", "retrying every 2 s") == \
        "cannot reach the events bootstrap k:9092 for 3 s (Connection refused); retrying every 2 s"
    assert unreachable_line("monitored ZooKeeper", "z:2181/kafka", 12, None, "retrying") == \
        "cannot reach the monitored ZooKeeper z:2181/kafka for 12 s (no answer yet); retrying"
    assert reached_line("monitored bootstrap", "k:9092", 41.6) == "reached the monitored bootstrap k:9092 after 42 s"
    assert gave_up_line("events bootstrap", "k:9092", 3, "Connection refused") == \
        "cannot reach the events bootstrap k:9092 within the startup timeout of 3 s (Connection refused); exiting"
    assert gave_up_line("events bootstrap", "k:9092", 2.5, None).endswith("of 2.5 s (no answer); exiting")


def test_one_line_after_the_grace_then_only_every_repeat_then_the_recovery(clock: Clock, lines: Lines) -> None:
    r = reach(clock)
    r.failed("Connection refused")
    clock.now += 2.9
    assert r.check() and lines() == []
    clock.now += 0.1
    assert r.check()
    assert lines() == [(logging.WARNING, "cannot reach the events bootstrap k:9092 for 3 s (Connection refused); "
                                       "retrying every 2 s")]
    for _ in range(59):     # a check per second, each after another failed attempt
        clock.now += 1
        r.failed("Connection refused")
        r.check()
    assert len(lines()) == 1
    clock.now += 1
    r.explain("timed out")
    r.check()
    assert lines()[-1] == (logging.WARNING, "cannot reach the events bootstrap k:9092 for 63 s (timed out); "
                                          "retrying every 2 s")
    clock.now += 7
    r.reached()
    assert lines()[-1] == (logging.INFO, "reached the events bootstrap k:9092 after 70 s")
    assert len(lines()) == 3 and not r.out_of_reach and r.line() is None


def test_reached_within_the_grace_says_nothing(clock: Clock, lines: Lines) -> None:
    r = reach(clock)
    clock.now += 1
    r.reached()
    r.failed("connection lost")    # a blip: back before anyone needed to hear of it
    clock.now += 2
    r.check()
    r.reached()
    clock.now += 10
    r.check()
    assert lines() == [] and r.ever_reached


def test_a_second_outage_is_timed_from_its_own_start(clock: Clock, lines: Lines) -> None:
    r = reach(clock)
    r.reached()
    clock.now += 500
    r.failed("session expired")
    assert r.line() == "cannot reach the events bootstrap k:9092 for 0 s (session expired); retrying every 2 s"
    clock.now += 3
    r.check()
    assert lines() == [(logging.WARNING, "cannot reach the events bootstrap k:9092 for 3 s (session expired); "
                                       "retrying every 2 s")]


def test_explain_is_no_news_while_reached(clock: Clock) -> None:
    r = reach(clock)
    r.explain("Connection refused")     # before the first answer: the reason
    assert "(Connection refused)" in (r.line() or "")
    r.reached()
    r.explain("broker 2: Connection refused")   # one broker of several
    assert not r.out_of_reach


def test_observe_takes_a_probe_verdict(clock: Clock) -> None:
    r = reach(clock)
    r.observe("Connection refused")
    assert r.out_of_reach and not r.ever_reached
    r.observe(None)
    assert not r.out_of_reach and r.ever_reached


def test_the_startup_timeout_gives_up_with_one_line(clock: Clock, lines: Lines) -> None:
    r = reach(clock, MONITORED_ZOOKEEPER, "z:2181")
    r.explain("Connection dropped: Connection refused")
    clock.now += 2.9
    assert r.check(3)
    clock.now += 0.1
    assert not r.check(3)
    assert lines() == [(logging.ERROR, "cannot reach the monitored ZooKeeper z:2181 within the startup timeout "
                                       "of 3 s (Connection dropped: Connection refused); exiting")]


def test_the_startup_timeout_is_about_the_first_answer_only(clock: Clock) -> None:
    r = reach(clock)
    r.reached()
    r.failed("Connection refused")
    clock.now += 100
    assert r.check(3) and r.check(0)


def test_no_startup_timeout_waits_for_ever(clock: Clock) -> None:
    r = reach(clock)
    clock.now += 10_000
    assert r.check(0)


def test_unknown_roles_are_refused(clock: Clock) -> None:
    with pytest.raises(ValueError, match="unknown role"):
        Reachability("events cluster", "k:9092", "retrying", logging.getLogger(LOGGER), clock=clock)


def test_watch_gives_up_on_the_first_overdue_role_only(clock: Clock, lines: Lines) -> None:
    zk, events = reach(clock, MONITORED_ZOOKEEPER, "z:2181"), reach(clock)
    clock.now += 5
    assert not watch(threading.Event(), [zk, events], 3, every=0)
    assert lines() == [(logging.ERROR, "cannot reach the monitored ZooKeeper z:2181 within the startup timeout "
                                       "of 3 s (no answer); exiting")]


def test_the_startup_timeout_counts_from_the_commands_start_and_names_the_first_role(clock: Clock,
                                                                                   lines: Lines) -> None:
    """A collector's publisher was made a second before its collector (CI under load, 2026-11-30): at the
    startup timeout, both never reached, the line names the monitored cluster, the first one watched."""
    events = reach(clock)
    clock.now += 1
    zk = reach(clock, MONITORED_ZOOKEEPER, "z:2181")
    clock.now += 2.5   # 3.5 s after the events' start, 2.5 s after the collector's
    assert not watch(threading.Event(), [zk, events], 3, every=0)
    assert lines() == [(logging.ERROR, "cannot reach the monitored ZooKeeper z:2181 within the startup timeout "
                                       "of 3 s (no answer); exiting")]


def test_watch_returns_true_when_stopped_or_done(clock: Clock) -> None:
    stopped = threading.Event()
    stopped.set()
    assert watch(stopped, [reach(clock)], 3, every=0)
    r = reach(clock)
    r.reached()
    clock.now += 5
    assert watch(threading.Event(), [reach(clock)], 3, until=lambda: r.ever_reached)


def test_tcp_probe_says_why_no_address_answered() -> None:
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))    # bound, not listening: refuses connections
        up, down = (f"127.0.0.1:{s.getsockname()[1]}" for s in (listening, closed))
        assert tcp_probe(up) is None
        assert tcp_probe(f"{down},{up}") is None
        assert tcp_probe(down) == "Connection refused"
        assert tcp_probe(f"{down}, {down}") == f"{down}: Connection refused, {down}: Connection refused"


def test_keep_probing_feeds_the_verdicts_until_stopped(clock: Clock) -> None:
    r, stop = reach(clock), threading.Event()
    verdicts = iter(["Connection refused", None])

    def probe() -> str | None:
        verdict = next(verdicts)
        if verdict is None:
            stop.set()
        return verdict

    keep_probing(r, probe, stop, every=0)
    assert r.ever_reached and not r.out_of_reach


def test_kazoo_lines_go_to_debug_and_their_warnings_explain(clock: Clock, lines: Lines) -> None:
    r = reach(clock, MONITORED_ZOOKEEPER, "z:2181")
    kazoo = KazooLog(logging.getLogger(LOGGER), r)
    kazoo.warning("Connection dropped: %s", "socket connection error: Connection refused")
    kazoo.info("Connecting to %s:%s", "z", 2181)
    kazoo.log(5, "Read response")          # kazoo's BLATHER stays below debug: not shown
    kazoo.error("Error in connection state listener")
    assert lines() == [(logging.DEBUG, "Connection dropped: socket connection error: Connection refused"),
                     (logging.DEBUG, "Connecting to z:2181"),
                     (logging.ERROR, "Error in connection state listener")]
    assert r.line() == ("cannot reach the monitored ZooKeeper z:2181 for 0 s (Connection dropped: socket connection "
                        "error: Connection refused); retrying every 2 s")


def test_startup_timeout_flag_values() -> None:
    assert non_negative_float("0") == 0.0 and non_negative_float("2.5") == 2.5
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(argparse.ArgumentTypeError):
            non_negative_float(bad)


def test_refused_credentials_end_the_wait_at_once_with_one_line(clock: Clock, lines: Lines) -> None:
    r = reach(clock, MONITORED_ZOOKEEPER, "z:2181")
    kazoo = KazooLog(logging.getLogger(LOGGER), r, "SASL DIGEST-MD5 as 'kmon'")
    kazoo.warning("AUTH_FAILED closing: %s", "Connection dropped in SASL")
    r.refused("a second reason is not news")
    assert r.check(startup_timeout=0) is False
    assert lines()[-1] == (logging.ERROR, "the monitored ZooKeeper z:2181 refused kmon (SASL DIGEST-MD5 as 'kmon': "
                                          "AUTH_FAILED closing: Connection dropped in SASL); exiting: retrying cannot "
                                          "fix that")


def test_a_sasl_login_that_kills_kazoos_connection_thread_is_a_refusal(clock: Clock) -> None:
    r = reach(clock, MONITORED_ZOOKEEPER, "z:2181")
    kazoo = KazooLog(logging.getLogger(LOGGER), r, "SASL DIGEST-MD5 as 'kmon'")

    def _authenticate_with_sasl() -> None:   # named as kazoo's frame is
        raise RuntimeError("Invalid error code")

    for fails in (lambda: (_ for _ in ()).throw(RuntimeError("elsewhere")), _authenticate_with_sasl):
        try:
            fails()
        except RuntimeError:
            kazoo.exception("Unhandled exception in connection loop")
        refused = r.check(startup_timeout=0) is False
        assert refused == (fails is _authenticate_with_sasl)


def test_librdkafka_authentication_errors_refuse_and_others_do_not(clock: Clock) -> None:
    from confluent_kafka import KafkaError

    from collectors.client_logs import refusals
    r = reach(clock)
    error_cb = refusals(r)
    error_cb(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
    assert r.check() is True
    error_cb(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials with "
                                                    "SASL mechanism SCRAM-SHA-512"))
    assert r.check() is False
