"""`kmon run --bootstrap-servers`' pure parts: how a broker's settings and DescribeQuorum's answer say the
mode and the controllers (cli/discovery.py), the flags that go together (cli/watch.py), and
the stack's record of the watched cluster (stack/local.py)."""
from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path

import pytest

from cli.main import build_parser
from cli.monitor import MonitorOptions, _watched, collector_argv
from cli.watch import check_flags, default_name, stack_dir
import cli.discovery as discovery
from cli.discovery import _mode, quorum_setting, voter_endpoints
from kmon.flags import addresses
from stack.local import LocalStack
from stack.state import STATE_FILE, collectors, StackRequest, StackState
from kmon.watched import KRAFT, MIGRATION, ZOOKEEPER, WatchedCluster


@pytest.mark.parametrize("settings, mode", [
    ({"process.roles": "broker", "zookeeper.connect": ""}, KRAFT),
    ({"process.roles": "broker,controller"}, KRAFT),
    ({"process.roles": "", "zookeeper.connect": "zk:2181/kafka"}, ZOOKEEPER),
    ({"process.roles": "", "zookeeper.connect": "zk:2181", "zookeeper.metadata.migration.enable": "true"}, MIGRATION),
    ({"process.roles": "", "zookeeper.metadata.migration.enable": "false"}, ZOOKEEPER),
])
def test_a_brokers_settings_say_its_mode(settings: dict[str, str], mode: str) -> None:
    assert _mode(settings) == mode


def test_each_voter_is_reached_on_the_controller_listener_the_brokers_name_else_its_first() -> None:
    endpoints = {3002: {"CTL_SASL": ("c2", 9094), "CTL_MTLS": ("c2", 9095)},
                 3001: {"CTL_MTLS": ("c1", 9095), "CTL_SASL": ("c1", 9094)},
                 3003: {"OTHER": ("c3", 7000)}}
    assert voter_endpoints(endpoints, ["CTL_SASL"]) == "c1:9094,c2:9094,c3:7000"
    assert voter_endpoints(endpoints, ["CTL_MTLS", "CTL_SASL"]) == "c1:9095,c2:9095,c3:7000"
    assert voter_endpoints({}, ["CONTROLLER"]) == ""


def test_the_controllers_a_brokers_settings_name_bootstrap_servers_first_then_the_static_voters() -> None:
    assert quorum_setting({"controller.quorum.bootstrap.servers": "a:1, b:2",
                           "controller.quorum.voters": "1@x:9"}) == ("a:1,b:2", "controller.quorum.bootstrap.servers")
    assert quorum_setting({"controller.quorum.bootstrap.servers": "",
                           "controller.quorum.voters": "1@c1:9093,2@[::1]:9093"}) == \
        ("c1:9093,[::1]:9093", "controller.quorum.voters")
    assert quorum_setting({}) == ("", "")
    assert addresses("c1:9093, [::1]:9093") == [("c1", 9093), ("[::1]", 9093)]


@pytest.mark.parametrize("bootstrap, name", [("kafka-1.prod.example.com:9092,kafka-2:9092", "kafka-1.prod.example.com"),
                                             ("127.0.0.1:9092", "127.0.0.1"), ("[::1]:9092", "1"),
                                             ("_x:1", "x")])
def test_a_watched_cluster_is_named_after_its_first_bootstrap_host(bootstrap: str, name: str) -> None:
    assert default_name(bootstrap) == name


def _run_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


@pytest.mark.parametrize("argv, said", [
    (["--bootstrap-servers", "k:9092", "--kraft"], "--kraft"),
    (["--bootstrap-servers", "k:9092", "--chroot", "/x", "--secure"], "--secure, --chroot"),
    (["--controllers", "c:9093"], "--controllers need(s) --bootstrap-servers"),
    (["--zookeeper", "z:2181/kafka"], "--zookeeper need(s) --bootstrap-servers"),
    (["--config", __file__, "--bootstrap-servers", "k:9092"], "--bootstrap-servers names one cluster and --config"),
    (["--config", __file__, "--kraft"], "--config watches clusters kmon did not start: --kraft"),
    (["--config", __file__, "--controllers", "c:9093"], "each cluster's entry in the file gives them"),
    (["--events-command-config", __file__], "--events-command-config needs --events-bootstrap-servers"),
    (["--events-bootstrap-servers", "e:9092", "--no-events-cluster"], "give one of them"),
])
def test_flags_that_do_not_go_with_a_watched_cluster_are_one_line_naming_them(argv: list[str], said: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=None) as e:
        check_flags(_run_args(*argv))
    assert said in str(e.value) and "\n" not in str(e.value)


