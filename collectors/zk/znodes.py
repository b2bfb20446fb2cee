"""Pure parsers for the znodes Kafka 2.x-3.9 writes in ZooKeeper mode, and the paths they live at.

No I/O here: the watcher hands over ``(path, bytes)`` and gets back the typed states of
:mod:`kmon.events`, or a :class:`MalformedZnode` naming the path and the problem, which
it counts and logs instead of crashing (fault scenario 8).

Formats follow Kafka's ``kafka.zk.ZkData``. Fields a parser does not know are ignored and
unknown ``version`` values are accepted as long as the fields we need are there, so a newer
broker (or a vendor build adding its own fields) does not blind the collector.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

import orjson

from kmon.events import (
    BrokerState,
    Endpoint,
    IsrChangeState,
    PartitionState,
    PreferredElectionState,
    ReassignmentState,
    TopicState,
)

__all__ = [
    "MalformedZnode",
    "ZkPaths",
    "parse_broker",
    "parse_controller",
    "parse_controller_epoch",
    "parse_isr_change",
    "parse_partition_state",
    "parse_preferred_election",
    "parse_reassignment",
    "parse_topic",
    "parse_topic_config",
]

_INT32_MAX = 2**31 - 1    # Kafka stores ids, epochs and partitions as Java ints
_INT64_MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]+")
# Kafka's advertised-listener syntax: LISTENER://host:port, IPv6 hosts in brackets, host may be empty
_ENDPOINT = re.compile(r"([A-Za-z0-9_.-]+)://\[?([0-9A-Za-z%._:-]*)\]?:([0-9]+)")
# listeners named after a protocol need no entry in listener_security_protocol_map
_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
# Kafka's Uuid.toString: 16 bytes as URL-safe base64 without padding
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_NO_KRAFT_EPOCH = -1      # what a ZooKeeper-mode controller writes in /controller v2
_ISR_CHANGE_PREFIX = "isr_change_"


class MalformedZnode(ValueError):
    """A znode whose data (or path) does not follow Kafka's format; the message starts with the path."""


# ---------------------------------------------------------------- paths

# Path templates relative to the chroot; <name> segments are captured.
_BROKER = ("brokers", "ids", "<broker id>")
_TOPIC = ("brokers", "topics", "<topic>")
_PARTITION_STATE = ("brokers", "topics", "<topic>", "partitions", "<partition>", "state")
_TOPIC_CONFIG = ("config", "topics", "<topic>")
_ISR_CHANGE = ("isr_change_notification", "<sequence node>")


# The fixed znodes the collector reads or watches: attribute of ZkPaths -> path below the chroot.
_FIXED = (
    ("controller", "/controller"),
    ("controller_epoch", "/controller_epoch"),
    ("broker_ids", "/brokers/ids"),
    ("topics", "/brokers/topics"),
    ("config_topics", "/config/topics"),
    ("reassign_partitions", "/admin/reassign_partitions"),
    ("preferred_replica_election", "/admin/preferred_replica_election"),
    ("delete_topics", "/admin/delete_topics"),
    ("isr_change_notification", "/isr_change_notification"),
)


