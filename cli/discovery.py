"""Find out what a bootstrap address leads to, and how kmon can watch it (`kmon run --bootstrap-servers`).

From the brokers alone, as an operator would read them: DescribeCluster (the cluster id, the brokers), a
broker's own configuration (``process.roles``: KRaft; ``zookeeper.connect``: ZooKeeper mode, with
its chroot; ``zookeeper.metadata.migration.enable``: a migration under way), else whether the broker
serves DescribeQuorum at all (only KRaft brokers do). In KRaft mode the quorum's controller listeners
come from DescribeQuorum v2 (its voters' endpoints, Kafka 3.9 and later), else from the broker's
``controller.quorum.bootstrap.servers`` or ``controller.quorum.voters``; and one observer's fetch of the
metadata log says whether kmon may follow it (CLUSTER_ACTION). What a flag gives is taken as given.
"""
from __future__ import annotations

import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from collectors.kafka_encoding import MalformedRecord
from collectors.kraft import wire
from collectors.kraft.connection import ClientSecurity, Connection, ControllerError
from kmon import __version__
from kmon.flags import addresses
from kmon.watched import KRAFT, MIGRATION, MODE_WORDS, ZOOKEEPER, WatchedCluster

log = logging.getLogger("kmon.discovery")

# a broker's settings that say the mode and where its control plane is
_SETTINGS = ("process.roles", "zookeeper.connect", "zookeeper.metadata.migration.enable",
             "controller.quorum.bootstrap.servers", "controller.quorum.voters", "controller.listener.names")


class DiscoveryError(RuntimeError):
    """The cluster cannot be watched as asked; one line says what is missing and what would do."""


class NotAnswering(DiscoveryError):
    """No broker of the bootstrap list answered (yet): worth asking again."""


@dataclass(frozen=True)
class Given:
    """What the user said about the cluster; the rest is found out."""
    name: str                            # the `cluster` label kmon gives it
    bootstrap_servers: str
    client: Mapping[str, str]            # librdkafka settings of the monitored cluster
    security: ClientSecurity | None      # None: kmon's own Kafka client cannot log in as configured
    controllers: str = ""
    zookeeper: str = ""
    command_config: str = ""
    zk_client_config: str = ""
    timeout_s: float = 10.0
    why_no_security: str = ""            # why security is None
    sampled: bool = False                # KRaft: sample the brokers even where the log could be followed


@dataclass(frozen=True)
class Found:
    cluster: WatchedCluster
    said: tuple[str, ...]   # what was found and chosen, a line each, for the user
    warnings: tuple[str, ...] = ()   # what will not work as it is, a line each


def discover_each(givens: Sequence[Given]) -> list[Found | DiscoveryError]:
    """Each cluster found out, side by side (a fleet's clusters that do not answer cost one timeout
    together, not one each), in the order given; one that cannot be found out as its DiscoveryError."""
    def one(given: Given) -> Found | DiscoveryError:
        try:
            return discover(given)
        except DiscoveryError as e:
            return e
    if len(givens) < 2:
        return [one(g) for g in givens]
    pool = ThreadPoolExecutor(max_workers=min(len(givens), 8), thread_name_prefix="kmon-discover")
    try:
        return list(pool.map(one, givens))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def discover(given: Given) -> Found:
    said_by_client: list[KafkaError] = []   # librdkafka says a refused login here, the request only times out
    admin = AdminClient({"bootstrap.servers": given.bootstrap_servers, "log_level": 0, **given.client,
                         "error_cb": said_by_client.append})
    cluster_id, brokers = _describe_cluster(admin, given, said_by_client)
    settings, why_no_settings = _settings(admin, brokers[0], given.timeout_s)
    mode = _mode(settings) if settings else _mode_by_api(given)
    said = [f"cluster {cluster_id}: brokers {', '.join(map(str, brokers))}, "
            f"{MODE_WORDS[mode]}" + ("" if settings else f" (by its APIs: {why_no_settings})")]
    base = WatchedCluster(name=given.name, mode=mode, bootstrap_servers=given.bootstrap_servers, cluster_id=cluster_id,
                          command_config=given.command_config, zk_client_config=given.zk_client_config)
    if mode == KRAFT:
        return _kraft(base, given, settings, said)
    zookeeper = given.zookeeper or settings.get("zookeeper.connect", "")
    if not zookeeper:
        raise DiscoveryError(f"the cluster at {given.bootstrap_servers} runs in ZooKeeper mode and kmon could not read "
                             f"its brokers' zookeeper.connect ({why_no_settings}): give --zookeeper HOST:PORT[/chroot]")
    said.append(f"following ZooKeeper at {zookeeper}" + (" (--zookeeper)" if given.zookeeper else
                                                        " (the brokers' zookeeper.connect)"))
    warnings = []
    if unreachable := zookeeper_unreachable(zookeeper, given.timeout_s):
        warnings.append(f"ZooKeeper {zookeeper} cannot be reached from here ({unreachable}): the ZooKeeper "
                        "collector keeps trying and says when it gets through; --zookeeper gives an address that "
                        "can be reached")
    if mode == MIGRATION:
        said.append("a migration to KRaft is under way: its KRaft controller writes ZooKeeper too until it ends; "
                    "run kmon again with the KRaft cluster once the brokers leave ZooKeeper")
    return Found(replace(base, zookeeper=zookeeper), tuple(said), tuple(warnings))


