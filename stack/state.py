"""What a local stack is made of and was asked for (pure data): its components, its state file
(``<dir>/stack.json``), the request ``up`` takes, and the collectors the monitor runs on it. The
processes themselves are stack/local.py's."""
from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable

from kmon.client_config import KafkaClientProperties, ZooKeeperClientProperties
from kmon.http_client import Credentials, load_credentials
from kmon.watched import KRAFT, WatchedCluster
from stack import configs
from stack.process import pid_alive
from stack.secure import SecureFiles

STATE_FILE = "stack.json"
EVENTS = "events"   # the component name of kmon's own events cluster


class StackError(RuntimeError):
    pass


@dataclass
class Component:
    name: str
    port: int
    argv: list[str]
    log: str
    marker: str          # unique string in the process's command line (its config file)
    pid: int = 0
    ready_url: str = ""  # HTTP endpoint answering 200 once the process serves
    controller_port: int = 0   # a KRaft controller's CONTROLLER listener (``port`` is its broker one, if any)
    controller_mtls_port: int = 0   # a secure KRaft controller's listener for clients by certificate

    def alive(self) -> bool:
        return self.pid > 0 and pid_alive(self.pid)


@dataclass
class StackState:
    dir: Path
    chroot: str
    brokers: int
    fast: bool
    # ports reserved at `up` for the monitor's processes, so Prometheus is configured once
    stream_port: int
    collector_ports: dict[str, int]   # collector source (zk, groups) -> its /metrics port
    components: dict[str, Component] = field(default_factory=dict)
    secure: bool = False   # the monitored cluster on SASL_SSL and ZooKeeper with SASL and ACLs (secure.py)
    kraft: bool = False    # the monitored cluster is a KRaft cluster of Kafka 4.x, no ZooKeeper
    kraft_controllers: int = 0   # its dedicated controllers; 0: every broker is a controller too
    cluster_id: str = ""   # the KRaft cluster's id, which its nodes' storage was formatted with
    # clusters kmon did not start: this stack is kmon's parts only
    watched: tuple[WatchedCluster, ...] = ()
    config_file: str = ""   # the config file that named them (absolute; "" none): their collectors read it too
    events: str = ""        # an events cluster kmon did not start ("" its own node, or the monitored cluster)
    events_command_config: str = ""   # its client properties file (absolute; "" none)

    @property
    def flags(self) -> str:
        """The `kmon stack up` flags that make a stack of this shape (a resume must give the same)."""
        if self.watched:
            return watched_flags(self.watched, self.config_file)
        return shape_flags(self.kraft, self.brokers, self.kraft_controllers, self.chroot, self.secure)

    def collectors(self) -> list[Collector]:
        return collectors(self.kraft, self.watched)

    @property
    def secure_files(self) -> SecureFiles | None:
        return SecureFiles(self.dir / "secure") if self.secure else None

    @property
    def scheme(self) -> str:
        """Of kmon's own endpoints: https where the stack is secured (stack/secure.py)."""
        return "https" if self.secure else "http"

    def web_credentials(self) -> Credentials | None:
        """What a client of kmon's own endpoints needs (none unless secure)."""
        files = self.secure_files
        return load_credentials(files.web_client) if files else None

    def kafka_client(self) -> dict[str, str]:
        """librdkafka settings a client of the local monitored cluster needs (none unless secure)."""
        files = self.secure_files
        return KafkaClientProperties.load("monitored", files.kafka_client, {}).librdkafka() if files else {}

    def zk_client(self) -> dict[str, object]:
        """KazooClient arguments for the stack's ZooKeeper (none unless secure)."""
        files = self.secure_files
        return ZooKeeperClientProperties.load(files.zk_client, {}).kazoo() if files else {}

    @property
    def zk_address(self) -> str:
        return f"127.0.0.1:{self.components['zookeeper'].port}"

    @property
    def zk_connect(self) -> str:
        return self.zk_address + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        """The local monitored cluster's brokers ("" in a stack that watches others)."""
        return ",".join(f"127.0.0.1:{c.port}" for n, c in self.components.items()
                        if n.startswith("broker-"))

    @property
    def controllers(self) -> str:
        """The local KRaft controller quorum: the CONTROLLER listeners of its voters (combined nodes included)."""
        return ",".join(f"127.0.0.1:{c.controller_port}" for c in self.components.values() if c.controller_port)

    @property
    def controllers_mtls(self) -> str:
        """A secure KRaft quorum's listeners for clients with a certificate (mTLS), "" if none."""
        return ",".join(f"127.0.0.1:{c.controller_mtls_port}" for c in self.components.values()
                        if c.controller_mtls_port)

    @property
    def events_bootstrap_servers(self) -> str:
        """Where kmon's events go: its own node, the user's events cluster, or the monitored one."""
        events = self.components.get(EVENTS)
        return f"127.0.0.1:{events.port}" if events else self.events or self.bootstrap_servers

    def url(self, name: str) -> str | None:
        c = self.components.get(name)
        return f"http://127.0.0.1:{c.port}" if c else None

    def port_of(self, name: str) -> int:
        """The port ``name`` had (0 if it had none): a resumed stack asks for it again."""
        c = self.components.get(name)
        return c.port if c else 0

    def controller_port_of(self, name: str) -> int:
        """The CONTROLLER port the KRaft node ``name`` had (0 if none)."""
        c = self.components.get(name)
        return c.controller_port if c else 0

    def controller_mtls_port_of(self, name: str) -> int:
        c = self.components.get(name)
        return c.controller_mtls_port if c else 0

    def save(self) -> None:
        path = self.dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, default=str))
        tmp.replace(path)

    @classmethod
    def load(cls, directory: Path) -> "StackState | None":
        """The state ``up`` wrote, or None where there is none. A file this kmon cannot read (half
        written, from another version) raises StackError saying what to do."""
        path = directory / STATE_FILE
        try:
            raw = json.loads(path.read_text())
            raw["dir"] = Path(raw["dir"])
            raw["components"] = {k: Component(**_known(Component, v)) for k, v in raw["components"].items()}
            watched = raw.get("watched") or ()
            raw["watched"] = tuple(WatchedCluster(**_known(WatchedCluster, w))
                                   for w in ([watched] if isinstance(watched, dict) else watched))
            return cls(**_known(cls, raw))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise StackError(f"{path} is not a stack state this kmon can read ({type(e).__name__}: {e}); if "
                             f"nothing of that stack still runs, `kmon run --fresh --dir {directory}` starts "
                             "over (it deletes that directory)") from None