def test_a_watched_cluster_gets_a_directory_of_its_own_unless_dir_says() -> None:
    check_flags(_run_args("--bootstrap-servers", "k:9092", "--fast"))
    args = _run_args("--bootstrap-servers", "k:9092")
    args.cluster = "prod"
    assert stack_dir(args, ".kmon/stack") == Path(".kmon/clusters/prod")
    assert stack_dir(_run_args(), ".kmon/stack") == Path(".kmon/stack")
    assert stack_dir(_run_args("--bootstrap-servers", "k:9092", "--dir", "/d"), ".kmon/stack") == Path("/d")
    assert stack_dir(_run_args("--config", __file__), ".kmon/stack") == Path(".kmon/fleets/test_discovery")


def test_a_stack_has_two_collectors_of_its_own_cluster_or_of_each_watched_one() -> None:
    assert [(c.key, c.source) for c in collectors(True, ())] == [("kraft", "kraft"), ("groups", "groups")]
    fleet = (WatchedCluster("prod", KRAFT, "k:9092"), WatchedCluster("legacy", MIGRATION, "m:9092"))
    assert [(c.key, c.source, c.watched.name if c.watched else None) for c in collectors(False, fleet)] == [
        ("kraft@prod", "kraft", "prod"), ("groups@prod", "groups", "prod"),
        ("zk@legacy", "zk", "legacy"), ("groups@legacy", "groups", "legacy")]


def test_every_collector_a_stack_starts_is_a_source_of_kmon_collect() -> None:
    """The stack names its collectors by source; `kmon collect SOURCE` (cli/collect.py's table) runs them."""
    from cli.collect import SOURCES
    for kraft in (False, True):
        for collector in collectors(kraft, ()):
            assert collector.source in SOURCES


def _watched_state(tmp_path: Path, *watched: WatchedCluster, config_file: str = "") -> StackState:
    return StackState(dir=tmp_path, chroot="", brokers=0, fast=True, stream_port=1, collector_ports={},
                      watched=watched, config_file=config_file)


def test_the_watched_clusters_round_trip_in_the_state_file_and_name_the_flag_a_resume_needs(tmp_path: Path) -> None:
    watched = WatchedCluster(name="prod", mode=KRAFT, bootstrap_servers="k:9092", cluster_id="abc",
                             controllers="c:9093", exact=True, command_config="/etc/kmon/client.properties")
    _watched_state(tmp_path, watched).save()
    loaded = StackState.load(tmp_path)
    assert loaded is not None and loaded.watched == (watched,)
    assert loaded.flags == "--bootstrap-servers k:9092"
    other = WatchedCluster(name="legacy", mode=ZOOKEEPER, bootstrap_servers="z:9092", zookeeper="z:2181")
    _watched_state(tmp_path, watched, other, config_file="/etc/kmon/kmon.yaml").save()
    loaded = StackState.load(tmp_path)
    assert loaded is not None and loaded.watched == (watched, other)
    assert loaded.flags == "--config /etc/kmon/kmon.yaml"


def test_a_state_file_of_the_kmon_that_watched_one_cluster_is_resumed(tmp_path: Path) -> None:
    """Before the config file, `watched` was one object; a stack of then is resumed, not refused."""
    _watched_state(tmp_path).save()
    raw = json.loads((tmp_path / STATE_FILE).read_text())
    raw["watched"] = {"mode": KRAFT, "bootstrap_servers": "k:9092", "controllers": "c:9093", "name": "k"}
    (tmp_path / STATE_FILE).write_text(json.dumps(raw))
    loaded = StackState.load(tmp_path)
    assert loaded is not None and loaded.watched == (WatchedCluster("k", KRAFT, "k:9092", controllers="c:9093"),)


