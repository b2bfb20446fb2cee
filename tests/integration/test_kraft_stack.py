"""The local stack's KRaft mode (Kafka 4.x): a quorum of combined nodes that serves topics, takes a
killed node back from its data and resumes without formatting again; and dedicated controllers.
The metadata is read from the brokers (Metadata requests), never from a controller id they report."""
from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic, PartitionMetadata

from kmon.toolchain import Toolchain
from stack import configs
from stack.local import LocalStack
from stack.state import StackError, StackRequest
from tests.conftest import running_kraft_stack
from tests.support import eventually

pytestmark = pytest.mark.integration

TOPIC = "rf3"


@pytest.fixture(scope="module")
def kraft(tmp_path_factory: pytest.TempPathFactory, toolchain: Toolchain) -> Iterator[LocalStack]:
    """Three combined nodes, the tests of this module in order on it (a node killed, a resume)."""
    with running_kraft_stack(tmp_path_factory.mktemp("kraft"), toolchain) as stack:
        yield stack


def _admin(stack: LocalStack) -> AdminClient:
    assert stack.state
    return AdminClient({"bootstrap.servers": stack.state.bootstrap_servers, "log_level": 0})


def _create(stack: LocalStack, topic: str, partitions: int, rf: int) -> None:
    admin = _admin(stack)   # held until the answer: a client collected meanwhile fails its futures
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(timeout=30)


def _partitions(stack: LocalStack, topic: str) -> dict[int, PartitionMetadata]:
    return _admin(stack).list_topics(topic, timeout=10).topics[topic].partitions


def _isr(stack: LocalStack, topic: str) -> set[int]:
    return set(_partitions(stack, topic)[0].isrs)


def _props(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and line[0] != "#")


def test_combined_nodes_are_a_quorum_of_three_that_serves_an_rf3_topic(kraft: LocalStack) -> None:
    assert kraft.state and kraft.state.kraft and kraft.state.cluster_id
    assert sorted(kraft.state.components) == ["broker-1", "broker-2", "broker-3"]
    assert len(kraft.state.controllers.split(",")) == 3
    assert not set(kraft.state.controllers.split(",")) & set(kraft.state.bootstrap_servers.split(","))
    assert kraft.registered_brokers() == [1, 2, 3]
    for name in kraft.state.components:
        assert _props(kraft.dir / f"{name}.properties")["process.roles"] == "broker,controller"
    _create(kraft, TOPIC, 3, 3)
    eventually(lambda: all(sorted(p.isrs) == [1, 2, 3] and p.leader > 0 for p in _partitions(kraft, TOPIC).values())
               and len(_partitions(kraft, TOPIC)) == 3, 30, "3 partitions with 3 replicas in sync")
    # the nodes log through log4j2 (state changes included), into the stack's logs; a node logs its own
    # change when it applies the metadata, which may be after the cluster's metadata says it is done
    eventually(lambda: "(state.change.logger)" in Path(kraft.component("broker-1").log).read_text(), 30,
               "broker-1's state changes in its log")
    out = subprocess.run([sys.executable, "-m", "cli", "stack", "status", "--dir", str(kraft.dir)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("roles broker,controller") == 3
    assert f"registered brokers: [1, 2, 3]  controller quorum: {kraft.state.controllers}" in out.stdout


def test_a_killed_node_is_fenced_and_comes_back_from_its_data(kraft: LocalStack) -> None:
    meta = (kraft.dir / "broker-2-data" / "meta.properties").read_text()
    kraft.kill("broker-2", signal.SIGKILL)
    # fenced once its session (5 s) runs out: out of the metadata, out of the ISR
    eventually(lambda: kraft.registered_brokers() == [1, 3], 30, "broker 2 fenced")
    eventually(lambda: _isr(kraft, TOPIC) == {1, 3}, 30, "broker 2 out of the ISR")
    kraft.start("broker-2")
    eventually(lambda: kraft.registered_brokers() == [1, 2, 3], 30, "broker 2 registered again")
    eventually(lambda: _isr(kraft, TOPIC) == {1, 2, 3}, 60, "broker 2 back in the ISR")
    assert (kraft.dir / "broker-2-data" / "meta.properties").read_text() == meta   # not formatted again


def test_a_resumed_stack_keeps_its_cluster_id_and_data_without_formatting(
        kraft: LocalStack, caplog: pytest.LogCaptureFixture) -> None:
    assert kraft.state
    cluster_id, voters = kraft.state.cluster_id, kraft.state.controllers
    kraft.down(timeout=20)
    with pytest.raises(StackError, match=r"holds a stack made with --kraft --brokers 3, not --brokers 3: resume it with its flags"):
        LocalStack(kraft.dir, kraft.tools).up(StackRequest(fast=True, prometheus=False, events_cluster=False))
    with caplog.at_level("INFO", logger="kmon.stack"):
        state = kraft.up(StackRequest(kraft=True, fast=True, prometheus=False, events_cluster=False))
    assert state.cluster_id == cluster_id and state.controllers == voters   # the same ports where free
    assert "formatted the storage" not in caplog.text
    for name in state.components:
        assert _props(kraft.dir / f"{name}-data" / "meta.properties")["cluster.id"] == cluster_id
    assert len(_partitions(kraft, TOPIC)) == 3   # its topics are still there


def test_dedicated_controllers_beside_broker_only_nodes_with_elr_off(tmp_path: Path, toolchain: Toolchain) -> None:
    no_elr = replace(configs.KraftProfile.fast(), features={"eligible.leader.replicas.version": 0})
    with running_kraft_stack(tmp_path / "separate", toolchain, brokers=2, controllers=1, kraft_profile=no_elr,
                             extra_props={"unclean.leader.election.enable": "true"}) as stack:
        assert stack.state
        assert sorted(stack.state.components) == ["broker-1", "broker-2", "controller-1001"]
        controller = stack.component("controller-1001")
        assert stack.state.controllers == f"127.0.0.1:{controller.port}"
        assert _props(stack.dir / "broker-1.properties")["process.roles"] == "broker"
        controller_props = _props(stack.dir / "controller-1001.properties")
        assert controller_props["process.roles"] == "controller" and controller_props["node.id"] == "1001"
        assert _props(stack.dir / "broker-2.properties")["unclean.leader.election.enable"] == "true"
        assert stack.registered_brokers() == [1, 2]
        log = Path(controller.log).read_text()
        assert "FeatureLevelRecord setting metadata.version" in log
        assert "feature eligible.leader.replicas.version" not in log   # formatted with ELR off
        # the only controller killed and started again from its data: the brokers stay registered
        stack.kill("controller-1001", signal.SIGKILL)
        stack.start("controller-1001")
        _create(stack, "after", 1, 2)
        eventually(lambda: sorted(_partitions(stack, "after")[0].isrs) == [1, 2], 30, "a topic made by the quorum")
        assert stack.registered_brokers() == [1, 2]