def shape_flags(kraft: bool, brokers: int, controllers: int, chroot: str, secure: bool) -> str:
    """Pure: the flags that say what a stack is made of, as a user types them."""
    shape = (f"--kraft --brokers {brokers}" + (f" --dedicated-controllers {controllers}" if controllers else "")
             if kraft else f"--brokers {brokers}" + (f" --chroot {chroot}" if chroot else ""))
    return shape + (" --secure" if secure else "")


def watched_flags(watched: tuple[WatchedCluster, ...], config_file: str) -> str:
    """Pure: the flag that says which clusters a stack of kmon's parts alone watches (a config file's
    clusters may change between runs: the file's fleet grows)."""
    return f"--config {config_file}" if config_file else f"--bootstrap-servers {watched[0].bootstrap_servers}"


def collector_sources(kraft: bool) -> tuple[str, str]:
    """The collectors of a stack's monitored cluster, by source: its control plane's and the groups'."""
    return ("kraft" if kraft else "zk", "groups")


@dataclass(frozen=True)
class Collector:
    """One collector process of a stack."""
    key: str       # its name in collector_ports; its component is "collector-<key>"
    source: str    # zk, kraft or groups
    watched: WatchedCluster | None   # the cluster kmon did not start that it watches; None: the local one


def collectors(kraft: bool, watched: tuple[WatchedCluster, ...]) -> list[Collector]:
    """Pure: the collectors of a stack: two of its local cluster, or two of each watched cluster, keyed
    by source there and by source@cluster here."""
    if not watched:
        return [Collector(source, source, None) for source in collector_sources(kraft)]
    return [Collector(f"{source}@{w.name}", source, w) for w in watched
            for source in collector_sources(w.mode == KRAFT)]