def _describe_cluster(admin: AdminClient, given: Given, said_by_client: list[KafkaError]) -> tuple[str, list[int]]:
    try:
        found = admin.describe_cluster(request_timeout=given.timeout_s).result()
    except KafkaException as e:
        error: KafkaError = e.args[0]
        admin.poll(0)   # serves error_cb
        if refused := [x for x in said_by_client if x.code() in _LOGIN_REFUSED]:
            raise DiscoveryError(f"the brokers at {given.bootstrap_servers} refused kmon's login: {refused[-1].str()}; "
                                 "check the credentials in --command-config") from None
        if error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                            KafkaError._RESOLVE):
            raise NotAnswering(f"no broker of {given.bootstrap_servers} answers ({error.str()})") from None
        raise DiscoveryError(f"the brokers at {given.bootstrap_servers} refused kmon's DescribeCluster: "
                             f"{error.str()}{_grant_hint(error)}") from None
    brokers = sorted(node.id for node in found.nodes)
    if not brokers:
        raise NotAnswering(f"the brokers at {given.bootstrap_servers} list no broker yet")
    return found.cluster_id or "", brokers


_LOGIN_REFUSED = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL)


def _grant_hint(error: KafkaError) -> str:
    if error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return ": kmon's principal needs DESCRIBE on the cluster"
    if error.code() in _LOGIN_REFUSED:
        return ": check the credentials in --command-config"
    return ""


def _settings(admin: AdminClient, broker: int, timeout_s: float) -> tuple[dict[str, str], str]:
    """The broker's settings of _SETTINGS ({} and why, where DescribeConfigs is refused)."""
    resource = ConfigResource(ResourceType.BROKER, str(broker))
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result()
    except KafkaException as e:
        return {}, f"DescribeConfigs of broker {broker} answered {e.args[0].str()}"
    return {name: entries[name].value or "" for name in _SETTINGS if name in entries}, ""


def _mode(settings: Mapping[str, str]) -> str:
    """Pure: the mode a broker's settings say."""
    if settings.get("process.roles"):
        return KRAFT
    if settings.get("zookeeper.metadata.migration.enable", "").lower() == "true":
        return MIGRATION
    return ZOOKEEPER


def _mode_by_api(given: Given) -> str:
    """Where the settings are not readable: only a KRaft broker serves DescribeQuorum."""
    try:
        conn = _broker(given)
    except ControllerError as e:
        raise DiscoveryError(f"kmon could not tell the cluster's mode: {e}") from None
    with conn:
        return KRAFT if wire.API_DESCRIBE_QUORUM in conn.versions else ZOOKEEPER


def _broker(given: Given) -> Connection:
    """A connection to the first bootstrap broker that takes one."""
    if given.security is None:
        raise ControllerError(given.why_no_security)
    last: Exception | None = None
    for host, port in addresses(given.bootstrap_servers):
        try:
            return Connection(host, port, given.security, given.timeout_s, __version__, role="broker")
        except ControllerError:
            raise
        except ConnectionError as e:
            last = e
    raise NotAnswering(str(last))