@pytest.mark.parametrize("watched, source, argv", [
    (WatchedCluster("c", KRAFT, "k:9092", controllers="c:9093", exact=True, command_config="/c.properties"), "kraft",
     ["--controllers", "c:9093", "--command-config", "/c.properties"]),
    (WatchedCluster("c", KRAFT, "k:9092", controllers="c:9093", exact=False), "kraft",
     ["--sampled", "--bootstrap-servers", "k:9092"]),
    (WatchedCluster("c", ZOOKEEPER, "k:9092", zookeeper="z:2181/kafka", zk_client_config="/zk.properties"), "zk",
     ["--zookeeper", "z:2181/kafka", "--zk-client-config", "/zk.properties"]),
    (WatchedCluster("c", MIGRATION, "k:9092", zookeeper="z:2181", command_config="/c.properties"), "groups",
     ["--bootstrap-servers", "k:9092", "--poll-interval", "5.0", "--command-config", "/c.properties"]),
])
def test_each_collector_watches_the_cluster_as_discovery_found_it(tmp_path: Path, watched: WatchedCluster,
                                                                  source: str, argv: list[str]) -> None:
    state = _watched_state(tmp_path, watched)
    collector = next(c for c in state.collectors() if c.source == source)
    assert collector.key == f"{source}@c"
    assert _watched(state, MonitorOptions(), collector) == argv


def test_the_groups_collectors_timing_reaches_its_command_line(tmp_path: Path) -> None:
    """The monitor's options for the groups collector (the tests' fast ones) become its flags; unset, its own
    defaults hold."""
    state = _watched_state(tmp_path, WatchedCluster("c", KRAFT, "k:9092", controllers="c:9093"))
    groups = next(c for c in state.collectors() if c.source == "groups")
    assert _watched(state, MonitorOptions(groups_poll_seconds=2, groups_lag_seconds=3, groups_stall_window_seconds=20),
                    groups) == ["--bootstrap-servers", "k:9092", "--poll-interval", "2", "--lag-interval", "3",
                                "--stall-window", "20"]


def test_the_collectors_of_a_config_files_cluster_read_the_file_too(tmp_path: Path) -> None:
    """Its inline client properties (secrets from ${VAR}) reach the collector through the file, not argv."""
    stack = LocalStack(tmp_path, toolchain=None)  # type: ignore[arg-type]
    stack.state = _watched_state(tmp_path, WatchedCluster("prod", KRAFT, "k:9092", controllers="c:9093", exact=True),
                                 config_file="/etc/kmon/kmon.yaml")
    stack.state.events = "e:9092"
    argv = collector_argv(stack, MonitorOptions(events_topic="t"), stack.state.collectors()[0], 9999)
    assert argv[argv.index("collect"):] == [
        "collect", "kraft", "--controllers", "c:9093", "--config", "/etc/kmon/kmon.yaml", "--cluster", "prod",
        "--events-bootstrap-servers", "e:9092", "--events-topic", "t", "--metrics-port", "9999"]


def test_an_events_cluster_of_the_users_replaces_kmons_own_node_and_is_said_so(tmp_path: Path) -> None:
    from cli.main import describe

    assert not StackRequest(events="e:9092").own_events_node and StackRequest().own_events_node
    state = _watched_state(tmp_path, WatchedCluster("prod", KRAFT, "k:9092", controllers="c:9093", exact=True))
    state.events, state.events_command_config = "e:9092", "/etc/kmon/events.properties"
    state.collector_ports = {c.key: 9000 + i for i, c in enumerate(state.collectors())}
    lines = describe(state).splitlines()
    at = lines.index("  events cluster (yours; kmon does not start or stop it)")
    assert lines[at + 1:at + 3] == ["    bootstrap        e:9092", "    client config    /etc/kmon/events.properties"]
    assert "  monitored cluster prod (yours: KRaft mode; kmon does not start or stop it)" in lines
    assert [line.split()[1] for line in lines if line.startswith("  collector ")] == ["kraft@prod", "groups@prod"]


def test_a_fleets_clusters_are_found_out_side_by_side_and_said_in_the_files_order(monkeypatch) -> None:
    """Each discover() waits for the other two at a barrier: it passes only when all three ask at once
    (a fleet whose clusters do not answer costs one timeout, not one each)."""
    together = threading.Barrier(3, timeout=10)

    def discover(given: discovery.Given) -> discovery.Found:
        together.wait()
        if given.name == "b":
            raise discovery.NotAnswering("b: no broker answered")
        return discovery.Found(WatchedCluster(given.name, ZOOKEEPER, given.bootstrap_servers), (given.name,))
    monkeypatch.setattr(discovery, "discover", discover)
    found = discovery.discover_each([discovery.Given(name, f"{name}:9092", {}, None) for name in "abc"])
    assert [f.said if isinstance(f, discovery.Found) else str(f) for f in found] == [("a",), "b: no broker answered",
                                                                                    ("c",)]
