"""One connection to a controller listener: TCP, TLS (mTLS too), SASL PLAIN/SCRAM, requests in turn.

kmon's other clients are librdkafka's, which has no Fetch of the metadata log, no FetchSnapshot and
no DescribeQuorum; this is the small client those three need. It takes the same client settings
(kmon.client_config's librdkafka translation of a Kafka client properties file), so the controller
listener is configured as the brokers are. An error says which listener and what is missing.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Mapping

from collectors.kafka_encoding import MalformedRecord, Reader
from collectors.kraft import wire


class ControllerError(ConnectionError):
    """The listener cannot be used as configured (authentication, authorization, versions); not
    worth retrying at once. The message names the listener and what is missing."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ca_file: str | None = None
    ca_pem: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_librdkafka(cls, conf: Mapping[str, str]) -> "ClientSecurity":
        """From kmon.client_config.KafkaClientProperties.librdkafka()'s settings."""
        protocol = conf.get("security.protocol", "PLAINTEXT").upper()
        mechanism = conf.get("sasl.mechanism", "GSSAPI" if protocol.startswith("SASL") else None)
        if protocol.startswith("SASL") and mechanism not in _SCRAM and mechanism != "PLAIN":
            raise ControllerError(f"sasl.mechanism {mechanism}: the KRaft collector speaks PLAIN, SCRAM-SHA-256 "
                                  "and SCRAM-SHA-512 to the controller listener")
        if "ssl.keystore.location" in conf:
            raise ControllerError("a PKCS12 keystore (ssl.keystore.location): give the KRaft collector the key "
                                  "and certificate as PEM (ssl.keystore.type=PEM)")
        return cls(protocol=protocol, ca_file=conf.get("ssl.ca.location"), ca_pem=conf.get("ssl.ca.pem"),
                   cert_file=conf.get("ssl.certificate.location"), key_file=conf.get("ssl.key.location"),
                   key_password=conf.get("ssl.key.password"),
                   check_hostname=conf.get("ssl.endpoint.identification.algorithm", "https") != "none",
                   mechanism=mechanism, username=conf.get("sasl.username"), password=conf.get("sasl.password"))

    def tls_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_pem)
        ctx.check_hostname = self.check_hostname
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file, self.key_password)
        return ctx


_SCRAM = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
_HEADER = struct.Struct(">i")


