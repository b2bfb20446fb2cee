"""Security settings of kmon's clients, written the way Kafka users already write them.

Kafka: one client properties file per cluster role (the kind the Kafka tools take as
``--command-config``), plus environment overrides ``KMON_<ROLE>_KAFKA_<KEY>`` (key in
upper case, dots as underscores: ``KMON_MONITORED_KAFKA_SASL_JAAS_CONFIG``). Spark's Kafka
source is a Java client and gets the properties as they are (``kafka.``-prefixed);
kmon's librdkafka clients (collectors, publisher) get them translated.

ZooKeeper: Kafka's ZooKeeper client properties (``zookeeper.ssl.*``), plus
``zookeeper.sasl.jaas.config`` (the JAAS ``Client`` section Kafka reads from a file) and
``zookeeper.auth`` (``digest:user:password``, what zkCli's addauth takes), turned into
kazoo's arguments.

Values of secret keys never leave this module in a message: errors name keys and files.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

ROLES = ("monitored", "events")

# Java client keys librdkafka knows by the same name
_SAME_NAME = frozenset({"security.protocol", "sasl.mechanism", "sasl.kerberos.service.name",
                        "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "client.id",
                        "ssl.cipher.suites", "ssl.key.password"})
# Java keys whose meaning the translation below carries (or that librdkafka has no use for)
_CONSUMED = frozenset({"sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type",
                       "ssl.truststore.certificates", "ssl.truststore.password", "ssl.keystore.location",
                       "ssl.keystore.type", "ssl.keystore.password", "ssl.keystore.key",
                       "ssl.keystore.certificate.chain", "ssl.endpoint.identification.algorithm",
                       "ssl.protocol", "ssl.enabled.protocols"})
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ClientConfigError(ValueError):
    """A client setting kmon cannot use; the message names the file or variable and the key."""


# ------------------------------------------------------------------ .properties files

def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file: ``key=value``, ``key: value`` or ``key value``; ``#``/``!``
    comments; a trailing backslash continues the line; ``\\`` escapes."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ClientConfigError(f"cannot read client properties {path}: {e.strerror or e}") from None
    out: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if _continues(stripped):
            logical += stripped[:-1]
            continue
        logical += stripped
        key, value = _split(logical)
        out[key] = value
        logical = ""
    if logical:
        key, value = _split(logical)
        out[key] = value
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str) -> tuple[str, str]:
    match = re.match(r"((?:[^\s:=\\]|\\.)+)\s*[:=]?\s*(.*)$", line, re.S)
    assert match  # a non-blank line always has a first character
    return _unescape(match.group(1)), _unescape(match.group(2))


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def env_overrides(prefix: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``<prefix>SASL_JAAS_CONFIG=...`` -> ``{"sasl.jaas.config": ...}`` (Kafka's keys have no underscores)."""
    return {name[len(prefix):].lower().replace("_", "."): value
            for name, value in environ.items() if name.startswith(prefix) and len(name) > len(prefix)}


# ------------------------------------------------------------------ JAAS

@dataclass(frozen=True)
class JaasLogin:
    module: str                     # e.g. org.apache.kafka.common.security.scram.ScramLoginModule
    options: Mapping[str, str]

    @property
    def short_module(self) -> str:
        return self.module.rsplit(".", 1)[-1]


