"""The ZooKeeper znode parsers, fed with payloads as Kafka 2.x-3.9 writes them."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from collectors.zk.znodes import (
    MalformedZnode,
    ZkPaths,
    parse_broker,
    parse_controller,
    parse_controller_epoch,
    parse_isr_change,
    parse_partition_state,
    parse_preferred_election,
    parse_reassignment,
    parse_topic,
    parse_topic_config,
)
from kmon.events import (
    BrokerState,
    Endpoint,
    IsrChangeState,
    PartitionState,
    PreferredElectionState,
    ReassignmentState,
    TopicState,
)

TS = "1732240000000"
CONTROLLER = "/kafka/controller"
EPOCH = "/kafka/controller_epoch"
BROKER = "/kafka/brokers/ids/2"
TOPIC = "/kafka/brokers/topics/orders"
TOPIC_CONFIG = "/kafka/config/topics/orders"
STATE = "/kafka/brokers/topics/orders/partitions/3/state"
REASSIGN = "/kafka/admin/reassign_partitions"
PREFERRED = "/kafka/admin/preferred_replica_election"
ISR_CHANGE = "/kafka/isr_change_notification/isr_change_0000000042"


def raw(doc: Any) -> bytes:
    return json.dumps(doc).encode()


# ---------------------------------------------------------------- controller

def test_controller_v1() -> None:
    data = b'{"version":1,"brokerid":1,"timestamp":"1732240000000"}'
    assert parse_controller(CONTROLLER, data) == (1, 1732240000000, None)


def test_controller_v2_written_by_a_zookeeper_controller_has_no_kraft_epoch() -> None:
    # Kafka 3.4+ in ZooKeeper mode writes v2 with kraftControllerEpoch -1
    data = b'{"version":2,"brokerid":3,"timestamp":"1732240000000","kraftControllerEpoch":-1}'
    assert parse_controller(CONTROLLER, data) == (3, 1732240000000, None)


def test_controller_v2_held_by_kraft_controller_during_migration() -> None:
    data = raw({"version": 2, "brokerid": 3000, "timestamp": TS, "kraftControllerEpoch": 7})
    assert parse_controller(CONTROLLER, data) == (3000, 1732240000000, 7)


def test_controller_tolerates_missing_timestamp_unknown_version_and_extra_fields() -> None:
    data = raw({"version": 9, "brokerid": 4, "future": {"x": 1}})
    assert parse_controller(CONTROLLER, data) == (4, None, None)


def test_controller_epoch_is_plain_text() -> None:
    assert parse_controller_epoch(EPOCH, b"17") == 17
    assert parse_controller_epoch(EPOCH, b"0") == 0


# ---------------------------------------------------------------- brokers

def test_broker_v1() -> None:
    data = raw({"version": 1, "host": "kafka-2", "port": 9092, "jmx_port": 9999, "timestamp": TS})
    assert parse_broker(BROKER, data) == BrokerState(
        broker_id=2, host="kafka-2", port=9092, rack=None,
        endpoints=(Endpoint("PLAINTEXT", "kafka-2", 9092, "PLAINTEXT"),),
        jmx_port=9999, timestamp_ms=1732240000000, format_version=1)


def test_broker_v2_takes_protocols_from_listener_names() -> None:
    data = raw({"version": 2, "host": "kafka-2", "port": 9092, "jmx_port": -1, "timestamp": TS,
                "endpoints": ["PLAINTEXT://kafka-2:9092", "SSL://kafka-2:9093"]})
    broker = parse_broker(BROKER, data)
    assert broker.endpoints == (Endpoint("PLAINTEXT", "kafka-2", 9092, "PLAINTEXT"),
                                Endpoint("SSL", "kafka-2", 9093, "SSL"))
    assert (broker.host, broker.port, broker.rack, broker.format_version) == ("kafka-2", 9092, None, 2)


def test_broker_v3_with_rack() -> None:
    data = raw({"version": 3, "host": "kafka-2", "port": 9092, "jmx_port": -1, "timestamp": TS,
                "endpoints": ["PLAINTEXT://kafka-2:9092"], "rack": "dc1"})
    assert parse_broker(BROKER, data).rack == "dc1"


def test_broker_v4_named_listeners_without_plaintext_take_the_first_endpoint() -> None:
    # no PLAINTEXT listener: Kafka writes host null and port -1 at the top level
    data = raw({"listener_security_protocol_map": {"CLIENT": "SASL_SSL", "REPLICATION": "SSL"},
                "endpoints": ["CLIENT://kafka-2.example.com:9094", "REPLICATION://10.0.0.2:9093"],
                "rack": "eu-west-1a", "jmx_port": -1, "port": -1, "host": None,
                "version": 4, "timestamp": TS})
    broker = parse_broker(BROKER, data)
    assert (broker.host, broker.port) == ("kafka-2.example.com", 9094)
    assert broker.endpoints == (Endpoint("CLIENT", "kafka-2.example.com", 9094, "SASL_SSL"),
                                Endpoint("REPLICATION", "10.0.0.2", 9093, "SSL"))
    assert broker.features == {}


def test_broker_v5_as_kafka_3_9_writes_it() -> None:
    data = (b'{"features":{"metadata.version":{"min_version":1,"max_version":21}},'
            b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","INTERNAL":"SASL_PLAINTEXT"},'
            b'"endpoints":["PLAINTEXT://kafka-2:9092","INTERNAL://[fd00::2]:19092"],'
            b'"rack":"rack-b","jmx_port":9999,"port":9092,"host":"kafka-2","version":5,'
            b'"timestamp":"1732240000000"}')
    assert parse_broker(BROKER, data) == BrokerState(
        broker_id=2, host="kafka-2", port=9092, rack="rack-b",
        endpoints=(Endpoint("PLAINTEXT", "kafka-2", 9092, "PLAINTEXT"),
                   Endpoint("INTERNAL", "fd00::2", 19092, "SASL_PLAINTEXT")),
        jmx_port=9999, timestamp_ms=1732240000000, format_version=5,
        features={"metadata.version": {"min_version": 1, "max_version": 21}})


def test_broker_v5_default_listener_empty_features() -> None:
    data = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
            b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
            b'"host":"localhost","version":5,"timestamp":"1732240000000"}')
    broker = parse_broker("/brokers/ids/0", data)
    assert (broker.broker_id, broker.host, broker.port, broker.jmx_port) == (0, "localhost", 9092, -1)


def test_broker_without_any_endpoint_has_no_address() -> None:
    data = raw({"version": 5, "host": None, "port": -1, "jmx_port": -1, "endpoints": []})
    broker = parse_broker(BROKER, data)
    assert (broker.host, broker.port, broker.endpoints) == (None, None, ())


def test_broker_unknown_version_and_fields_are_accepted() -> None:
    data = raw({"version": 6, "host": "kafka-2", "port": 9092, "jmx_port": -1,
                "endpoints": ["PLAINTEXT://kafka-2:9092"], "kraft_migration": {"epoch": 1}})
    assert parse_broker(BROKER, data).format_version == 6


# ---------------------------------------------------------------- topics

def test_topic_v1() -> None:
    data = b'{"version":1,"partitions":{"1":[2,3],"0":[1,2]}}'
    assert parse_topic(TOPIC, data) == TopicState(
        topic="orders", topic_id=None, replicas={0: (1, 2), 1: (2, 3)}, format_version=1)


def test_topic_v2_under_reassignment() -> None:
    data = raw({"version": 2, "partitions": {"0": [1, 2, 3, 4], "1": [2, 3]},
                "adding_replicas": {"0": [4]}, "removing_replicas": {"0": [1]}})
    topic = parse_topic(TOPIC, data)
    assert topic.adding == {0: (4,)} and topic.removing == {0: (1,)}
    assert topic.replicas[0] == (1, 2, 3, 4)


def test_topic_v3_as_kafka_3_9_writes_it_with_config() -> None:
    data = (b'{"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"kOlTfk6uQ0eUEmTDl3Wivg",'
            b'"adding_replicas":{},"removing_replicas":{},"version":3}')
    topic = parse_topic(TOPIC, data, {"min.insync.replicas": "2"})
    assert topic == TopicState(
        topic="orders", topic_id="kOlTfk6uQ0eUEmTDl3Wivg",
        replicas={0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)},
        config={"min.insync.replicas": "2"}, format_version=3)


def test_topic_confluent_extras_and_empty_moving_lists_are_ignored() -> None:
    data = raw({"version": 3, "partitions": {"0": [1, 2]}, "adding_replicas": {"0": []},
                "confluent_placement_constraints": {"version": 1, "replicas": [{"count": 2}]},
                "confluent_tiering": True})
    topic = parse_topic(TOPIC, data)
    assert topic.adding == {} and topic.replicas == {0: (1, 2)}


def test_topic_config() -> None:
    data = b'{"version":1,"config":{"min.insync.replicas":"2","retention.ms":"604800000"}}'
    assert parse_topic_config(TOPIC_CONFIG, data) == {"min.insync.replicas": "2",
                                                      "retention.ms": "604800000"}
    assert parse_topic_config(TOPIC_CONFIG, b'{"version":1,"config":{}}') == {}


# ---------------------------------------------------------------- partition state

def test_partition_state_v1() -> None:
    data = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":5,"isr":[1,2,3]}'
    assert parse_partition_state(STATE, data) == PartitionState(
        topic="orders", partition=3, leader=1, leader_epoch=5, isr=(1, 2, 3),
        controller_epoch=3, leader_recovery_state=0, format_version=1)


def test_partition_state_recovering_after_unclean_election_as_kafka_3_9_writes_it() -> None:
    # Kafka 3.2+ adds leader_recovery_state (KIP-704) only while the leader is recovering
    data = (b'{"controller_epoch":4,"leader":2,"version":1,"leader_epoch":6,"isr":[2],'
            b'"leader_recovery_state":1}')
    state = parse_partition_state(STATE, data)
    assert (state.leader, state.isr, state.leader_recovery_state) == (2, (2,), 1)


def test_partition_state_v2_and_offline_leader() -> None:
    data = raw({"version": 2, "leader": -1, "leader_epoch": 7, "isr": [3],
                "controller_epoch": 4, "leader_recovery_state": 0, "partition_epoch": 12})
    state = parse_partition_state(STATE, data)
    assert (state.leader, state.format_version, state.leader_recovery_state) == (-1, 2, 0)


def test_partition_state_topic_with_dots_and_chroot_free_path() -> None:
    data = raw({"version": 1, "leader": 0, "leader_epoch": 0, "isr": [0], "controller_epoch": 1})
    state = parse_partition_state("/brokers/topics/__consumer_offsets/partitions/49/state", data)
    assert (state.topic, state.partition) == ("__consumer_offsets", 49)


# ---------------------------------------------------------------- admin and notifications

def test_reassignment() -> None:
    data = raw({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3]},
        {"topic": "orders", "partition": 1, "replicas": [2, 4], "log_dirs": ["any", "any"]}]})
    assert parse_reassignment(REASSIGN, data) == ReassignmentState(
        partitions={"orders:0": (4, 2, 3), "orders:1": (2, 4)})


def test_preferred_election_drops_repeats() -> None:
    data = raw({"version": 1, "partitions": [{"topic": "orders", "partition": 0},
                                             {"topic": "payments", "partition": 2},
                                             {"topic": "orders", "partition": 0}]})
    assert parse_preferred_election(PREFERRED, data) == PreferredElectionState(
        partitions=("orders:0", "payments:2"))


def test_isr_change() -> None:
    data = b'{"version":1,"partitions":[{"topic":"orders","partition":3},{"topic":"orders","partition":1}]}'
    assert parse_isr_change(ISR_CHANGE, data) == IsrChangeState(partitions=("orders:3", "orders:1"))


def test_empty_partition_lists() -> None:
    empty = raw({"version": 1, "partitions": []})
    assert parse_reassignment(REASSIGN, empty).partitions == {}
    assert parse_preferred_election(PREFERRED, empty).partitions == ()


# ---------------------------------------------------------------- malformed data

def _state(**changes: Any) -> bytes:
    doc = {"version": 1, "leader": 1, "leader_epoch": 5, "isr": [1, 2], "controller_epoch": 3}
    return raw({k: v for k, v in {**doc, **changes}.items() if v is not ...})


def _broker(**changes: Any) -> bytes:
    doc = {"version": 5, "host": "kafka-2", "port": 9092, "jmx_port": -1, "timestamp": TS,
           "endpoints": ["PLAINTEXT://kafka-2:9092"],
           "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "features": {}}
    return raw({k: v for k, v in {**doc, **changes}.items() if v is not ...})


Parser = Callable[[str, bytes], Any]
MALFORMED: list[tuple[str, Parser, str, bytes, str]] = [
    # every parser: not bytes we can read
    ("controller empty", parse_controller, CONTROLLER, b"", "empty data"),
    ("controller not json", parse_controller, CONTROLLER, b'{"brokerid":1', "not JSON"),
    ("controller not utf8", parse_controller, CONTROLLER, b'{"brokerid":\xff}', "not UTF-8"),
    ("controller array", parse_controller, CONTROLLER, b"[1]", "JSON object"),
    ("controller no broker", parse_controller, CONTROLLER, raw({"version": 1, "timestamp": TS}), "'brokerid'"),
    ("controller string broker", parse_controller, CONTROLLER, raw({"version": 1, "brokerid": "1"}), "'brokerid'"),
    ("controller bool broker", parse_controller, CONTROLLER, raw({"version": 1, "brokerid": True}), "'brokerid'"),
    ("controller bad timestamp", parse_controller, CONTROLLER,
     raw({"version": 1, "brokerid": 1, "timestamp": "yesterday"}), "'timestamp'"),
    ("controller bad kraft epoch", parse_controller, CONTROLLER,
     raw({"version": 2, "brokerid": 1, "kraftControllerEpoch": "7"}), "'kraftControllerEpoch'"),
    ("controller bad version", parse_controller, CONTROLLER, raw({"version": "1", "brokerid": 1}), "'version'"),
    # JSON that json.loads takes and no field can hold (found by tests/fuzz/znodes.py): a lone
    # surrogate, which the events topic's JSON cannot write; nesting past Python's recursion
    # limit; an integer of more digits than int() reads
    ("broker host lone surrogate", parse_broker, BROKER, _broker(host="\ud800"), "not JSON"),
    ("controller deep nesting", parse_controller, CONTROLLER, b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ("controller huge integer", parse_controller, CONTROLLER, b'{"brokerid":' + b"1" * 5000 + b"}", "not JSON"),
    ("epoch empty", parse_controller_epoch, EPOCH, b"", "empty data"),
    ("epoch json", parse_controller_epoch, EPOCH, b'{"epoch":1}', "controller epoch"),
    ("epoch negative", parse_controller_epoch, EPOCH, b"-1", "controller epoch"),
    ("epoch overflow", parse_controller_epoch, EPOCH, b"99999999999", "out of range"),
    ("epoch not utf8", parse_controller_epoch, EPOCH, b"\xc3\x28", "not UTF-8"),
    # brokers
    ("broker empty", parse_broker, BROKER, b"", "empty data"),
    ("broker not json", parse_broker, BROKER, b"PLAINTEXT://kafka-2:9092", "not JSON"),
    ("broker no version", parse_broker, BROKER, _broker(version=...), "'version'"),
    ("broker version 0", parse_broker, BROKER, _broker(version=0), "'version'"),
    ("broker v1 no host", parse_broker, BROKER, raw({"version": 1, "port": 9092}), "'host'"),
    ("broker v1 port text", parse_broker, BROKER, raw({"version": 1, "host": "h", "port": "9092"}), "'port'"),
    ("broker no endpoints", parse_broker, BROKER, _broker(endpoints=...), "'endpoints'"),
    ("broker endpoints string", parse_broker, BROKER, _broker(endpoints="PLAINTEXT://h:1"), "'endpoints'"),
    ("broker endpoint garbage", parse_broker, BROKER, _broker(endpoints=["kafka-2:9092"]), "endpoints[0]"),
    ("broker endpoint port", parse_broker, BROKER, _broker(endpoints=["PLAINTEXT://h:99999"]), "port"),
    ("broker unmapped listener", parse_broker, BROKER, _broker(endpoints=["CLIENT://h:9092"]), "'CLIENT'"),
    ("broker protocol map type", parse_broker, BROKER,
     _broker(listener_security_protocol_map=["PLAINTEXT"]), "'listener_security_protocol_map'"),
    ("broker rack number", parse_broker, BROKER, _broker(rack=1), "'rack'"),
    ("broker jmx text", parse_broker, BROKER, _broker(jmx_port="9999"), "'jmx_port'"),
    ("broker timestamp float", parse_broker, BROKER, _broker(timestamp=1.5), "'timestamp'"),
    ("broker features list", parse_broker, BROKER, _broker(features=[]), "'features'"),
    ("broker feature version", parse_broker, BROKER,
     _broker(features={"metadata.version": {"min_version": "1"}}), "metadata.version"),
    ("broker id not numeric", parse_broker, "/kafka/brokers/ids/two", _broker(), "broker id"),
    ("broker wrong path", parse_broker, "/kafka/brokers/topics/2", _broker(), "/brokers/ids/"),
    # topics
    ("topic empty", parse_topic, TOPIC, b"", "empty data"),
    ("topic not utf8", parse_topic, TOPIC, b"\x80\x81", "not UTF-8"),
    ("topic no partitions", parse_topic, TOPIC, raw({"version": 3}), "'partitions'"),
    ("topic partitions list", parse_topic, TOPIC, raw({"version": 1, "partitions": [[1, 2]]}), "'partitions'"),
    ("topic negative partition", parse_topic, TOPIC, raw({"version": 1, "partitions": {"-1": [1]}}), "-1"),
    ("topic partition name", parse_topic, TOPIC, raw({"version": 1, "partitions": {"a": [1]}}), "'a'"),
    ("topic replica text", parse_topic, TOPIC, raw({"version": 1, "partitions": {"0": ["1"]}}), "should be an integer"),
    ("topic replica float", parse_topic, TOPIC, raw({"version": 1, "partitions": {"0": [1.0]}}), "should be an integer"),
    ("topic replica negative", parse_topic, TOPIC, raw({"version": 1, "partitions": {"0": [-1]}}), "out of range"),
    ("topic replica repeated", parse_topic, TOPIC, raw({"version": 1, "partitions": {"0": [1, 1]}}), "repeats"),
    ("topic no replicas", parse_topic, TOPIC, raw({"version": 1, "partitions": {"0": []}}), "empty"),
    ("topic adding bad", parse_topic, TOPIC,
     raw({"version": 2, "partitions": {"0": [1]}, "adding_replicas": {"0": "2"}}), "'adding_replicas'"),
    ("topic removing bad", parse_topic, TOPIC,
     raw({"version": 2, "partitions": {"0": [1]}, "removing_replicas": []}), "'removing_replicas'"),
    ("topic id not uuid", parse_topic, TOPIC, raw({"version": 3, "partitions": {"0": [1]}, "topic_id": "x"}), "Uuid"),
    ("topic id number", parse_topic, TOPIC, raw({"version": 3, "partitions": {"0": [1]}, "topic_id": 5}), "'topic_id'"),
    ("topic config no config", parse_topic_config, TOPIC_CONFIG, raw({"version": 1}), "'config'"),
    ("topic config number value", parse_topic_config, TOPIC_CONFIG,
     raw({"version": 1, "config": {"min.insync.replicas": 2}}), "min.insync.replicas"),
    ("topic config list", parse_topic_config, TOPIC_CONFIG, raw({"version": 1, "config": ["a"]}), "'config'"),
    ("topic config empty", parse_topic_config, TOPIC_CONFIG, b"", "empty data"),
    # partition state
    ("state empty", parse_partition_state, STATE, b"", "empty data"),
    ("state not json", parse_partition_state, STATE, b"leader=1", "not JSON"),
    ("state no leader", parse_partition_state, STATE, _state(leader=...), "'leader'"),
    ("state no isr", parse_partition_state, STATE, _state(isr=...), "'isr'"),
    ("state no leader epoch", parse_partition_state, STATE, _state(leader_epoch=...), "'leader_epoch'"),
    ("state no controller epoch", parse_partition_state, STATE, _state(controller_epoch=...), "'controller_epoch'"),
    ("state leader text", parse_partition_state, STATE, _state(leader="1"), "'leader'"),
    ("state leader below -2", parse_partition_state, STATE, _state(leader=-3), "'leader'"),
    ("state isr text", parse_partition_state, STATE, _state(isr=["1"]), "'isr'[0]"),
    ("state isr null", parse_partition_state, STATE, _state(isr=None), "'isr'"),
    ("state recovery 2", parse_partition_state, STATE, _state(leader_recovery_state=2), "'leader_recovery_state'"),
    ("state negative partition", parse_partition_state,
     "/kafka/brokers/topics/orders/partitions/-1/state", _state(), "partition"),
    ("state wrong path", parse_partition_state, TOPIC, _state(), "/partitions/"),
    # admin and notifications
    ("reassign empty", parse_reassignment, REASSIGN, b"", "empty data"),
    ("reassign no partitions", parse_reassignment, REASSIGN, raw({"version": 1}), "'partitions'"),
    ("reassign partitions object", parse_reassignment, REASSIGN, raw({"version": 1, "partitions": {}}), "'partitions'"),
    ("reassign entry not object", parse_reassignment, REASSIGN, raw({"version": 1, "partitions": [1]}), "partitions[0]"),
    ("reassign no topic", parse_reassignment, REASSIGN,
     raw({"version": 1, "partitions": [{"partition": 0, "replicas": [1]}]}), "'topic'"),
    ("reassign empty topic", parse_reassignment, REASSIGN,
     raw({"version": 1, "partitions": [{"topic": "", "partition": 0, "replicas": [1]}]}), "topic"),
    ("reassign negative partition", parse_reassignment, REASSIGN,
     raw({"version": 1, "partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}), "partition"),
    ("reassign no replicas", parse_reassignment, REASSIGN,
     raw({"version": 1, "partitions": [{"topic": "t", "partition": 0}]}), "'replicas'"),
    ("reassign replica text", parse_reassignment, REASSIGN,
     raw({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": ["a"]}]}), "t:0.replicas[0]"),
    ("reassign twice", parse_reassignment, REASSIGN,
     raw({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}), "twice"),
    ("preferred empty", parse_preferred_election, PREFERRED, b"", "empty data"),
    ("preferred not utf8", parse_preferred_election, PREFERRED, b"\xfe", "not UTF-8"),
    ("preferred partition text", parse_preferred_election, PREFERRED,
     raw({"version": 1, "partitions": [{"topic": "t", "partition": "0"}]}), "partitions[0].partition"),
    ("preferred topic number", parse_preferred_election, PREFERRED,
     raw({"version": 1, "partitions": [{"topic": 1, "partition": 0}]}), "partitions[0].topic"),
    ("isr change empty", parse_isr_change, ISR_CHANGE, b"", "empty data"),
    ("isr change null", parse_isr_change, ISR_CHANGE, b"null", "JSON object"),
    ("isr change no partitions", parse_isr_change, ISR_CHANGE, raw({"version": 1}), "'partitions'"),
    ("isr change negative", parse_isr_change, ISR_CHANGE,
     raw({"version": 1, "partitions": [{"topic": "t", "partition": -5}]}), "partition"),
]


@pytest.mark.parametrize("parser, path, data, problem",
                         [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
def test_malformed_znode_names_path_and_problem(parser: Parser, path: str, data: bytes, problem: str) -> None:
    with pytest.raises(MalformedZnode) as caught:
        parser(path, data)
    message = str(caught.value)
    assert message.startswith(path + ": ")
    assert problem in message


def test_malformed_znode_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_controller_epoch(EPOCH, b"x")


# ---------------------------------------------------------------- paths

def test_paths_under_chroot() -> None:
    paths = ZkPaths("/kafka")
    assert paths.controller == "/kafka/controller"
    assert paths.controller_epoch == "/kafka/controller_epoch"
    assert paths.broker_ids == "/kafka/brokers/ids"
    assert paths.broker(3) == "/kafka/brokers/ids/3"
    assert paths.topics == "/kafka/brokers/topics"
    assert paths.topic("orders") == TOPIC
    assert paths.partitions("orders") == "/kafka/brokers/topics/orders/partitions"
    assert paths.partition_state("orders", 3) == STATE
    assert paths.config_topics == "/kafka/config/topics"
    assert paths.topic_config("orders") == TOPIC_CONFIG
    assert paths.reassign_partitions == REASSIGN
    assert paths.preferred_replica_election == PREFERRED
    assert paths.delete_topics == "/kafka/admin/delete_topics"
    assert paths.topic_deletion("orders") == "/kafka/admin/delete_topics/orders"
    assert paths.isr_change_notification == "/kafka/isr_change_notification"


@pytest.mark.parametrize("chroot", ["", "/"])
def test_paths_without_chroot(chroot: str) -> None:
    paths = ZkPaths(chroot)
    assert paths.chroot == ""
    assert paths.controller == "/controller"
    assert paths.partition_state("t", 0) == "/brokers/topics/t/partitions/0/state"


def test_chroot_is_normalised_and_validated() -> None:
    assert ZkPaths("/kafka/prod/").chroot == "/kafka/prod"
    assert ZkPaths("/kafka") == ZkPaths("/kafka/")
    for bad in ("kafka", "/kafka//prod"):
        with pytest.raises(ValueError):
            ZkPaths(bad)


def test_split_paths_round_trip() -> None:
    paths = ZkPaths("/kafka")
    assert paths.split_broker(paths.broker(7)) == 7
    assert paths.split_partition_state(paths.partition_state("orders", 3)) == ("orders", 3)
    assert paths.split_isr_change(ISR_CHANGE) == "0000000042"


@pytest.mark.parametrize("split, path", [
    ("split_broker", "/other/brokers/ids/1"),                          # outside the chroot
    ("split_broker", "/kafka/brokers/ids/x"),
    ("split_broker", "/kafka/brokers/ids"),
    ("split_partition_state", "/kafka/brokers/topics/orders/partitions/3"),
    ("split_partition_state", "/kafka/brokers/topics/orders/partitions/-3/state"),
    ("split_partition_state", "/kafka/x/brokers/topics/orders/partitions/3/state"),
    ("split_isr_change", "/kafka/isr_change_notification/other_0001"),
    ("split_isr_change", "/kafka/isr_change_notification/isr_change_"),
])
def test_split_rejects_other_paths(split: str, path: str) -> None:
    with pytest.raises(MalformedZnode, match=f"^{path}: "):
        getattr(ZkPaths("/kafka"), split)(path)
