"""Znode payloads of every kind the ZooKeeper collector reads, and the tree that folds them.

* ``parse``: each parser of collectors/zk/znodes.py on a (parser, path, data) case: a state, or
  MalformedZnode, nothing else.
* ``tree``: a watched tree (tests/unit/fakes.py's FakeZk) whose znodes are
  written over and over, each write read as a watch would read it: every payload that does not
  parse is counted in its round, the events the rest make survive the events topic's codec, and
  the final snapshot equals that of a tree that only ever read the payloads that parse (the
  entity kept its last good state).
* ``listing``: the children a listing names (any text ZooKeeper allows): badly named ones are
  counted, never followed.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from collectors.zk.tree import _PARSERS, Read, Round, ZkTree
from collectors.zk.znodes import (MalformedZnode, parse_broker, parse_controller, parse_controller_epoch,
                                  parse_isr_change, parse_partition_state, parse_preferred_election,
                                  parse_reassignment, parse_topic, parse_topic_config)
from kmon.codec import decode, encode
from kmon.events import Event
from tests.fuzz.cases import Case
from tests.fuzz.engine import Target
from tests.unit.fakes import FakeZk
from tests.unit.zk_builders import PATHS, kafka_tree, snapshot

_PARTITIONS = [{"topic": "orders", "partition": 3}, {"topic": "orders", "partition": 1}]
# parser -> a path of its kind and payloads Kafka 2.x-3.9 writes there
KINDS: dict[str, tuple[Callable[[str, bytes], Any], str, list[Any]]] = {
    "controller": (parse_controller, "/kafka/controller", [
        {"version": 1, "brokerid": 1, "timestamp": "1732240000000"},
        {"version": 2, "brokerid": 3, "timestamp": "1732240000000", "kraftControllerEpoch": 7}]),
    "controller_epoch": (parse_controller_epoch, "/kafka/controller_epoch", [b"3", b"2147483647"]),
    "broker": (parse_broker, "/kafka/brokers/ids/2", [
        {"version": 1, "host": "b2", "port": 9092, "jmx_port": -1, "timestamp": "1732240000000"},
        {"version": 4, "host": "b2", "port": 9092, "jmx_port": 9999, "timestamp": "1732240000000", "rack": "r1",
         "endpoints": ["PLAINTEXT://b2:9092", "SSL://[::1]:9093"],
         "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}},
        {"version": 5, "host": None, "port": -1, "jmx_port": -1, "timestamp": "1732240000000",
         "endpoints": ["INTERNAL://b2:9094"], "listener_security_protocol_map": {"INTERNAL": "SASL_SSL"},
         "features": {"metadata.version": {"min_version": 1, "max_version": 21}}}]),
    "topic": (parse_topic, "/kafka/brokers/topics/orders", [
        {"version": 1, "partitions": {"1": [2, 3], "0": [1, 2]}},
        {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}, "topic_id": "kOlTfk6uQ0eUEmTDl3Wivg",
         "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}]),
    "topic_config": (parse_topic_config, "/kafka/config/topics/orders", [
        {"version": 1, "config": {"min.insync.replicas": "2", "retention.ms": "604800000"}}]),
    "partition": (parse_partition_state, "/kafka/brokers/topics/orders/partitions/3/state", [
        {"controller_epoch": 3, "leader": 1, "version": 1, "leader_epoch": 5, "isr": [1, 2, 3]},
        {"controller_epoch": 4, "leader": -1, "version": 1, "leader_epoch": 6, "isr": [2],
         "leader_recovery_state": 1}]),
    "reassignment": (parse_reassignment, "/kafka/admin/reassign_partitions", [
        {"version": 1, "partitions": [{"topic": "orders", "partition": 3, "replicas": [1, 2]}]}]),
    "preferred_election": (parse_preferred_election, "/kafka/admin/preferred_replica_election", [
        {"version": 1, "partitions": _PARTITIONS}]),
    "isr_change": (parse_isr_change, "/kafka/isr_change_notification/isr_change_0000000042", [
        {"version": 1, "partitions": _PARTITIONS}]),
}
_NAMES = list(KINDS)


def _payload(doc: Any) -> bytes:
    return doc if isinstance(doc, bytes) else json.dumps(doc).encode()


def _text(field: bytes | None) -> str:
    return (field or b"").decode("utf-8", "replace")


# ------------------------------------------------------------------ parse

def _parse_seeds() -> list[Case]:
    return [((name.encode(), path.encode(), _payload(doc)),) for name, (_, path, docs) in KINDS.items()
            for doc in docs]


def _parser(name: bytes | None) -> Callable[[str, bytes], Any]:
    text = _text(name)
    return KINDS[text][0] if text in KINDS else KINDS[_NAMES[sum(name or b"") % len(_NAMES)]][0]


def check_parse(case: Case) -> None:
    for name, path, data in case:
        try:
            _parser(name)(_text(path), data)
        except MalformedZnode:
            pass


# ------------------------------------------------------------------ tree

# the data znodes of kafka_tree() a case writes, with a payload of their kind each
_WRITABLE = {path: KINDS[kind][2][0] for kind, path in (
    ("controller", "/kafka/controller"), ("controller_epoch", "/kafka/controller_epoch"),
    ("broker", "/kafka/brokers/ids/1"), ("broker", "/kafka/brokers/ids/2"),
    ("topic", "/kafka/brokers/topics/orders"), ("topic_config", "/kafka/config/topics/orders"),
    ("partition", "/kafka/brokers/topics/orders/partitions/0/state"),
    ("partition", "/kafka/brokers/topics/orders/partitions/1/state"),
    ("reassignment", "/kafka/admin/reassign_partitions"),
    ("preferred_election", "/kafka/admin/preferred_replica_election"))}
_PATHS = list(_WRITABLE)


def _tree_seeds() -> list[Case]:
    """Every znode written once, then each payload of KINDS on its own (a selector's byte sum is
    the path's index)."""
    writes = [(bytes([i]), _payload(doc)) for i, doc in enumerate(_WRITABLE.values())]
    return [tuple(writes)] + [((bytes([_PATHS.index(path)]), _payload(doc)),)
                              for _, path, docs in KINDS.values() if path in _WRITABLE for doc in docs]


def _parses(tree: ZkTree, path: str, data: bytes) -> bool:
    try:
        _PARSERS[tree.classify(path)[0]](path, data)
        return True
    except MalformedZnode:
        return False


def _watched(zk: FakeZk) -> ZkTree:
    tree = ZkTree(PATHS, "c1")
    snapshot(tree, zk)
    return tree


def check_tree(case: Case) -> None:
    zk, good_zk = kafka_tree(), kafka_tree()
    tree, good = _watched(zk), _watched(good_zk)
    bad_paths: set[str] = set()
    for selector, data in case:
        path, data = _PATHS[sum(selector or b"") % len(_PATHS)], data or b""
        read = tree.read_mode(path) is not Read.IGNORE
        zk.set(path, data)
        events, rnd = _follow(tree, zk, path)
        if _parses(tree, path, data):
            bad_paths.discard(path)
            good_zk.set(path, data)
            _follow(good, good_zk, path)
        else:
            bad_paths.add(path)
        malformed = {str(e).split(":")[0] for _, e in rnd.malformed}
        assert malformed <= bad_paths and (path in malformed) == (read and path in bad_paths), rnd.malformed
        for event in events:
            assert decode(encode(event)) == event, event
    assert _states(tree) == _states(good)


def _follow(tree: ZkTree, zk: FakeZk, path: str) -> tuple[list[Event], Round]:
    rnd = Round(full=False)
    rnd.follow(path)
    zk.read(tree, rnd)
    return tree.changes(rnd, 3), rnd


def _states(tree: ZkTree) -> list[tuple[str, str, Any]]:
    return [(e.entity, e.op, e.data) for e in tree.snapshot(Round(full=True), "s", "check", 1, 2)[1:-1]]


# ------------------------------------------------------------------ listing

_LISTINGS = ["/kafka/brokers/ids", "/kafka/brokers/topics", "/kafka/admin/delete_topics",
             "/kafka/isr_change_notification"]


def _listing_seeds() -> list[Case]:
    return [((b"\0", b"1\n2\n3"),), ((b"\1", b"orders\npayments"),), ((b"\2", b"orders"),),
            ((b"\3", b"isr_change_0000000001\nisr_change_0000000002"),)]


def check_listing(case: Case) -> None:
    zk = kafka_tree()
    tree = _watched(zk)
    for selector, names in case:
        listing = _LISTINGS[sum(selector or b"") % len(_LISTINGS)]
        children = sorted({n for n in _text(names).split("\n") if n and "/" not in n})
        rnd = Round(full=False)
        tree.on_children(listing, children, zk.zxid, rnd)
        for child in rnd.take(10_000):
            if tree.read_mode(child) is not Read.IGNORE:
                tree.on_read(child, tree.read_mode(child), None, rnd)
        for event in tree.changes(rnd, 3):
            assert decode(encode(event)) == event, event


TARGETS = (
    Target("parse", 3, _parse_seeds, check_parse),
    Target("tree", 2, _tree_seeds, check_tree, max_messages=24),
    Target("listing", 2, _listing_seeds, check_listing, max_messages=8),
)
