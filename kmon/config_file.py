"""kmon's config file: the clusters it watches, its events cluster and its stream app, in YAML, as
KMinion and Burrow are configured. Its keys are the commands' own flags without the dashes, so a word
means one thing whether it is given as a flag, a ``KMON_*`` variable or here, and each value is checked
by the flag's own check; the flag and the variable win over the file. Example (README: "Watch a fleet")::

    clusters:
      - cluster: prod
        bootstrap-servers: b1:9092,b2:9092
        client:                          # Kafka client properties inline (or command-config: FILE)
          security.protocol: SASL_SSL
          sasl.jaas.config: ${PROD_JAAS}  # ${VAR}: from the environment, never written in the file
      - cluster: legacy
        bootstrap-servers: old1:9092
        zookeeper: zk1:2181/kafka
    events:
      bootstrap-servers: events1:9092    # none: `kmon run` starts its own events node
    stream:
      metrics-port: 9308
    web-config-file: web.yml             # TLS and basic auth of every kmon process's endpoints (README)

An unknown key, a cluster named twice or a bad value is one error naming the file, the line and the key.
"""
from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kmon import flags
from kmon.web_config import WebConfig


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ClusterEntry:
    """One watched cluster of the file: the values of `kmon run --bootstrap-servers`'s flags."""
    cluster: str
    bootstrap_servers: str
    line: int
    command_config: Path | None = None
    client: Mapping[str, str] = field(default_factory=dict)   # inline client properties, ${VAR} expanded
    controllers: str | None = None
    zookeeper: tuple[str, str] | None = None
    zk_client_config: Path | None = None
    sampled: bool = False
    # what this machine lacks for this cluster (an unset ${VAR}, a missing client file): said when the
    # entry is used, so one cluster's secrets need not be where another's collector runs
    unusable: str = ""

    def usable(self) -> "ClusterEntry":
        if self.unusable:
            raise ConfigError(self.unusable)
        return self


@dataclass(frozen=True)
class EventsEntry:
    bootstrap_servers: str | None = None   # None: `kmon run` starts its own events node
    topic: str | None = None
    command_config: Path | None = None
    client: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamEntry:
    checkpoint: Path | None = None
    metrics_port: int | None = None
    trigger_interval: float | None = None


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    clusters: tuple[ClusterEntry, ...]
    events: EventsEntry = EventsEntry()
    stream: StreamEntry = StreamEntry()
    web: WebConfig | None = None   # web-config-file: the endpoints of every process that reads the file

    def cluster(self, name: str | None) -> ClusterEntry:
        """The entry named ``name``; None: the file's only one."""
        names = ", ".join(c.cluster for c in self.clusters)
        if name is None:
            if len(self.clusters) == 1:
                return self.clusters[0].usable()
            raise ConfigError(f"{self.path} names several clusters ({names}): --cluster NAME says which")
        for entry in self.clusters:
            if entry.cluster == name:
                return entry.usable()
        raise ConfigError(f"{self.path}: no cluster {name!r} (it names {names})")


def flag_values(command: str, config: ConfigFile, cluster: str | None) -> dict[str, Any]:
    """What the file gives ``command`` ("collect zk", "collect kraft", "collect groups" for the cluster
    named ``cluster``, "stream", or "run"): its flags' values by their argparse names, and ``monitored_client`` /
    ``events_client`` for the inline client properties. What the file leaves out is not there."""
    events = config.events
    if command == "run" and config.web is not None:
        raise ConfigError(f"{config.path}: web-config-file: kmon run starts a Prometheus of its own, which scrapes "
                          "kmon's endpoints over plain HTTP; give the web config to kmon's services (deploy/, the Helm "
                          "chart)")
    if command == "run":   # the clusters: cmd_run reads them from the file itself
        values: dict[str, Any] = {
            "events_bootstrap_servers": events.bootstrap_servers, "events_command_config": events.command_config,
            "events_topic": events.topic, "trigger_interval": config.stream.trigger_interval}
    elif command == "stream":
        stream = config.stream
        values = {
            "bootstrap_servers": events.bootstrap_servers, "events_topic": events.topic,
            "events_command_config": events.command_config, "events_client": events.client,
            "checkpoint": stream.checkpoint, "metrics_port": stream.metrics_port,
            "trigger_interval": stream.trigger_interval}
    else:
        entry = config.cluster(cluster)
        values = {"cluster": entry.cluster, "events_bootstrap_servers": events.bootstrap_servers,
                  "events_topic": events.topic, "events_command_config": events.command_config,
                  "events_client": events.client,
                  **{"collect zk": {"zookeeper": entry.zookeeper, "zk_client_config": entry.zk_client_config},
                     "collect kraft": {"controllers": entry.controllers, "bootstrap_servers": entry.bootstrap_servers,
                                       "sampled": entry.sampled, "command_config": entry.command_config,
                                       "monitored_client": entry.client},
                     "collect groups": {"bootstrap_servers": entry.bootstrap_servers,
                                        "command_config": entry.command_config, "monitored_client": entry.client},
                     }[command]}
    if command != "run":
        values["web_config_file"] = config.web
    return {dest: value for dest, value in values.items() if value not in (None, {}, False)}