class Connection:
    """Requests one at a time to one controller; ``close`` it when done (or use ``with``)."""

    def __init__(self, host: str, port: int, security: ClientSecurity, timeout_s: float, client_version: str,
                 role: str = "controller listener") -> None:
        """``role``: what the listener is to the user, in errors (a broker's, when kmon asks a broker)."""
        self.host, self.port = host, port
        self.address = f"{host}:{port}"
        self.listener = f"{role} {self.address}"
        self._correlation = 0
        self._sock: socket.socket | None = None
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise ConnectionError(f"{self.listener}: {e.strerror or e}") from None
        self._sock = sock
        try:
            if security.protocol in ("SSL", "SASL_SSL"):
                self._sock = security.tls_context().wrap_socket(sock, server_hostname=host)
            if security.protocol.startswith("SASL"):
                self._authenticate(security)
            self.versions = self._api_versions(client_version)
        except ControllerError:   # an OSError too, and already worded
            self.close()
            raise
        except ssl.SSLError as e:
            self.close()
            raise ControllerError(f"{self.listener}: TLS failed ({e.reason or e}); check "
                                  "ssl.truststore.* / ssl.keystore.* in the client properties") from None
        except OSError as e:
            self.close()
            raise ConnectionError(f"{self.listener}: {e.strerror or e}") from None
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def settimeout(self, seconds: float) -> None:
        assert self._sock is not None
        self._sock.settimeout(seconds)

    # ------------------------------------------------------------------ requests
    def call(self, api_key: int, version: int, body: bytes, flexible: bool = True,
             flexible_response_header: bool | None = None) -> Reader:
        """Send one request, return its response body. Raises ConnectionError (OSError) on I/O."""
        if self._sock is None:
            raise ConnectionError(f"{self.listener}: closed")
        self._correlation += 1
        self._sock.sendall(wire.request(api_key, version, self._correlation, "kmon-kraft", body, flexible))
        size = _HEADER.unpack(self._read(4))[0]
        payload = self._read(size)
        header_flexible = flexible if flexible_response_header is None else flexible_response_header
        try:
            return wire.response_body(payload, self._correlation, header_flexible, flexible,
                                      f"{wire.API_NAMES.get(api_key, f'api key {api_key}')} v{version} response")
        except MalformedRecord as e:
            raise ConnectionError(f"{self.listener}: {e}") from None

    def _read(self, n: int) -> bytes:
        assert self._sock is not None
        chunks, left = [], n
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError(f"{self.listener} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _api_versions(self, client_version: str) -> dict[int, tuple[int, int]]:
        body = wire.api_versions_request(client_version)
        r = self.call(wire.API_API_VERSIONS, wire.API_VERSIONS_VERSION, body, flexible=True,
                      flexible_response_header=False)   # ApiVersions answers with header v0, always
        error, versions = wire.parse_api_versions(r)
        if error:
            raise ControllerError(f"{self.listener}: ApiVersions answered "
                                  f"{wire.error_name(error)}")
        return versions

    def supports(self, api_key: int, version: int) -> bool:
        lo, hi = self.versions.get(api_key, (1, 0))
        return lo <= version <= hi

    # ------------------------------------------------------------------ SASL
    def _authenticate(self, s: ClientSecurity) -> None:
        if not s.username or s.password is None:
            raise ControllerError(f"{self.listener}: {s.protocol} needs a username and password "
                                  "(sasl.jaas.config)")
        error, mechanisms = wire.parse_sasl_handshake(
            self.call(wire.API_SASL_HANDSHAKE, 1, wire.sasl_handshake_request(s.mechanism or ""), flexible=False))
        if error:
            raise ControllerError(f"{self.listener} does not enable SASL mechanism "
                                  f"{s.mechanism} (it offers {', '.join(mechanisms) or 'none'})")
        if s.mechanism == "PLAIN":
            self._sasl_step(f"\0{s.username}\0{s.password}".encode())
            return
        self._scram(s.mechanism or "", s.username, s.password)

    def _sasl_step(self, auth: bytes) -> bytes:
        error, message, reply = wire.parse_sasl_authenticate(
            self.call(wire.API_SASL_AUTHENTICATE, 2, wire.sasl_authenticate_request(auth)))
        if error:
            raise ControllerError(f"{self.listener}: authentication failed "
                                  f"({message or wire.error_name(error)}); check sasl.jaas.config")
        return reply

    def _scram(self, mechanism: str, user: str, password: str) -> None:
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = scram_client_first(user, nonce)
        server_first = self._sasl_step(f"n,,{first_bare}".encode()).decode()
        try:
            final, expected = scram_client_final(mechanism, password, first_bare, nonce, server_first)
        except ValueError as e:
            raise ControllerError(f"{self.listener}: {e}") from None
        if self._sasl_step(final.encode()).decode() != expected:
            raise ControllerError(f"{self.listener}: the server's SCRAM signature is wrong")


def scram_client_first(user: str, nonce: str) -> str:
    """The client-first-message-bare of RFC 5802."""
    return f"n={user.replace('=', '=3D').replace(',', '=2C')},r={nonce}"


def scram_client_final(mechanism: str, password: str, first_bare: str, nonce: str,
                       server_first: str) -> tuple[str, str]:
    """RFC 5802's client-final-message, and the server-final-message a server knowing the password sends."""
    digest = _SCRAM[mechanism]
    fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
    if not fields.get("r", "").startswith(nonce) or "s" not in fields or not fields.get("i", "").isdigit():
        raise ValueError(f"not a SCRAM server-first-message of this exchange: {server_first[:80]!r}")
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    final_bare = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    signature = hmac.new(digest(client_key).digest(), auth_message, digest).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = base64.b64encode(hmac.new(server_key, auth_message, digest).digest()).decode()
    return f"{final_bare},p={proof}", f"v={expected}"