@dataclass(frozen=True)
class ZkPaths:
    """The absolute paths of the Kafka tree under an optional chroot such as ``/kafka``."""
    chroot: str = ""
    controller: str = field(init=False, repr=False)
    controller_epoch: str = field(init=False, repr=False)
    broker_ids: str = field(init=False, repr=False)
    topics: str = field(init=False, repr=False)
    config_topics: str = field(init=False, repr=False)
    reassign_partitions: str = field(init=False, repr=False)
    preferred_replica_election: str = field(init=False, repr=False)
    delete_topics: str = field(init=False, repr=False)
    isr_change_notification: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        root = self.chroot.rstrip("/")
        if root and (not root.startswith("/") or "//" in root):
            raise ValueError(f"chroot must be an absolute ZooKeeper path, got {self.chroot!r}")
        object.__setattr__(self, "chroot", root)   # "/" and "/kafka/" normalise like Kafka's
        for name, relative in _FIXED:
            object.__setattr__(self, name, root + relative)

    def _abs(self, *segments: object) -> str:
        return "/".join([self.chroot, *map(str, segments)])

    def broker(self, broker_id: int) -> str:
        return self._abs("brokers", "ids", broker_id)

    def topic(self, topic: str) -> str:
        return self._abs("brokers", "topics", topic)

    def partitions(self, topic: str) -> str:
        return self._abs("brokers", "topics", topic, "partitions")

    def partition_state(self, topic: str, partition: int) -> str:
        return self._abs("brokers", "topics", topic, "partitions", partition, "state")

    def topic_config(self, topic: str) -> str:
        return self._abs("config", "topics", topic)

    def topic_deletion(self, topic: str) -> str:
        return self._abs("admin", "delete_topics", topic)

    # The split_* functions raise MalformedZnode when the path is not of that kind.

    def split_broker(self, path: str) -> int:
        return _broker_id(path, self._relative(path))

    def split_partition_state(self, path: str) -> tuple[str, int]:
        return _partition_key(path, self._relative(path))

    def split_isr_change(self, path: str) -> str:
        """The sequence number of an ``isr_change_NNNNNNNNNN`` node (the entity id)."""
        node = _captures(path, self._relative(path), _ISR_CHANGE)[0]
        if not node.startswith(_ISR_CHANGE_PREFIX) or node == _ISR_CHANGE_PREFIX:
            raise MalformedZnode(f"{path}: expected an {_ISR_CHANGE_PREFIX}<sequence> node")
        return node[len(_ISR_CHANGE_PREFIX):]

    def _relative(self, path: str) -> list[str]:
        if not path.startswith(self.chroot + "/"):
            raise MalformedZnode(f"{path}: not under the chroot {self.chroot or '/'!r}")
        return path[len(self.chroot) + 1:].split("/")


def _tail(path: str, template: tuple[str, ...]) -> list[str]:
    """The last segments of an absolute path, as many as the template has: parsers need
    no chroot to read the ids a path carries."""
    segments = path.split("/")
    if segments[0] != "" or len(segments) <= len(template):
        return segments   # wrong length: _captures rejects it
    return segments[-len(template):]


def _captures(path: str, segments: list[str], template: tuple[str, ...]) -> list[str]:
    matches = len(segments) == len(template) and all(
        seg if want.startswith("<") else seg == want for seg, want in zip(segments, template))
    if not matches:
        raise MalformedZnode(f"{path}: expected a path ending in /{'/'.join(template)}")
    return [seg for seg, want in zip(segments, template) if want.startswith("<")]


def _broker_id(path: str, segments: list[str]) -> int:
    return _Reader(path).number(_captures(path, segments, _BROKER)[0], "broker id in the path")


def _partition_key(path: str, segments: list[str]) -> tuple[str, int]:
    topic, partition = _captures(path, segments, _PARTITION_STATE)
    return topic, _Reader(path).number(partition, "partition in the path")


# ---------------------------------------------------------------- validation helpers

def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."   # keep log lines bounded


