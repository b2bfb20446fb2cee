"""What a second `kmon run` in the same directory finds (stack/local.py): the state file of
this or another kmon, the events node's formatted storage, the ports the servers had."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from stack.probes import formatted_cluster_id, java_error

from stack.state import STATE_FILE, Component, StackError, StackState
from stack.process import PortPicker, describe_status, port_free


def _state(tmp_path: Path) -> StackState:
    return StackState(dir=tmp_path, chroot="/kafka", brokers=1, fast=True, stream_port=20001,
                      collector_ports={"zk": 20002, "groups": 20003},
                      components={"zookeeper": Component("zookeeper", 20004, ["java"], "zk.log", "zk.properties", 42)})


def test_the_state_file_round_trips_with_its_directory_a_path(tmp_path: Path) -> None:
    _state(tmp_path).save()
    loaded = StackState.load(tmp_path)
    assert loaded == _state(tmp_path)
    assert isinstance(loaded.dir, Path) and loaded.port_of("zookeeper") == 20004 and loaded.port_of("events") == 0


def test_fields_another_kmon_wrote_or_left_out_do_not_stop_a_resume(tmp_path: Path) -> None:
    _state(tmp_path).save()
    raw = json.loads((tmp_path / STATE_FILE).read_text())
    raw["written_by"] = "kmon 9.9"                        # a newer kmon's field
    raw["components"]["zookeeper"]["restarts"] = 3
    del raw["secure"]                                     # an older kmon's file, without a field that has a default
    (tmp_path / STATE_FILE).write_text(json.dumps(raw))
    assert StackState.load(tmp_path) == _state(tmp_path)


@pytest.mark.parametrize("text", ['{"dir": "/x", "chro', "[]", '{"dir": "/x"}', "\x00\x01"])
def test_a_state_file_this_kmon_cannot_read_is_one_line_saying_what_to_do(tmp_path: Path, text: str) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    with pytest.raises(StackError) as said:
        StackState.load(tmp_path)
    line = str(said.value)
    assert "\n" not in line and str(tmp_path / STATE_FILE) in line and "--fresh" in line


def test_no_state_file_is_no_stack(tmp_path: Path) -> None:
    assert StackState.load(tmp_path) is None


def test_the_events_node_keeps_the_cluster_id_it_was_formatted_with(tmp_path: Path) -> None:
    assert formatted_cluster_id(tmp_path) is None
    (tmp_path / "meta.properties").write_text(
        "#\n#Thu Nov 26 06:23:59 UTC 2026\nnode.id=1\ndirectory.id=abc\nversion=1\ncluster.id=k01R0YBQSoaX7CFbMd6AXw\n")
    assert formatted_cluster_id(tmp_path) == "k01R0YBQSoaX7CFbMd6AXw"
    (tmp_path / "meta.properties").write_text("version=1\n")
    assert formatted_cluster_id(tmp_path) is None


def test_a_server_gets_its_earlier_port_back_unless_something_holds_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert not port_free(busy)
        assert PortPicker().pick(busy) != busy
    assert port_free(busy) and PortPicker().pick(busy) == busy
    assert PortPicker().pick(0) > 0   # no earlier port: a new one


def test_servers_started_together_never_share_a_port_none_of_them_has_bound_yet() -> None:
    pick = PortPicker().pick
    first = pick(0)
    assert pick(first) != first, "an earlier port already picked for another server is not given again"
    assert len({pick(0) for _ in range(2000)}) == 2000


def test_ports_reserved_for_servers_started_beside_the_stack_are_never_picked() -> None:
    """The peers bench's JMX agents: their ports are chosen first, bound only when the brokers start."""
    reserved = {PortPicker().pick() for _ in range(500)}
    pick = PortPicker(reserved).pick
    assert not reserved & {pick(0) for _ in range(2000)}
    assert pick(next(iter(reserved))) not in reserved   # not even as a server's earlier port


@pytest.mark.parametrize("code, status, said", [
    (os.CLD_EXITED, 0, "exited with status 0"),
    (os.CLD_EXITED, 3, "exited with status 3"),
    (os.CLD_KILLED, 9, "was killed by SIGKILL"),
    (os.CLD_DUMPED, 6, "was killed by SIGABRT (core dumped)"),
    (os.CLD_KILLED, 99, "was killed by signal 99"),
])
def test_how_a_process_ended_in_words(code: int, status: int, said: str) -> None:
    assert describe_status(code, status) == said


def test_a_java_tools_failure_is_its_message_not_its_stack_frames() -> None:
    output = ("Exception in thread \"main\" java.lang.RuntimeException: Invalid cluster.id in: "
              "events-data/meta.properties. Expected k01R, but read l68y\n"
              "\tat org.apache.kafka.metadata.storage.Formatter.doFormat(Formatter.java:470)\n"
              "\tat kafka.tools.StorageTool.main(StorageTool.scala)\n")
    assert java_error(output) == "Invalid cluster.id in: events-data/meta.properties. Expected k01R, but read l68y"
    assert java_error("Formatting metadata directory x\nsomething odd\n\tat a.B(C.java:1)\n") == "something odd"
    assert java_error("") == ""
