"""Command-line flags that also read KMON_* environment variables.

Every flag of every kmon command is declared through :func:`flag`, so `--help` always
names the variable, and a bad value in either place gets the same clear error.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Any, Callable

from kmon import web_config
from kmon.web_config import WebConfig


_CLUSTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")   # no "/": it separates cluster and entity in keys
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")          # Kafka's legal topic names


def state_dir() -> Path:
    """Where kmon keeps what must outlive a restart when no flag says: ``$XDG_STATE_HOME/kmon``
    (``~/.local/state/kmon``), the same whatever directory the process starts in. Services set
    their own (``/var/lib/kmon`` in deploy/)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "kmon"


def env_name(flag_name: str) -> str:
    return "KMON_" + flag_name.lstrip("-").replace("-", "_").upper()


def flag(parser: argparse.ArgumentParser, name: str, *, default: Any = None,
         type: Callable[[str], Any] = str, help: str, **kw: Any) -> None:
    """Add ``--name`` whose default comes from ``KMON_NAME`` when set.

    The variable is left as a string default, which argparse converts with ``type`` only
    when this (sub)command is the one being parsed; a bad value names the variable.
    """
    env = env_name(name)
    raw = os.environ.get(env)
    shown = "" if default is None else f", default: {default}"
    if raw:
        default = raw
        type = _naming_env(type, env, raw)
    parser.add_argument(name, default=default, type=type, help=f"{help} (env: {env}{shown})", **kw)


def _naming_env(convert: Callable[[str], Any], env: str, raw: str) -> Callable[[str], Any]:
    def converted(text: str) -> Any:
        try:
            return convert(text)
        except (ValueError, argparse.ArgumentTypeError) as e:
            if text != raw:
                raise
            raise argparse.ArgumentTypeError(f"{e} (from environment variable {env})") from None
    converted.__name__ = getattr(convert, "__name__", "value")
    return converted


def switch(parser: argparse.ArgumentParser, name: str, *, help: str) -> None:
    """A boolean ``--name``; ``KMON_NAME=1/true/yes`` turns it on too."""
    env = env_name(name)
    on = os.environ.get(env, "").lower() in ("1", "true", "yes", "on")
    parser.add_argument(name, action="store_true", default=on, help=f"{help} (env: {env}=1)")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    if not math.isfinite(value):   # these are waited on or slept: no wait takes an infinite time
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or greater")
    return value


def port(text: str) -> int:
    value = positive_int(text) if text != "0" else 0
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535)")
    return value


def readable_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    try:
        path.open("rb").close()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{text!r} cannot be read: {e.strerror or e}") from None
    return path


def web_config_file(text: str) -> WebConfig:
    """The file read and checked whole (kmon.web_config), so a mistake ends the command before it starts."""
    try:
        return web_config.load(readable_file(text))
    except web_config.WebConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def web_flag(parser: argparse.ArgumentParser) -> None:
    """--web-config-file: TLS, client certificates and basic auth of the process's HTTP endpoints."""
    flag(parser, "--web-config-file", type=web_config_file, metavar="FILE",
         help="TLS (tls_server_config), client certificates and basic auth (basic_auth_users, bcrypt hashes) of "
              "this process's HTTP endpoints, in the Prometheus exporters' web config format (README: "
              "\"Securing kmon's endpoints\"); plain HTTP, open to anyone who reaches the port, without it")


def chroot(text: str) -> str:
    if text in ("", "/"):
        return ""
    if not text.startswith("/") or text.endswith("/") or "//" in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a ZooKeeper chroot: it must look like /kafka (leading slash, no trailing slash)")
    return text


def host_port_list(text: str) -> str:
    """host:port[,host:port...] — checked here so a typo fails before anything starts."""
    for item in text.split(","):
        host, sep, p = item.strip().rpartition(":")
        if not sep or not host or not p.isdigit() or not 0 < int(p) < 65536:
            raise argparse.ArgumentTypeError(f"{item!r} in {text!r} is not host:port")
    return text


def addresses(text: str) -> list[tuple[str, int]]:
    """Pure: a host_port_list as (host, port) pairs."""
    return [(host, int(port)) for host, _, port in (a.strip().rpartition(":") for a in text.split(",") if a.strip())]


def zk_connect(text: str) -> tuple[str, str]:
    """``host:port[,host:port][/chroot]`` -> (hosts, chroot)."""
    hosts, slash, rest = text.partition("/")
    try:
        return host_port_list(hosts), chroot(slash + rest)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT[,HOST:PORT][/chroot]: {e}") from None


def cluster_name(text: str) -> str:
    if not _CLUSTER.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a cluster name: use letters, digits, '.', '_' or '-' (no '/')")
    return text


def topic_name(text: str) -> str:
    if not _TOPIC.fullmatch(text) or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Kafka topic name: use up to 249 letters, digits, "
                                         "'.', '_' or '-'")
    return text