@dataclass(frozen=True)
class _Reader:
    """Strict typed access to one znode's decoded data; every failure names the path."""
    path: str

    def fail(self, problem: str) -> NoReturn:
        raise MalformedZnode(f"{self.path}: {problem}")

    def text(self, data: bytes) -> str:
        if not isinstance(data, (bytes, bytearray)):
            self.fail(f"expected bytes, got {type(data).__name__}")
        if not data:
            self.fail("empty data")
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(f"not UTF-8 ({e.reason} at byte {e.start})")

    def document(self, data: bytes) -> dict[str, Any]:
        # orjson, not json: json.loads lets in lone surrogates (which no event can carry), and
        # raises RecursionError or a plain ValueError on deep nesting or a 5000-digit number
        try:
            doc = orjson.loads(self.text(data))
        except orjson.JSONDecodeError as e:
            self.fail(f"not JSON ({e.msg} at char {e.pos})")
        return self.mapping(doc, "the document")

    def required(self, obj: dict[str, Any], key: str, where: str = "") -> Any:
        if key not in obj:
            self.fail(f"missing field {key!r}{where}")
        return obj[key]

    def integer(self, value: Any, what: str, lo: int = 0, hi: int = _INT32_MAX) -> int:
        # bool is an int in Python but never one in Kafka's JSON
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(f"{what} should be an integer, got {_short(value)}")
        if not lo <= value <= hi:
            self.fail(f"{what} out of range [{lo}, {hi}]: {value}")
        return value

    def number(self, text: str, what: str, hi: int = _INT32_MAX) -> int:
        """A non-negative integer written as decimal text (path segments, map keys, epochs)."""
        if not _DIGITS.fullmatch(text):
            self.fail(f"{what} should be a non-negative integer, got {_short(text)}")
        return self.integer(int(text), what, hi=hi)

    def string(self, value: Any, what: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(f"{what} should be a non-empty string, got {_short(value)}")
        return value

    def optional_string(self, value: Any, what: str) -> str | None:
        return None if value is None else self.string(value, what)

    def mapping(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(f"{what} should be a JSON object, got {_short(value)}")
        return value

    def array(self, value: Any, what: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(f"{what} should be a JSON array, got {_short(value)}")
        return value

    def broker_ids(self, value: Any, what: str, non_empty: bool = False) -> tuple[int, ...]:
        ids = tuple(self.integer(b, f"{what}[{i}]") for i, b in enumerate(self.array(value, what)))
        if non_empty and not ids:
            self.fail(f"{what} is empty")
        if len(set(ids)) != len(ids):
            self.fail(f"{what} repeats a broker: {list(ids)}")
        return ids

    def version(self, doc: dict[str, Any], required: bool = False) -> int:
        if "version" not in doc and not required:
            return 1
        return self.integer(self.required(doc, "version"), "'version'", lo=1)

    def timestamp(self, doc: dict[str, Any]) -> int | None:
        """Kafka writes epoch milliseconds as a JSON string; a plain number is taken too."""
        value = doc.get("timestamp")
        if value is None:
            return None
        if isinstance(value, str):
            return self.number(value, "'timestamp'", hi=_INT64_MAX)
        return self.integer(value, "'timestamp'", hi=_INT64_MAX)

    def partition_map(self, value: Any, what: str, non_empty: bool) -> dict[int, tuple[int, ...]]:
        """``{"0": [1, 2], ...}``: partition number (as text) -> broker ids."""
        out: dict[int, tuple[int, ...]] = {}
        for key, replicas in self.mapping(value, what).items():
            partition = self.number(key, f"partition key in {what}")
            if partition in out:
                self.fail(f"partition {partition} appears twice in {what}")
            out[partition] = self.broker_ids(replicas, f"{what}[{key!r}]", non_empty)
        return out

    def topic_partitions(self, doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The ``partitions`` array of the admin/notification znodes: ("topic:partition", entry)."""
        out = []
        for i, entry in enumerate(self.array(self.required(doc, "partitions"), "'partitions'")):
            where = f"partitions[{i}]"
            entry = self.mapping(entry, where)
            topic = self.string(self.required(entry, "topic", f" in {where}"), f"{where}.topic")
            partition = self.integer(self.required(entry, "partition", f" in {where}"), f"{where}.partition")
            out.append((f"{topic}:{partition}", entry))
        return out


# ---------------------------------------------------------------- controller

def parse_controller(path: str, data: bytes) -> tuple[int, int | None, int | None]:
    """/controller (v1, and v2 written since 3.4) -> (broker id, registration ms, KRaft controller epoch).

    The KRaft epoch is None unless a KRaft controller holds the znode during a ZK migration.
    """
    r = _Reader(path)
    doc = r.document(data)
    r.version(doc)
    broker_id = r.integer(r.required(doc, "brokerid"), "'brokerid'")
    kraft_epoch = doc.get("kraftControllerEpoch", _NO_KRAFT_EPOCH)
    kraft_epoch = r.integer(kraft_epoch, "'kraftControllerEpoch'", lo=_NO_KRAFT_EPOCH)
    return broker_id, r.timestamp(doc), None if kraft_epoch == _NO_KRAFT_EPOCH else kraft_epoch


def parse_controller_epoch(path: str, data: bytes) -> int:
    """/controller_epoch holds the epoch as decimal text, not JSON."""
    r = _Reader(path)
    return r.number(r.text(data), "controller epoch")


# ---------------------------------------------------------------- brokers

def parse_broker(path: str, data: bytes) -> BrokerState:
    """/brokers/ids/<id>, registration versions 1-5; the id comes from the path."""
    r = _Reader(path)
    broker_id = _broker_id(path, _tail(path, _BROKER))
    doc = r.document(data)
    version = r.version(doc, required=True)   # it decides where the endpoints are
    if version == 1:
        host, port = _v1_host_port(r, doc)
        endpoints = (Endpoint("PLAINTEXT", host, port, "PLAINTEXT"),)
    else:
        endpoints = _endpoints(r, doc)
        host, port = _advertised_host_port(r, doc, endpoints)
    rack = r.optional_string(doc.get("rack"), "'rack'")
    return BrokerState(
        broker_id=broker_id,
        host=host,
        port=port,
        rack=rack,
        endpoints=endpoints,
        jmx_port=r.integer(doc.get("jmx_port", -1), "'jmx_port'", lo=-1, hi=65535),
        timestamp_ms=r.timestamp(doc),
        format_version=version,
        features=_features(r, doc),
    )


def _v1_host_port(r: _Reader, doc: dict[str, Any]) -> tuple[str, int]:
    host = r.string(r.required(doc, "host"), "'host'")
    return host, r.integer(r.required(doc, "port"), "'port'", hi=65535)


def _endpoints(r: _Reader, doc: dict[str, Any]) -> tuple[Endpoint, ...]:
    protocols = r.mapping(doc.get("listener_security_protocol_map", {}), "'listener_security_protocol_map'")
    out = []
    for i, raw in enumerate(r.array(r.required(doc, "endpoints"), "'endpoints'")):
        match = _ENDPOINT.fullmatch(r.string(raw, f"endpoints[{i}]"))
        if match is None:
            r.fail(f"endpoints[{i}] should look like LISTENER://host:port, got {_short(raw)}")
        listener, host, port = match.groups()
        protocol = protocols.get(listener, listener if listener in _SECURITY_PROTOCOLS else None)
        if protocol is None:
            r.fail(f"listener {listener!r} has no entry in 'listener_security_protocol_map'")
        protocol = r.string(protocol, f"security protocol of listener {listener!r}")
        out.append(Endpoint(listener, host, r.integer(int(port), f"endpoints[{i}] port", hi=65535), protocol))
    return tuple(out)


def _advertised_host_port(r: _Reader, doc: dict[str, Any],
                          endpoints: tuple[Endpoint, ...]) -> tuple[str | None, int | None]:
    # Kafka fills the top-level host/port from the first PLAINTEXT endpoint only, writing
    # null/-1 without one; the first endpoint then says where the broker is.
    host = r.optional_string(doc.get("host"), "'host'")
    if host is not None:
        return host, r.integer(r.required(doc, "port"), "'port'", hi=65535)
    if endpoints:
        return endpoints[0].host, endpoints[0].port
    return None, None


def _features(r: _Reader, doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    """v5: feature name -> {"min_version": .., "max_version": ..} (KIP-584)."""
    features = r.mapping(doc.get("features", {}), "'features'")
    return {
        name: {label: r.integer(v, f"features[{name!r}][{label!r}]", hi=2**15 - 1)
               for label, v in r.mapping(ranges, f"features[{name!r}]").items()}
        for name, ranges in features.items()
    }


# ---------------------------------------------------------------- topics and partitions

def parse_topic(path: str, data: bytes, config: dict[str, str] | None = None) -> TopicState:
    """/brokers/topics/<t>, versions 1-3; ``config`` is the parsed /config/topics/<t>, if read."""
    r = _Reader(path)
    topic = _captures(path, _tail(path, _TOPIC), _TOPIC)[0]
    doc = r.document(data)
    topic_id = r.optional_string(doc.get("topic_id"), "'topic_id'")
    if topic_id is not None and not _TOPIC_ID.fullmatch(topic_id):
        r.fail(f"'topic_id' is not a Kafka Uuid: {_short(topic_id)}")
    return TopicState(
        topic=topic,
        topic_id=topic_id,
        replicas=r.partition_map(r.required(doc, "partitions"), "'partitions'", non_empty=True),
        adding=_reassigning(r, doc, "adding_replicas"),
        removing=_reassigning(r, doc, "removing_replicas"),
        config=dict(config or {}),
        format_version=r.version(doc),
    )


def _reassigning(r: _Reader, doc: dict[str, Any], key: str) -> dict[int, tuple[int, ...]]:
    replicas = r.partition_map(doc.get(key, {}), repr(key), non_empty=False)
    # Kafka writes only partitions that are moving; an empty list would read as "reassigning"
    return {partition: ids for partition, ids in replicas.items() if ids}


def parse_topic_config(path: str, data: bytes) -> dict[str, str]:
    """/config/topics/<t>: the topic's overrides of the broker defaults."""
    r = _Reader(path)
    _captures(path, _tail(path, _TOPIC_CONFIG), _TOPIC_CONFIG)
    config = r.mapping(r.required(r.document(data), "config"), "'config'")
    for key, value in config.items():
        if not isinstance(value, str):
            r.fail(f"config[{key!r}] should be a string, got {_short(value)}")
    return dict(config)


def parse_partition_state(path: str, data: bytes) -> PartitionState:
    """/brokers/topics/<t>/partitions/<p>/state; topic and partition come from the path."""
    r = _Reader(path)
    topic, partition = _partition_key(path, _tail(path, _PARTITION_STATE))
    doc = r.document(data)
    return PartitionState(
        topic=topic,
        partition=partition,
        # -1: no leader; -2: the controller is deleting the topic
        leader=r.integer(r.required(doc, "leader"), "'leader'", lo=-2),
        leader_epoch=r.integer(r.required(doc, "leader_epoch"), "'leader_epoch'"),
        isr=r.broker_ids(r.required(doc, "isr"), "'isr'"),
        controller_epoch=r.integer(r.required(doc, "controller_epoch"), "'controller_epoch'"),
        # KIP-704, written (only while recovering) since 3.2: 0 recovered, 1 recovering
        leader_recovery_state=r.integer(doc.get("leader_recovery_state", 0), "'leader_recovery_state'", hi=1),
        format_version=r.version(doc),
    )


# ---------------------------------------------------------------- admin and notifications

def parse_reassignment(path: str, data: bytes) -> ReassignmentState:
    """/admin/reassign_partitions (the pre-2.4 way to reassign, still honoured in ZK mode)."""
    r = _Reader(path)
    targets: dict[str, tuple[int, ...]] = {}
    for key, entry in r.topic_partitions(r.document(data)):
        if key in targets:
            r.fail(f"partition {key} is listed twice")
        targets[key] = r.broker_ids(r.required(entry, "replicas", f" for {key}"), f"{key}.replicas", non_empty=True)
    return ReassignmentState(partitions=targets)


def parse_preferred_election(path: str, data: bytes) -> PreferredElectionState:
    """/admin/preferred_replica_election: partitions whose preferred replica should lead."""
    return PreferredElectionState(partitions=_partition_set(path, data))


def parse_isr_change(path: str, data: bytes) -> IsrChangeState:
    """/isr_change_notification/isr_change_N: partitions whose ISR a broker changed (pre-2.7 IBP)."""
    return IsrChangeState(partitions=_partition_set(path, data))


def _partition_set(path: str, data: bytes) -> tuple[str, ...]:
    r = _Reader(path)
    keys = [key for key, _ in r.topic_partitions(r.document(data))]
    return tuple(dict.fromkeys(keys))   # Kafka reads a set: drop repeats, keep the order
