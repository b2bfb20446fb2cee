"""A client of kmon's own HTTP endpoints (the stream app's API), with TLS and basic auth from a file in
the form Prometheus' scrape configs take them (``basic_auth`` and ``tls_config``, as its
``http_config``), so one set of credentials serves both.

::

    basic_auth: {username: oncall, password_file: /etc/kmon/api-password}   # or password: ...
    tls_config: {ca_file: ca.pem, cert_file: client.pem, key_file: client-key.pem,
                 insecure_skip_verify: false}
"""
from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kmon.web_config import read_yaml

TOP_KEYS = {"basic_auth", "tls_config"}
AUTH_KEYS = {"username", "password", "password_file"}
TLS_KEYS = {"ca_file", "cert_file", "key_file", "insecure_skip_verify"}


class CredentialsError(ValueError):
    """A credentials file kmon cannot use: one line naming the file and the key."""


class ApiError(RuntimeError):
    """The endpoint did not answer, or answered with an error: one line saying which and why."""


@dataclass(frozen=True)
class Credentials:
    source: Path | None = None
    username: str | None = None
    password: str | None = None
    tls: ssl.SSLContext | None = None

    def header(self) -> dict[str, str]:
        if self.username is None:
            return {}
        token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
        return {"Authorization": f"Basic {token}"}


def load_credentials(path: Path) -> Credentials:
    """The file at ``path``, checked whole: the password file reads, the certificates load."""
    where = f"credentials file {path}"
    raw = read_yaml(path, where, CredentialsError)
    _mapping(raw, TOP_KEYS, where)
    username = password = None
    if (auth := raw.get("basic_auth")) is not None:
        _mapping(auth, AUTH_KEYS, f"{where}: basic_auth")
        username = auth.get("username")
        if not isinstance(username, str) or not username:
            raise CredentialsError(f"{where}: basic_auth: username is required")
        if "password" in auth and "password_file" in auth:
            raise CredentialsError(f"{where}: basic_auth: password and password_file exclude each other")
        password = auth.get("password")
        if "password_file" in auth:
            secret = _file(auth["password_file"], path.parent, f"{where}: basic_auth: password_file")
            password = secret.read_text().rstrip("\n")
        if password is not None and not isinstance(password, str):
            raise CredentialsError(f"{where}: basic_auth: password must be text")
    context = None
    if (tls := raw.get("tls_config")) is not None:
        _mapping(tls, TLS_KEYS, f"{where}: tls_config")
        ca = _file(tls["ca_file"], path.parent, f"{where}: tls_config: ca_file") if tls.get("ca_file") else None
        cert = _file(tls["cert_file"], path.parent, f"{where}: tls_config: cert_file") if tls.get("cert_file") else None
        key = _file(tls["key_file"], path.parent, f"{where}: tls_config: key_file") if tls.get("key_file") else None
        if (cert is None) != (key is None):
            raise CredentialsError(f"{where}: tls_config: cert_file and key_file go together")
        try:
            context = ssl.create_default_context(cafile=str(ca) if ca else None)
            if cert is not None:
                context.load_cert_chain(str(cert), str(key))
        except (ssl.SSLError, OSError) as e:
            raise CredentialsError(f"{where}: tls_config: the CA, certificate or key does not load: {e}") from None
        if tls.get("insecure_skip_verify") is True:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    return Credentials(path, username, password, context)


def _mapping(raw: Any, keys: set[str], where: str) -> None:
    if not isinstance(raw, dict):
        raise CredentialsError(f"{where}: a mapping of {', '.join(sorted(keys))} expected")
    unknown = sorted(str(k) for k in raw if k not in keys)
    if unknown:
        raise CredentialsError(f"{where}: unknown key {unknown[0]} (known: {', '.join(sorted(keys))})")


def _file(value: Any, base: Path, where: str) -> Path:
    p = Path(str(value))
    p = p if p.is_absolute() else base / p
    if not p.is_file():
        raise CredentialsError(f"{where}: no such file {p}")
    return p


class ApiClient:
    """GETs of JSON under one base URL (e.g. http://127.0.0.1:9308), with the credentials given."""

    def __init__(self, base_url: str, credentials: Credentials | None = None, timeout_s: float = 30.0):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ApiError(f"{base_url!r} is not an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self._credentials = credentials or Credentials()
        self._timeout = timeout_s

    def get(self, path: str, **params: Any) -> Any:
        given = {k: str(v) for k, v in params.items() if v is not None}
        url = self.base_url + path + (f"?{urllib.parse.urlencode(given)}" if given else "")
        request = urllib.request.Request(url, headers=self._credentials.header())
        context = self._credentials.tls
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=context) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            said = e.read().decode(errors="replace").strip()
            raise ApiError(f"{url}: {e.code} {said or e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            why = getattr(e, "reason", e)
            raise ApiError(f"kmon's API at {self.base_url} does not answer ({why}): is the stream app running "
                           "there (kmon run, or kmon stream)?") from None
        except ValueError as e:
            raise ApiError(f"{url}: not JSON ({e}): is {self.base_url} kmon's stream app?") from None
