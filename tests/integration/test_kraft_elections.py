"""Elections only KRaft makes, end to end on real processes: a leader elected from the eligible leader
replicas (KIP-966) and an unclean election. Every broker of a partition must be able to die, so the
quorum lives on a dedicated controller (1 controller, 3 brokers)."""
from __future__ import annotations

import signal
from typing import Iterator

import pytest

from stack.local import LocalStack
from tests.conftest import monitored_stack
from tests.support import create_topic, eventually, value

pytestmark = pytest.mark.integration
CLUSTER = "kraft-elections"


@pytest.fixture(scope="module")
def mon(tmp_path_factory: pytest.TempPathFactory, toolchain) -> Iterator[LocalStack]:
    with monitored_stack(tmp_path_factory.mktemp("kraft-elections"), toolchain, CLUSTER, brokers=3, controllers=1,
                         kraft=True, prometheus=False) as stack:
        yield stack


@pytest.fixture(autouse=True)
def all_running(mon: LocalStack) -> Iterator[None]:
    yield
    mon.restart_stopped()


def v(stack: LocalStack, name: str, **labels: str) -> float | None:
    assert stack.state
    return value(stack.state.stream_port, name, CLUSTER, **labels)


def partition(stack: LocalStack, topic: str) -> tuple[float | None, float | None]:
    """The views' leader and ISR size of partition 0 (exported while it is not fully healthy)."""
    return (v(stack, "kmon_partition_leader", topic=topic, partition="0"),
            v(stack, "kmon_partition_isr_size", topic=topic, partition="0"))


def leader_of(stack: LocalStack, topic: str) -> int:
    from confluent_kafka.admin import AdminClient
    assert stack.state
    meta = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers}).list_topics(topic, timeout=10)
    return meta.topics[topic].partitions[0].leader


def test_e1_the_last_in_sync_replicas_shut_down_cleanly_one_comes_back_an_elr_election(mon: LocalStack) -> None:
    topic = "e1-elr"
    eventually(lambda: v(mon, "kmon_brokers") == 3, 120, "three brokers exported")
    create_topic(mon, topic, partitions=1, rf=3, config={"min.insync.replicas": "2"})
    eventually(lambda: v(mon, "kmon_partitions", topic=topic) == 1, 60, "topic exported")
    leader = leader_of(mon, topic)
    first, second = [b for b in (1, 2, 3) if b != leader]
    # below min ISR the replicas leaving the ISR stay eligible: shut down cleanly, they lost nothing
    mon.kill(f"broker-{first}", signal.SIGTERM)
    mon.kill(f"broker-{second}", signal.SIGTERM)
    eventually(lambda: (v(mon, "kmon_elr_partitions", topic=topic) or 0) >= 1, 60, "a partition with an ELR")
    mon.kill(f"broker-{leader}", signal.SIGTERM)
    eventually(lambda: v(mon, "kmon_offline_partitions", topic=topic) == 1, 60, "offline with every replica down")
    mon.start(f"broker-{second}")
    eventually(lambda: partition(mon, topic)[0] == second, 90, "the eligible replica leads")
    assert v(mon, "kmon_elr_leader_elections_total", topic=topic) == 1
    assert not v(mon, "kmon_unclean_leader_elections_total", topic=topic)


def test_e2_the_only_replica_left_dies_and_one_out_of_sync_comes_back_an_unclean_election(mon: LocalStack) -> None:
    topic = "e2-unclean"
    eventually(lambda: v(mon, "kmon_brokers") == 3, 120, "three brokers back")
    create_topic(mon, topic, partitions=1, rf=2,
                 config={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    eventually(lambda: v(mon, "kmon_partitions", topic=topic) == 1, 60, "topic exported")
    leader = leader_of(mon, topic)
    follower = next(b for b in _replicas(mon, topic) if b != leader)
    mon.kill(f"broker-{follower}")
    eventually(lambda: partition(mon, topic)[1] == 1, 60, "the follower out of the ISR")
    mon.kill(f"broker-{leader}")
    eventually(lambda: v(mon, "kmon_offline_partitions", topic=topic) == 1, 60, "offline")
    mon.start(f"broker-{follower}")
    eventually(lambda: partition(mon, topic)[0] == follower, 90, "the out-of-sync replica leads")
    assert v(mon, "kmon_unclean_leader_elections_total", topic=topic) == 1


def _replicas(stack: LocalStack, topic: str) -> list[int]:
    from confluent_kafka.admin import AdminClient
    assert stack.state
    meta = AdminClient({"bootstrap.servers": stack.state.bootstrap_servers}).list_topics(topic, timeout=10)
    return list(meta.topics[topic].partitions[0].replicas)