def _kraft(base: WatchedCluster, given: Given, settings: Mapping[str, str], said: list[str]) -> Found:
    controllers, source = given.controllers, "--controllers"
    if not controllers:
        controllers, source = _quorum_endpoints(given, settings.get("controller.listener.names", ""))
    if not controllers:
        controllers, source = quorum_setting(settings)
    if not controllers:
        raise DiscoveryError(f"the KRaft cluster at {given.bootstrap_servers} did not say where its controllers "
                             "listen (DescribeQuorum gave no endpoints, the brokers' settings were not readable): "
                             "give --controllers HOST:PORT[,...] (controller.quorum.bootstrap.servers)")
    said.append(f"controller quorum at {controllers} ({source})")
    if given.sampled:
        said.append("sampling the brokers' metadata, as asked (sampled: true), without asking for the metadata log")
        return Found(replace(base, controllers=controllers, exact=False), tuple(said))
    refusal = fetch_refusal(controllers, given)
    if refusal is None:
        said.append("following the metadata log as an observer: every committed change, exact")
        return Found(replace(base, controllers=controllers, exact=True), tuple(said))
    said.append("sampling the brokers' metadata instead of following the metadata log")
    return Found(replace(base, controllers=controllers, exact=False), tuple(said), (refusal,))


def _quorum_endpoints(given: Given, controller_listeners: str) -> tuple[str, str]:
    """The voters' controller listeners as DescribeQuorum v2 (through a broker) names them, or ""."""
    try:
        with _broker(given) as conn:
            if not conn.supports(wire.API_DESCRIBE_QUORUM, wire.DESCRIBE_QUORUM_VERSION):
                return "", ""
            info = wire.parse_describe_quorum(conn.call(wire.API_DESCRIBE_QUORUM, wire.DESCRIBE_QUORUM_VERSION,
                                                        wire.describe_quorum_request()))
    except (ConnectionError, MalformedRecord) as e:   # ControllerError too
        log.info("DescribeQuorum through a broker failed (%s): looking for the controllers elsewhere", e)
        return "", ""
    preferred = [name.strip() for name in controller_listeners.split(",") if name.strip()]
    return voter_endpoints(info.endpoints, preferred), "DescribeQuorum"


def voter_endpoints(endpoints: Mapping[int, Mapping[str, tuple[str, int]]], preferred: list[str]) -> str:
    """Pure: one address per voter, on the first of ``preferred`` listeners it has (else its first)."""
    chosen = []
    for _, listeners in sorted(endpoints.items()):
        name = next((n for n in preferred if n in listeners), next(iter(listeners), None))
        if name is not None:
            host, port = listeners[name]
            chosen.append(f"{host}:{port}")
    return ",".join(chosen)


def quorum_setting(settings: Mapping[str, str]) -> tuple[str, str]:
    """Pure: the controllers a broker's settings name (``id@host:port`` voters made ``host:port``)."""
    for name in ("controller.quorum.bootstrap.servers", "controller.quorum.voters"):
        if value := settings.get(name, "").strip():
            return ",".join(v.strip().rpartition("@")[2] for v in value.split(",") if v.strip()), name
    return "", ""


def fetch_refusal(controllers: str, given: Given) -> str | None:
    """Why kmon may not follow the metadata log from ``controllers`` (None: it may), from one observer's
    fetch: refused CLUSTER_ACTION, a listener kmon cannot log in to, or none it can reach."""
    if given.security is None:
        return given.why_no_security
    unreachable = []
    for host, port in addresses(controllers):
        try:
            with Connection(host, port, given.security, given.timeout_s, __version__) as conn:
                if not conn.supports(wire.API_FETCH, wire.FETCH_VERSION):
                    return (f"controller listener {conn.address} does not serve the metadata log's fetch version "
                            f"{wire.FETCH_VERSION} (Kafka 3.7 or newer does)")
                body = wire.fetch_request(0, 0, 0, 0, 1024)
                result = wire.parse_fetch(conn.call(wire.API_FETCH, wire.FETCH_VERSION, body))
        except ControllerError as e:
            return f"{e}"
        except (ConnectionError, MalformedRecord) as e:
            unreachable.append(f"{e}")
            continue
        if result.error == wire.CLUSTER_AUTHORIZATION_FAILED:
            return (f"controller listener {host}:{port} refused it (CLUSTER_AUTHORIZATION_FAILED); granting kmon's "
                    "principal CLUSTER_ACTION on the cluster makes it exact (a powerful permission: the brokers' own)")
        return None   # any other answer (a leader elsewhere, an epoch) was given to an authorized observer
    return ("no controller listener answered (" + "; ".join(unreachable) + "); --controllers with addresses "
            "reachable from here makes it exact")


def zookeeper_unreachable(connect: str, timeout_s: float) -> str:
    """Why no server of ``connect`` takes a TCP connection ("" when one does)."""
    why = []
    for host, port in addresses(connect.partition("/")[0]):
        try:
            socket.create_connection((host.strip("[]"), port), timeout=min(timeout_s, 3.0)).close()
            return ""
        except OSError as e:
            why.append(f"{host}:{port}: {e.strerror or e}")
    return "; ".join(why)