def config_flag(parser: argparse.ArgumentParser, what: str) -> None:
    flags.flag(parser, "--config", type=flags.readable_file, metavar="FILE",
               help=f"kmon's config file (YAML; README: Watch a fleet): {what} from it, where no flag or "
                    "variable gives them")


def parse_with_file(parser: argparse.ArgumentParser, argv: list[str], command: Callable[[argparse.Namespace], str],
                    environ: Mapping[str, str] = os.environ) -> argparse.Namespace:
    """``argv`` parsed; with ``--config FILE`` (or KMON_CONFIG), the file's values become the defaults of the
    flags the KMON_* variables leave out, and the command line is parsed again: a flag given wins.
    ``command`` names the parsed command ("collect zk"), its sub-commands' names in turn. A bad file ends the
    command with one line."""
    args = parser.parse_args(argv)
    if getattr(args, "config", None) is None:
        return args
    name = command(args)
    try:
        config = load(args.config, environ)
        values = flag_values(name, config, getattr(args, "cluster", None))
    except ConfigError as e:
        parser.exit(2, f"kmon: {e}\n")
    _subparser(parser, name.split()).set_defaults(
        **{dest: value for dest, value in values.items() if flags.env_name(dest) not in environ})
    return parser.parse_args(argv)


def _subparser(parser: argparse.ArgumentParser, names: list[str]) -> argparse.ArgumentParser:
    """The parser of a sub-command, e.g. ["collect", "zk"]."""
    for name in names:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "yes", "on", "1"):
        return True
    if text.lower() in ("false", "no", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


# each section's keys and the check of the flag of the same name
Check = Callable[[str], Any]
_CLUSTER_KEYS: dict[str, Check] = {
    "cluster": flags.cluster_name, "bootstrap-servers": flags.host_port_list, "command-config": flags.readable_file,
    "controllers": flags.host_port_list, "zookeeper": flags.zk_connect, "zk-client-config": flags.readable_file,
    "sampled": _boolean,
}
_EVENTS_KEYS: dict[str, Check] = {
    "bootstrap-servers": flags.host_port_list, "topic": flags.topic_name, "command-config": flags.readable_file,
}
_STREAM_KEYS: dict[str, Check] = {
    "checkpoint": Path, "metrics-port": flags.port, "trigger-interval": flags.positive_float,
}
_PATHS = {"command-config", "zk-client-config", "checkpoint"}   # relative to the file's folder
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def load(path: Path, environ: Mapping[str, str] = os.environ) -> ConfigFile:
    """The file, every value checked; ConfigError names the file, the line and the key of the first problem."""
    import yaml   # only where a config file is read

    try:
        root = yaml.compose(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{where}: not YAML: {getattr(e, 'problem', None) or e}") from None
    if root is None:
        raise ConfigError(f"{path}: empty: the file names at least one cluster under 'clusters:'")
    reader = _Reader(path, environ)
    top = reader.mapping(root, "the file", {"clusters", "events", "stream", "web-config-file"})
    if "clusters" not in top:
        raise ConfigError(f"{path}: no clusters: the file names at least one under 'clusters:'")
    clusters_node = top["clusters"][1]
    if not isinstance(clusters_node, yaml.SequenceNode) or not clusters_node.value:
        raise ConfigError(f"{path}:{clusters_node.start_mark.line + 1}: clusters: a list of clusters, "
                          "each with its cluster: and bootstrap-servers:")
    clusters: dict[str, ClusterEntry] = {}
    for node in clusters_node.value:
        entry = reader.cluster(node)
        if first := clusters.get(entry.cluster):
            raise ConfigError(f"{path}:{entry.line}: cluster {entry.cluster!r} is named twice (first at line "
                              f"{first.line})")
        clusters[entry.cluster] = entry
    events = EventsEntry(**reader.section(top["events"][1], "events", _EVENTS_KEYS)) if "events" in top else EventsEntry()
    stream = (StreamEntry(**reader.section(top["stream"][1], "stream", _STREAM_KEYS, client=False))
              if "stream" in top else StreamEntry())
    web = None
    if "web-config-file" in top:
        node = top["web-config-file"][1]
        try:
            web = flags.web_config_file(str(path.parent / reader.scalar(node, "web-config-file")))
        except argparse.ArgumentTypeError as e:
            raise ConfigError(f"{reader.where(node)}: web-config-file: {e}") from None
    return ConfigFile(path, tuple(clusters.values()), events, stream, web)


class _Reader:
    def __init__(self, path: Path, environ: Mapping[str, str]):
        self.path, self.environ = path, environ

    def where(self, node: Any) -> str:
        return f"{self.path}:{node.start_mark.line + 1}"

    def mapping(self, node: Any, what: str, allowed: set[str] | None) -> dict[str, tuple[Any, Any]]:
        """key -> (key node, value node); a key twice or one not ``allowed`` is an error naming it."""
        import yaml

        if not isinstance(node, yaml.MappingNode):
            raise ConfigError(f"{self.where(node)}: {what}: a mapping of keys to values")
        out: dict[str, tuple[Any, Any]] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(f"{self.where(key_node)}: {what}: a key must be a word")
            if key in out:
                raise ConfigError(f"{self.where(key_node)}: {what}: {key} is given twice (first at line "
                                  f"{out[key][0].start_mark.line + 1})")
            if allowed is not None and key not in allowed:
                raise ConfigError(f"{self.where(key_node)}: {what}: unknown key {key!r} (known: "
                                  f"{', '.join(sorted(allowed))})")
            out[key] = (key_node, value_node)
        return out

    def scalar(self, node: Any, what: str) -> str:
        import yaml

        if not isinstance(node, yaml.ScalarNode) or node.value == "" and node.tag.endswith(":null"):
            raise ConfigError(f"{self.where(node)}: {what}: a single value")
        return node.value

    def section(self, node: Any, what: str, keys: Mapping[str, Check], client: bool = True,
                lacking: list[str] | None = None) -> dict[str, Any]:
        """A mapping of flag names to values, each checked as its flag checks it; with ``client``, inline
        client properties under ``client:``. With ``lacking``, what this machine lacks (a client file, a
        variable) is added there instead of raised."""
        allowed = set(keys) | ({"client"} if client else set())
        out: dict[str, Any] = {}
        for key, (key_node, value_node) in self.mapping(node, what, allowed).items():
            if key == "client":
                out["client"] = self.client(value_node, f"{what}: client", lacking)
                continue
            text = self.scalar(value_node, f"{what}: {key}")
            if key in _PATHS:
                text = str(self.path.parent / text)
            try:
                out[key.replace("-", "_")] = keys[key](text)
            except (ValueError, argparse.ArgumentTypeError) as e:
                problem = f"{self.where(value_node)}: {what}: {key}: {e}"
                if lacking is None or keys[key] is not flags.readable_file:
                    raise ConfigError(problem) from None
                lacking.append(problem)
        return out

    def client(self, node: Any, what: str, lacking: list[str] | None) -> dict[str, str]:
        """Kafka client properties, ${VAR} taken from the environment."""
        out = {}
        for key, (_, value_node) in self.mapping(node, what, None).items():
            text = self.scalar(value_node, f"{what}: {key}")

            def variable(m: re.Match[str]) -> str:
                if m.group(1) not in self.environ:
                    problem = (f"{self.where(value_node)}: {what}: {key}: the environment variable {m.group(1)} "
                               "is not set")
                    if lacking is None:
                        raise ConfigError(problem)
                    lacking.append(problem)
                    return m.group(0)
                return self.environ[m.group(1)]
            out[key] = _VARIABLE.sub(variable, text)
        return out

    def cluster(self, node: Any) -> ClusterEntry:
        lacking: list[str] = []
        values = self.section(node, "cluster", _CLUSTER_KEYS, lacking=lacking)
        for required in ("cluster", "bootstrap_servers"):
            if required not in values:
                raise ConfigError(f"{self.where(node)}: cluster: {required.replace('_', '-')} is missing")
        return ClusterEntry(line=node.start_mark.line + 1, unusable="; ".join(lacking), **values)
