"""The local stack's KRaft mode without starting anything: the nodes it lays out, their properties,
the flags that go together, the state it keeps and the collectors it gets."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cli.monitor import MonitorOptions, collector_argv
from stack import configs
from stack.keeper import kept
from stack.kraft_nodes import FIRST_CONTROLLER_ID, kraft_layout
from stack.local import LocalStack
from stack.state import stop_order
from stack.state import collector_sources, Component, shape_flags, StackError, StackRequest, StackState

PORTS = {"PLAINTEXT": 21000, "CONTROLLER": 22000, "CONTROLLER_MTLS": 0}   # no mTLS listener: not secure


def _port(name: str, listener: str) -> int:
    """Pure stand-in for the stack's port picking: a port per listener and node id."""
    return PORTS[listener] + int(name.split("-")[1])


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_by_default_every_broker_is_a_controller_too() -> None:
    nodes = kraft_layout(3, 0, _port)
    assert [(name, n.node_id, n.roles) for name, n in nodes] == [
        ("broker-1", 1, "broker,controller"), ("broker-2", 2, "broker,controller"),
        ("broker-3", 3, "broker,controller")]
    assert configs.quorum_voters([n for _, n in nodes]) == "1@127.0.0.1:22001,2@127.0.0.1:22002,3@127.0.0.1:22003"


def test_dedicated_controllers_have_ids_of_their_own_beside_broker_only_nodes() -> None:
    nodes = kraft_layout(2, 3, _port)
    assert [(name, n.node_id, n.roles) for name, n in nodes] == [
        ("broker-1", 1, "broker"), ("broker-2", 2, "broker"),
        ("controller-1001", 1001, "controller"), ("controller-1002", 1002, "controller"),
        ("controller-1003", 1003, "controller")]
    assert FIRST_CONTROLLER_ID == 1001
    assert configs.quorum_voters([n for _, n in nodes]) == \
        "1001@127.0.0.1:23001,1002@127.0.0.1:23002,1003@127.0.0.1:23003"


def test_a_combined_node_listens_for_clients_and_the_quorum_and_advertises_only_the_clients_listener() -> None:
    node = configs.KraftNode(2, broker_port=21002, controller_port=22002)
    props = _props(configs.kraft_node_properties(node, "1@127.0.0.1:22001,2@127.0.0.1:22002", Path("/d/broker-2-data"),
                                                 3, configs.KraftProfile.fast()))
    assert props["process.roles"] == "broker,controller" and props["node.id"] == "2"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:22001,2@127.0.0.1:22002"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:21002,CONTROLLER://127.0.0.1:22002"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:21002"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["log.dirs"] == "/d/broker-2-data"
    assert props["default.replication.factor"] == props["offsets.topic.replication.factor"] == "3"
    assert (props["broker.session.timeout.ms"], props["broker.heartbeat.interval.ms"]) == ("5000", "1000")
    assert props["replica.lag.time.max.ms"] == "5000" and props["auto.leader.rebalance.enable"] == "false"
    assert "zookeeper.connect" not in props


def test_a_dedicated_controller_serves_only_the_quorum() -> None:
    node = configs.KraftNode(1001, controller_port=23001)
    props = _props(configs.kraft_node_properties(node, "1001@127.0.0.1:23001", Path("/d/controller-1001-data"), 2,
                                                 configs.KraftProfile()))
    assert props["process.roles"] == "controller" and props["node.id"] == "1001"
    assert props["listeners"] == "CONTROLLER://127.0.0.1:23001"
    assert not {"advertised.listeners", "inter.broker.listener.name", "default.replication.factor"} & set(props)
    # it is the controllers that fence a broker whose session ran out
    assert props["broker.session.timeout.ms"] == "9000"
    assert props["offsets.topic.replication.factor"] == "2"


def test_a_broker_only_node_has_no_controller_listener_but_knows_the_quorum() -> None:
    node = configs.KraftNode(1, broker_port=21001)
    props = _props(configs.kraft_node_properties(node, "1001@127.0.0.1:23001", Path("/d"), 1, configs.KraftProfile()))
    assert props["process.roles"] == "broker"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:21001"
    assert props["controller.quorum.voters"] == "1001@127.0.0.1:23001"
    assert props["controller.listener.names"] == "CONTROLLER"


def test_the_request_and_the_profile_override_properties_and_features_stay_out_of_them() -> None:
    profile = replace(configs.KraftProfile.fast(), features={"eligible.leader.replicas.version": 0})
    text = configs.kraft_node_properties(configs.KraftNode(1, 21001, 22001), "1@127.0.0.1:22001", Path("/d"), 1,
                                         profile, {"unclean.leader.election.enable": "true",
                                                   "metadata.max.retention.ms": "60000"})
    props = _props(text)
    assert props["unclean.leader.election.enable"] == "true"
    assert props["metadata.max.retention.ms"] == "60000"   # the request's, over the fast profile's
    assert "eligible.leader.replicas" not in text   # a feature is given at format, not in the properties


def test_the_fast_profile_snapshots_the_metadata_log_often_and_cleans_below_the_snapshots() -> None:
    props = configs.KraftProfile.fast().extra_props
    assert int(props["metadata.log.max.snapshot.interval.ms"]) <= 10000
    assert int(props["metadata.max.retention.ms"]) <= 10000
    assert "metadata.log.segment.bytes" not in props   # Kafka 4.3 refuses less than 8 MiB
    assert configs.KraftProfile.fast().features == {}   # ELR stays on, as for any new 4.x cluster


