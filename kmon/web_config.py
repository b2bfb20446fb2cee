"""The web configuration file of every HTTP surface kmon serves (--web-config-file), in the format
the Prometheus exporters share (prometheus/exporter-toolkit's web configuration):

    tls_server_config:
      cert_file: server.pem            # paths relative to this file
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # mTLS; default NoClientCert
      client_ca_file: ca.pem
      min_version: TLS12
    basic_auth_users:
      prometheus: $2y$10$...           # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')

Read once at start; every mistake is an error that names the file and the key.
"""
from __future__ import annotations

import hashlib
import hmac
import ssl
import threading
from base64 import b64decode
from binascii import Error as Base64Error
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import bcrypt
import yaml

# exporter-toolkit's client_auth_type values -> what the TLS handshake asks of a client
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "RequestClientCert": ssl.CERT_OPTIONAL,
               "RequireAnyClientCert": ssl.CERT_REQUIRED, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
            "TLS13": ssl.TLSVersion.TLSv1_3}
TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config"}
# keys of the format that change nothing here; accepted so that one file serves kmon and the exporters
IGNORED_TLS_KEYS = {"cipher_suites", "curve_preferences", "prefer_server_cipher_suites"}
TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version",
            "client_allowed_sans", *IGNORED_TLS_KEYS}
AUTH_CACHE = 1024   # passwords checked right, remembered: bcrypt takes ~0.1 s a check, scrapes come every few


class WebConfigError(ValueError):
    """The web configuration file is wrong; the message names the file and the key."""


@dataclass(frozen=True)
class TlsServer:
    cert_file: Path
    key_file: Path
    client_auth: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    max_version: str | None = None
    client_allowed_sans: tuple[str, ...] = ()

    def context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = VERSIONS[self.min_version]
        if self.max_version:
            ctx.maximum_version = VERSIONS[self.max_version]
        ctx.load_cert_chain(self.cert_file, self.key_file)
        ctx.verify_mode = CLIENT_AUTH[self.client_auth]
        if self.client_ca_file is not None:
            ctx.load_verify_locations(self.client_ca_file)
        elif self.client_auth in ("RequestClientCert", "RequireAnyClientCert"):
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)   # Python verifies whatever it asks for
        return ctx


@dataclass(frozen=True)
class WebConfig:
    source: Path | None = None
    tls: TlsServer | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)   # user -> bcrypt hash

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def describe(self) -> str:
        """What the log says of it at start: '' for plain HTTP, open to all."""
        said = ([f"client certificates {self.tls.client_auth}"] if self.tls and self.tls.client_auth != "NoClientCert"
                else []) + ([f"basic auth ({len(self.users)} users)"] if self.users else [])
        return f" ({', '.join(said)}; {self.source})" if said or self.tls else ""


class BasicAuth:
    """Checks an Authorization header against the users' hashes; remembers the passwords it found right
    (by their SHA-256, never the password) so that a scrape every few seconds does not pay bcrypt each time."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self.users = dict(users)
        self._right: set[bytes] = set()
        self._lock = threading.Lock()

    def allows(self, header: str | None) -> bool:
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, sep, password = b64decode(header[6:], validate=True).decode().partition(":")
        except (Base64Error, UnicodeDecodeError):
            return False
        stored = self.users.get(user)
        if not sep or stored is None:
            return False
        remembered = hashlib.sha256(stored + b"\0" + password.encode()).digest()
        with self._lock:
            if any(hmac.compare_digest(remembered, r) for r in self._right):
                return True
        try:
            if not bcrypt.checkpw(password.encode(), stored):
                return False
        except ValueError:   # longer than bcrypt's 72 bytes: no hash can match it
            return False
        with self._lock:
            if len(self._right) >= AUTH_CACHE:
                self._right.clear()
            self._right.add(remembered)
        return True


def read_yaml(path: Path, where: str, error: type[ValueError]) -> Any:
    """The YAML document at ``path`` (an empty file: {}); ``error`` naming ``where`` when it does not read."""
    try:
        return yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise error(f"{where}: cannot read it: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise error(f"{where}: not YAML: {' '.join(str(e).split())}") from None


def load(path: Path) -> WebConfig:
    """The file at ``path``, checked whole: certificates and keys load, hashes are bcrypt's."""
    where = f"web config {path}"
    raw = read_yaml(path, where, WebConfigError)
    if not isinstance(raw, dict):
        raise WebConfigError(f"{where}: a mapping of {', '.join(sorted(TOP_KEYS))} expected")
    _known(raw, TOP_KEYS, where)
    tls = _tls(raw.get("tls_server_config"), path.parent, f"{where}: tls_server_config")
    users = _users(raw.get("basic_auth_users"), f"{where}: basic_auth_users")
    config = WebConfig(path, tls, users)
    if tls is not None:
        try:
            tls.context()
        except (ssl.SSLError, OSError) as e:
            raise WebConfigError(f"{where}: tls_server_config: the certificate, key or client CA does not load: "
                                 f"{e}") from None
    return config


def _known(mapping: dict, keys: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in mapping if k not in keys)
    if unknown:
        raise WebConfigError(f"{where}: unknown key {unknown[0]} (known: {', '.join(sorted(keys))})")


def _tls(raw: Any, base: Path, where: str) -> TlsServer | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise WebConfigError(f"{where}: a mapping expected")
    _known(raw, TLS_KEYS, where)

    def file(key: str) -> Path | None:
        value = raw.get(key)
        if value in (None, ""):
            return None
        p = Path(str(value))
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise WebConfigError(f"{where}: {key}: no such file {p}")
        return p
    cert, key = file("cert_file"), file("key_file")
    if cert is None or key is None:
        raise WebConfigError(f"{where}: cert_file and key_file are both required")
    auth = raw.get("client_auth_type") or "NoClientCert"
    if auth not in CLIENT_AUTH:
        raise WebConfigError(f"{where}: client_auth_type: {auth!r} is not one of {', '.join(CLIENT_AUTH)}")
    ca = file("client_ca_file")
    if auth in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert") and ca is None:
        raise WebConfigError(f"{where}: client_auth_type {auth} needs client_ca_file")
    versions = {}
    for k in ("min_version", "max_version"):
        v = raw.get(k)
        if v is not None and v not in VERSIONS:
            raise WebConfigError(f"{where}: {k}: {v!r} is not one of {', '.join(VERSIONS)}")
        versions[k] = v
    sans = raw.get("client_allowed_sans") or []
    if not isinstance(sans, list) or not all(isinstance(s, str) for s in sans):
        raise WebConfigError(f"{where}: client_allowed_sans: a list of names expected")
    if sans and CLIENT_AUTH[auth] != ssl.CERT_REQUIRED:
        raise WebConfigError(f"{where}: client_allowed_sans needs client_auth_type RequireAndVerifyClientCert")
    return TlsServer(cert, key, auth, ca, versions["min_version"] or "TLS12", versions["max_version"], tuple(sans))


def _users(raw: Any, where: str) -> dict[str, bytes]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise WebConfigError(f"{where}: a mapping of user to bcrypt hash expected")
    users = {}
    for user, hashed in raw.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")) or len(hashed) != 60:
            raise WebConfigError(f"{where}: {user}: not a bcrypt hash (make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n', "
                                 "or python -c 'import bcrypt; print(bcrypt.hashpw(b\"secret\", bcrypt.gensalt()).decode())')")
        users[str(user)] = hashed.encode()
    return users