def _known(cls: type, raw: dict) -> dict:
    """The fields of ``cls`` in ``raw``: keys an older or newer kmon wrote are left out, and a
    missing field with a default takes it (a missing field without one fails in ``cls(...)``)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in raw.items() if k in names}


@dataclass(frozen=True)
class StackRequest:
    brokers: int = 3
    chroot: str = ""
    fast: bool = False
    prometheus: bool = True
    zk_port: int = 0          # 0 = a free port
    first_broker_port: int = 0
    events_cluster: bool = True   # False: kmon's events travel on the monitored cluster itself
    events: str = ""              # an events cluster kmon did not start: no node of its own then
    events_command_config: str = ""
    secure: bool = False          # SASL_SSL brokers, ZooKeeper with SASL and ACLs (see secure.py)
    profile: configs.Profile | None = None   # timing; None: Profile.fast() or Profile() after ``fast``
    # extra JVM options of each monitored broker by id (e.g. a Java agent on a port of its own)
    broker_jvm_options: Callable[[int], list[str]] | None = None
    reserved_ports: frozenset[int] = frozenset()   # ports the caller's servers bind (such agents): none is picked
    kraft: bool = False           # the monitored cluster in KRaft mode, on Kafka 4.x (no ZooKeeper)
    controllers: int = 0          # KRaft: dedicated controllers; 0: each broker is a controller too
    kraft_profile: configs.KraftProfile | None = None   # None: KraftProfile.fast() or KraftProfile() after ``fast``
    # properties of every server of the monitored cluster, over the profile's (e.g.
    # unclean.leader.election.enable=true)
    extra_props: dict[str, str] = field(default_factory=dict)
    # clusters kmon did not start, to watch: the stack is then kmon's parts alone (events node,
    # Prometheus, Alertmanager), and the shape fields above are not used
    watched: tuple[WatchedCluster, ...] = ()
    config_file: str = ""   # the config file that named them

    def timing(self) -> configs.Profile:
        if self.profile is not None:
            return self.profile
        return configs.Profile.fast() if self.fast else configs.Profile()

    def kraft_timing(self) -> configs.KraftProfile:
        if self.kraft_profile is not None:
            return self.kraft_profile
        return configs.KraftProfile.fast() if self.fast else configs.KraftProfile()

    @property
    def flags(self) -> str:
        if self.watched:
            return watched_flags(self.watched, self.config_file)
        return shape_flags(self.kraft, self.brokers, self.controllers, self.chroot, self.secure)

    @property
    def own_events_node(self) -> bool:
        return self.events_cluster and not self.events

    def check(self) -> None:
        """Flags that do not go together: one line naming them."""
        if self.controllers and not self.kraft:
            raise StackError(f"--dedicated-controllers {self.controllers} needs --kraft: dedicated controllers are KRaft's")
        zk_only = [name for name, given in (("--chroot", self.chroot), ("--zookeeper-port", self.zk_port)) if given]
        if self.kraft and zk_only:
            raise StackError(f"--kraft does not go with {', '.join(zk_only)} (ZooKeeper-mode stacks only)")


def stop_order(state: StackState) -> list[list[Component]]:
    """The components in the order ``down`` stops them, each list at once. The monitor and
    Prometheus first, then the events cluster (the collectors flush to it), the brokers, and ZooKeeper
    or the KRaft controllers last. A KRaft cluster's brokers stop together, then its controllers: a
    broker's controlled shutdown needs a quorum, which stopping the combined nodes one by one would
    leave the last one without."""
    def rank(c: Component) -> int:
        if kafka_node(c.name):
            return 2 if c.name.startswith("broker-") else 3
        return {EVENTS: 1, "zookeeper": 3}.get(c.name, 0)
    groups: list[list[Component]] = []
    for _, same in itertools.groupby(sorted(state.components.values(), key=rank), key=rank):
        alike = list(same)
        groups += [alike] if state.kraft and kafka_node(alike[0].name) else [[c] for c in alike]
    return groups


def kafka_node(name: str) -> bool:
    """A server of the monitored Kafka cluster: a broker, or a KRaft controller."""
    return name.startswith("broker-") or name.startswith("controller-")