def parse_jaas(text: str, where: str) -> JaasLogin:
    """One login module entry: ``<module> required key="value" ...;``."""
    match = re.fullmatch(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*", text, re.S)
    if not match:
        raise ClientConfigError(f"{where}: not a JAAS login entry (expected '<LoginModule> required key=\"value\" ...;')")
    rest = match.group(3)
    options = {}
    for m in re.finditer(r'\s*([\w.]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s;"]+)', rest):
        options[m.group(1)] = re.sub(r"\\(.)", r"\1", m.group(3)) if m.group(3) is not None else m.group(2)
    leftover = re.sub(r'\s*([\w.]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s;"]+)', "", rest).strip()
    if leftover:
        raise ClientConfigError(f"{where}: cannot read the JAAS options near {leftover[:1]!r} "
                                "(each option is key=\"value\")")
    return JaasLogin(match.group(1), options)


# ------------------------------------------------------------------ Kafka

@dataclass(frozen=True)
class KafkaClientProperties:
    """The Java client properties of one cluster role."""
    role: str                                   # monitored | events: named in every error
    properties: Mapping[str, str] = field(default_factory=dict)
    source: str = "defaults"                    # the file and/or variables they came from

    @classmethod
    def load(cls, role: str, path: Path | None, environ: Mapping[str, str],
             inline: Mapping[str, str] | None = None) -> "KafkaClientProperties":
        """The file's properties, then ``inline`` ones (a config file's ``client:``), then the variables'."""
        assert role in ROLES
        prefix = f"KMON_{role.upper()}_KAFKA_"
        props = read_properties(path) if path is not None else {}
        props.update(inline or {})
        overrides = env_overrides(prefix, environ)
        props.update(overrides)
        sources = (([str(path)] if path is not None else []) + (["the config file's client:"] if inline else [])
                   + ([f"{prefix}*"] if overrides else []))
        loaded = cls(role, props, " and ".join(sources) or "defaults")
        loaded.librdkafka()   # every problem surfaces at start, not at the first connection
        return loaded

    @property
    def protocol(self) -> str:
        return self.properties.get("security.protocol", "PLAINTEXT").upper()

    def describe(self) -> str:
        """What a log line says about the connection (never a secret)."""
        if "SASL" not in self.protocol:
            return self.protocol
        login = self.properties.get("sasl.jaas.config")
        user = parse_jaas(login, self._where("sasl.jaas.config")).options.get("username") if login else None
        mechanism = self.properties.get("sasl.mechanism", "GSSAPI")
        return f"{self.protocol} {mechanism}" + (f" as {user!r}" if user else "")

    def spark_options(self) -> dict[str, str]:
        """For Spark's Kafka source (a Java client): the properties as written."""
        return {f"kafka.{k}": v for k, v in self.properties.items()}

    def unused_by_librdkafka(self) -> list[str]:
        return sorted(k for k in self.properties if k not in _SAME_NAME and k not in _CONSUMED)

    def librdkafka(self) -> dict[str, str]:
        """The same settings for librdkafka (confluent-kafka): names differ, and SASL
        credentials come out of the JAAS entry."""
        p = self.properties
        if self.protocol not in _PROTOCOLS:
            raise ClientConfigError(f"{self._where('security.protocol')}: {p['security.protocol']!r} is not one of "
                                    f"{', '.join(_PROTOCOLS)}")
        out = {k: v for k, v in p.items() if k in _SAME_NAME}
        if "security.protocol" in out:
            out["security.protocol"] = self.protocol
        if "sasl.jaas.config" in p:
            out.update(self._sasl(parse_jaas(p["sasl.jaas.config"], self._where("sasl.jaas.config"))))
        out.update(self._truststore())
        out.update(self._keystore())
        algorithm = p.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            out["ssl.endpoint.identification.algorithm"] = algorithm.lower() or "none"
        return out

    def _where(self, key: str) -> str:
        return f"{self.role} cluster client property {key} (from {self.source})"

    def _sasl(self, login: JaasLogin) -> dict[str, str]:
        if login.short_module in ("PlainLoginModule", "ScramLoginModule"):
            missing = [k for k in ("username", "password") if k not in login.options]
            if missing:
                raise ClientConfigError(f"{self._where('sasl.jaas.config')}: {login.short_module} needs "
                                        f"{' and '.join(missing)}")
            return {"sasl.username": login.options["username"], "sasl.password": login.options["password"]}
        if login.short_module == "Krb5LoginModule":
            out = {}
            if "keyTab" in login.options:
                out["sasl.kerberos.keytab"] = login.options["keyTab"]
            if "principal" in login.options:
                out["sasl.kerberos.principal"] = login.options["principal"]
            return out
        raise ClientConfigError(f"{self._where('sasl.jaas.config')}: login module {login.module} is not supported "
                                "by kmon's librdkafka clients (PLAIN, SCRAM and Kerberos are)")

    def _truststore(self) -> dict[str, str]:
        p = self.properties
        if "ssl.truststore.certificates" in p:
            return {"ssl.ca.pem": p["ssl.truststore.certificates"]}
        if "ssl.truststore.location" not in p:
            return {}
        kind = p.get("ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            raise ClientConfigError(
                f"{self._where('ssl.truststore.location')}: kmon's librdkafka clients cannot read a {kind} "
                "truststore; export its CA certificates as PEM (keytool -exportcert -rfc) and set "
                "ssl.truststore.type=PEM")
        return {"ssl.ca.location": p["ssl.truststore.location"]}

    def _keystore(self) -> dict[str, str]:
        p = self.properties
        if "ssl.keystore.key" in p or "ssl.keystore.certificate.chain" in p:
            return {"ssl.key.pem": p.get("ssl.keystore.key", ""),
                    "ssl.certificate.pem": p.get("ssl.keystore.certificate.chain", "")}
        if "ssl.keystore.location" not in p:
            return {}
        kind = p.get("ssl.keystore.type", "JKS").upper()
        location = p["ssl.keystore.location"]
        if kind == "PKCS12":
            out = {"ssl.keystore.location": location}
            if "ssl.keystore.password" in p:
                out["ssl.keystore.password"] = p["ssl.keystore.password"]
            return out
        if kind == "PEM":   # the key and its certificate chain in one file
            return {"ssl.key.location": location, "ssl.certificate.location": location}
        raise ClientConfigError(f"{self._where('ssl.keystore.location')}: kmon's librdkafka clients cannot read "
                                f"a {kind} keystore; use PKCS12 or PEM (ssl.keystore.type)")


# ------------------------------------------------------------------ ZooKeeper

ZK_ENV_PREFIX = "KMON_ZK_CLIENT_"


def sasl_login(sasl_options: Mapping[str, str]) -> str:
    """How kazoo's ``sasl_options`` log in, for messages (never a secret)."""
    user = sasl_options.get("username") or sasl_options.get("principal")
    return f"SASL {sasl_options['mechanism']}" + (f" as {user!r}" if user else "")


@dataclass(frozen=True)
class ZooKeeperClientProperties:
    properties: Mapping[str, str] = field(default_factory=dict)
    source: str = "defaults"

    @classmethod
    def load(cls, path: Path | None, environ: Mapping[str, str]) -> "ZooKeeperClientProperties":
        props = read_properties(path) if path is not None else {}
        # KMON_ZK_CLIENT_ZOOKEEPER_SSL_CLIENT_ENABLE=true -> zookeeper.ssl.client.enable
        overrides = env_overrides(ZK_ENV_PREFIX, environ)
        props.update(overrides)
        sources = ([str(path)] if path is not None else []) + ([f"{ZK_ENV_PREFIX}*"] if overrides else [])
        loaded = cls(props, " and ".join(sources) or "defaults")
        loaded.kazoo()
        return loaded

    def _where(self, key: str) -> str:
        return f"ZooKeeper client property {key} (from {self.source})"

    def describe(self) -> str:
        parts = ["TLS" if self._tls() else "plaintext"]
        if "zookeeper.sasl.jaas.config" in self.properties:
            parts.append(sasl_login(self._sasl()))
        if "zookeeper.auth" in self.properties:
            parts.append(f"auth {self.properties['zookeeper.auth'].split(':', 1)[0]}")
        return ", ".join(parts)

    def _tls(self) -> bool:
        return self.properties.get("zookeeper.ssl.client.enable", "false").lower() == "true"

    def kazoo(self) -> dict[str, Any]:
        """Keyword arguments of KazooClient."""
        p = self.properties
        out: dict[str, Any] = {}
        if self._tls():
            out["use_ssl"] = True
            for key, arg in (("zookeeper.ssl.truststore.location", "ca"),
                             ("zookeeper.ssl.keystore.location", "certfile")):
                if key in p:
                    kind = p.get(key.replace("location", "type"), "PEM").upper()
                    if kind != "PEM":
                        raise ClientConfigError(f"{self._where(key)}: kmon's ZooKeeper client reads PEM files only, "
                                                f"not {kind}")
                    out[arg] = p[key]
            if "certfile" in out:
                out["keyfile"] = out["certfile"]   # the key and its certificate in one PEM file
                if "zookeeper.ssl.keystore.password" in p:
                    out["keyfile_password"] = p["zookeeper.ssl.keystore.password"]
            out["verify_certs"] = p.get("zookeeper.ssl.endpoint.identification.enable", "true").lower() == "true"
        if "zookeeper.sasl.jaas.config" in p:
            out["sasl_options"] = self._sasl()
        if "zookeeper.auth" in p:
            scheme, sep, credential = p["zookeeper.auth"].partition(":")
            if not sep or not scheme or not credential:
                raise ClientConfigError(f"{self._where('zookeeper.auth')}: expected <scheme>:<credential>, "
                                        "e.g. digest:user:password")
            out["auth_data"] = [(scheme, credential)]
        return out

    def _sasl(self) -> dict[str, str]:
        key = "zookeeper.sasl.jaas.config"
        login = parse_jaas(self.properties[key], self._where(key))
        if login.short_module == "DigestLoginModule":
            if not {"username", "password"} <= set(login.options):
                raise ClientConfigError(f"{self._where(key)}: DigestLoginModule needs username and password")
            return {"mechanism": "DIGEST-MD5", "username": login.options["username"],
                    "password": login.options["password"]}
        if login.short_module == "Krb5LoginModule":
            principal = login.options.get("principal", "")
            return {"mechanism": "GSSAPI", "principal": principal}
        raise ClientConfigError(f"{self._where(key)}: login module {login.module} is not supported for "
                                "ZooKeeper (DigestLoginModule and Krb5LoginModule are)")