def test_request_and_profile_follow_fast() -> None:
    assert StackRequest(kraft=True, fast=True).kraft_timing() == configs.KraftProfile.fast()
    assert StackRequest(kraft=True).kraft_timing() == configs.KraftProfile()
    mine = configs.KraftProfile(broker_session_timeout_ms=7000)
    assert StackRequest(kraft=True, fast=True, kraft_profile=mine).kraft_timing() is mine


@pytest.mark.parametrize("request_, said", [
    (StackRequest(controllers=1), "--dedicated-controllers 1 needs --kraft"),
    (StackRequest(kraft=True, chroot="/kafka"), "--kraft does not go with --chroot"),
    (StackRequest(kraft=True, chroot="/k", zk_port=2181), "--kraft does not go with --chroot, --zookeeper-port"),
])
def test_flags_that_do_not_go_together_are_one_line_naming_them(request_: StackRequest, said: str) -> None:
    with pytest.raises(StackError, match=said) as raised:
        request_.check()
    assert "\n" not in str(raised.value)


def test_good_requests_pass_the_check() -> None:
    for good in (StackRequest(), StackRequest(kraft=True), StackRequest(kraft=True, controllers=3),
                 StackRequest(chroot="/kafka", secure=True), StackRequest(kraft=True, secure=True)):
        good.check()


def test_the_shape_of_a_stack_is_the_flags_that_make_it() -> None:
    assert shape_flags(True, 3, 0, "", False) == "--kraft --brokers 3"
    assert shape_flags(True, 2, 1, "", False) == "--kraft --brokers 2 --dedicated-controllers 1"
    assert shape_flags(False, 3, 0, "/kafka", True) == "--brokers 3 --chroot /kafka --secure"
    assert shape_flags(True, 3, 0, "", True) == "--kraft --brokers 3 --secure"
    assert StackRequest(kraft=True, controllers=1, brokers=2).flags == "--kraft --brokers 2 --dedicated-controllers 1"


def _kraft_state(tmp_path: Path) -> StackState:
    components = {
        "broker-1": Component("broker-1", 21001, ["java"], "b1.log", "broker-1.properties", 0),
        "broker-2": Component("broker-2", 21002, ["java"], "b2.log", "broker-2.properties", 0),
        "controller-1001": Component("controller-1001", 23001, ["java"], "c.log", "controller-1001.properties", 0,
                                     controller_port=23001),
        "events": Component("events", 24000, ["java"], "e.log", "events.properties", 0),
        "stream": Component("stream", 24001, ["python"], "s.log", "--metrics-port 24001", 0),
    }
    return StackState(dir=tmp_path, chroot="", brokers=2, fast=True, stream_port=24001,
                      collector_ports={"kraft": 24002, "groups": 24003}, components=components, kraft=True,
                      kraft_controllers=1, cluster_id="k01R0YBQSoaX7CFbMd6AXw")


def test_a_kraft_state_round_trips_and_names_its_quorum_apart_from_its_brokers(tmp_path: Path) -> None:
    state = _kraft_state(tmp_path)
    state.save()
    loaded = StackState.load(tmp_path)
    assert loaded == state and loaded.cluster_id == "k01R0YBQSoaX7CFbMd6AXw"
    assert loaded.controllers == "127.0.0.1:23001"
    assert loaded.bootstrap_servers == "127.0.0.1:21001,127.0.0.1:21002"
    assert loaded.flags == "--kraft --brokers 2 --dedicated-controllers 1"


def test_a_kraft_stack_stops_its_brokers_together_then_its_controllers(tmp_path: Path) -> None:
    order = [[c.name for c in together] for together in stop_order(_kraft_state(tmp_path))]
    assert order == [["stream"], ["events"], ["broker-1", "broker-2"], ["controller-1001"]]


def test_a_zookeeper_stack_stops_one_process_at_a_time(tmp_path: Path) -> None:
    state = StackState(dir=tmp_path, chroot="", brokers=2, fast=True, stream_port=0, collector_ports={}, components={
        n: Component(n, 0, ["java"], f"{n}.log", n) for n in ("zookeeper", "broker-2", "broker-1", "events")})
    assert [[c.name for c in together] for together in stop_order(state)] == [
        ["events"], ["broker-2"], ["broker-1"], ["zookeeper"]]


def test_a_kraft_stack_is_watched_by_the_kraft_collector_on_its_quorum(tmp_path: Path) -> None:
    assert collector_sources(True) == ("kraft", "groups") and collector_sources(False) == ("zk", "groups")
    stack = LocalStack(tmp_path, toolchain=None)  # type: ignore[arg-type]
    stack.state = _kraft_state(tmp_path)
    control_plane = stack.state.collectors()[0]
    assert (control_plane.key, control_plane.source, control_plane.watched) == ("kraft", "kraft", None)
    argv = collector_argv(stack, MonitorOptions(cluster="k4"), control_plane, 24002)
    assert argv[argv.index("collect"):] == [
        "collect", "kraft", "--controllers", "127.0.0.1:23001", "--cluster", "k4",
        "--events-bootstrap-servers", "127.0.0.1:24000", "--events-topic", MonitorOptions().events_topic,
        "--metrics-port", "24002"]


def test_kmon_run_leaves_the_controllers_as_a_fault_left_them_as_it_does_the_brokers() -> None:
    assert not kept("controller-1001") and not kept("broker-1")


def test_a_kraft_stack_has_no_zookeeper_to_ask(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path, toolchain=None)  # type: ignore[arg-type]
    stack.state = _kraft_state(tmp_path)
    with pytest.raises(StackError, match="runs KRaft: it has no ZooKeeper"):
        stack.controller_id()
