"""The broker probe without Kafka: which listener it probes, which brokers it follows from the
collector's events, and what counts as an answer, against local sockets that answer, refuse or
stay silent (a hung JVM's kernel still accepts connections)."""
from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import pytest

from collectors.broker_probe import BrokerProbe, Target, target_of
from collectors.telemetry import Telemetry
from kmon.events import BrokerState, Endpoint, Event, entity_key
from kmon.reachability import kafka_probe
from tests.unit.fakes import ListSink


def broker(broker_id: int, *endpoints: Endpoint) -> Event:
    return Event(cluster="c", source="zk", kind="broker", entity=entity_key("broker", broker_id), op="upsert",
                 observed_ms=1, data=BrokerState(broker_id, None, -1, None, endpoints=endpoints))


def gone(broker_id: int) -> Event:
    return Event(cluster="c", source="zk", kind="broker", entity=entity_key("broker", broker_id), op="delete",
                 observed_ms=2, data=None)


def test_the_plaintext_listener_is_probed_first_then_sasl_then_tls() -> None:
    sasl_ssl, ssl_, plain = (Endpoint("EXTERNAL", "e", 9093, "SASL_SSL"), Endpoint("TLS", "t", 9094, "SSL"),
                             Endpoint("INTERNAL", "i", 9092, "PLAINTEXT"))
    assert target_of(broker(1, sasl_ssl, ssl_, plain).data) == Target("i", 9092, tls=False)
    assert target_of(broker(1, sasl_ssl, ssl_).data) == Target("t", 9094, tls=True)
    assert target_of(broker(1).data) is None


class Server:
    """A local listener that answers each request with a few bytes, or reads and says nothing."""

    def __init__(self, answers: bool) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.answers = answers
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.recv(64)
            if self.answers:
                conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x07")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server, int]]:
    answering, silent = Server(True), Server(False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refusing = s.getsockname()[1]   # bound, not listening: connections are refused
        yield answering, silent, refusing
    answering.close()
    silent.close()


def test_an_answer_a_refusal_and_silence(servers: tuple[Server, Server, int]) -> None:
    answering, silent, refusing = servers
    assert kafka_probe("127.0.0.1", answering.port, 1.0) is None
    assert "refused" in (kafka_probe("127.0.0.1", refusing, 1.0) or "").lower()
    assert kafka_probe("127.0.0.1", silent.port, 0.3) == "no answer within 0.3 s"


def test_each_registered_broker_is_probed_and_one_gone_is_forgotten_later(servers: tuple[Server, Server, int]) -> None:
    answering, silent, _ = servers
    now = [0.0]
    telemetry = Telemetry("c")
    probe = BrokerProbe(telemetry, timeout_s=0.3, forget_after_s=60, clock=lambda: now[0])
    sink = ListSink()
    watched = probe.watching(sink)
    for event in (broker(1, Endpoint("PLAINTEXT", "127.0.0.1", answering.port, "PLAINTEXT")),
                  broker(2, Endpoint("PLAINTEXT", "127.0.0.1", silent.port, "PLAINTEXT"))):
        watched.publish(event)
    assert len(sink.events) == 2, "the events go on to the collector's sink"

    def reachable(b: int) -> float | None:
        return telemetry.registry.get_sample_value("kmon_collector_broker_reachable", {"cluster": "c", "broker": str(b)})
    with ThreadPoolExecutor(4) as pool:
        probe._round(pool)
        assert (reachable(1), reachable(2)) == (1, 0)
        watched.publish(gone(2))
        now[0] = 30
        probe._round(pool)
        assert reachable(2) == 0, "still probed a while after its registration went"
        now[0] = 91
        probe._round(pool)
        assert (reachable(1), reachable(2)) == (1, None), "then forgotten, its series gone"
