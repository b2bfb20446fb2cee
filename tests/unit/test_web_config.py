"""The web config (issue 51 item 3): exporter-toolkit's format read with errors that name the file
and the key, and kmon's HTTP server behind TLS, mTLS and basic auth as real clients meet it."""
from __future__ import annotations

import base64
import http.client as http_client
import socket
import ssl
from pathlib import Path
from typing import Iterator

import bcrypt
import pytest

from kmon import http
from kmon.http_client import ApiClient, ApiError, CredentialsError, load_credentials
from kmon.web_config import BasicAuth, WebConfigError, load
from stack.secure import SecureFiles

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> SecureFiles:
    files = SecureFiles(tmp_path_factory.mktemp("web-certs"))
    files.write()   # a CA, a server certificate for 127.0.0.1 (broker.pem) and a client one (kmon.pem)
    return files


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, says", [
    ("tls_server_config: {cert_file: x}\n", "no such file"),
    ("tls_server_config: {}\n", "cert_file and key_file are both required"),
    ("basic_auth_users: {alice: plain}\n", "basic_auth_users: alice: not a bcrypt hash"),
    ("basic_auth_user: {}\n", "unknown key basic_auth_user"),
    ("[1, 2]\n", "a mapping of"),
    ("a: [\n", "not YAML"),
])
def test_a_wrong_web_config_is_an_error_naming_the_file_and_the_key(tmp_path: Path, text: str, says: str) -> None:
    path = _config(tmp_path, text)
    with pytest.raises(WebConfigError) as e:
        load(path)
    assert str(path) in str(e.value) and says in str(e.value)


def test_tls_settings_are_checked_against_each_other_and_the_files_load(tmp_path: Path, certs: SecureFiles) -> None:
    pem = certs.broker_pem
    for text, says in [
        (f"tls_server_config: {{cert_file: {pem}, key_file: {pem}, client_auth_type: Sometimes}}\n",
         "client_auth_type: 'Sometimes' is not one of"),
        (f"tls_server_config: {{cert_file: {pem}, key_file: {pem}, client_auth_type: RequireAndVerifyClientCert}}\n",
         "needs client_ca_file"),
        (f"tls_server_config: {{cert_file: {pem}, key_file: {pem}, min_version: TLS9}}\n", "min_version: 'TLS9'"),
        (f"tls_server_config: {{cert_file: {certs.ca}, key_file: {certs.ca}}}\n", "does not load"),
    ]:
        with pytest.raises(WebConfigError, match=says):
            load(_config(tmp_path, text))
    assert load(_config(tmp_path, "")).tls is None   # an empty file: plain HTTP, no users
    # paths relative to the file
    (tmp_path / "server.pem").write_bytes(pem.read_bytes())
    assert load(_config(tmp_path, "tls_server_config: {cert_file: server.pem, key_file: server.pem}\n")).scheme == "https"


def test_basic_auth_checks_the_hash_and_remembers_only_passwords_it_found_right(monkeypatch) -> None:
    auth = BasicAuth({"alice": HASH.encode()})
    checks: list[bytes] = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda pw, h: checks.append(pw) or real(pw, h))

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    assert auth.allows(header("alice", "s3cret")) and auth.allows(header("alice", "s3cret"))
    assert checks == [b"s3cret"]   # the second time from memory
    assert not auth.allows(header("alice", "wrong")) and not auth.allows(header("alice", "wrong"))
    assert checks == [b"s3cret", b"wrong", b"wrong"]   # a wrong one is checked every time
    assert not auth.allows(header("bob", "s3cret"))
    assert not auth.allows(None) and not auth.allows("Bearer x") and not auth.allows("Basic !!!")
    assert not auth.allows(header("alice", "x" * 100))   # past bcrypt's 72 bytes
    assert BasicAuth({}).allows(None)   # no users: open


@pytest.fixture
def served(tmp_path: Path, certs: SecureFiles) -> Iterator[callable]:
    servers = []

    def serve(text: str) -> int:
        server = http.serve("127.0.0.1", 0, {"/metrics": lambda request: (200, http.TEXT, b"up 1\n")}, "test-web",
                            load(_config(tmp_path, text)))
        servers.append(server)
        return server.server_address[1]
    yield serve
    for s in servers:
        http.stop(s)


def _get(port: int, context: ssl.SSLContext | None, auth: tuple[str, str] | None = None) -> tuple[int, bytes, dict]:
    conn = (http_client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10) if context
            else http_client.HTTPConnection("127.0.0.1", port, timeout=10))
    headers = {"Authorization": "Basic " + base64.b64encode(":".join(auth).encode()).decode()} if auth else {}
    try:
        conn.request("GET", "/metrics", headers=headers)
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()


def test_tls_and_basic_auth_a_wrong_or_missing_password_is_a_401_and_plain_http_is_told(
        served, certs: SecureFiles) -> None:
    port = served(f"tls_server_config: {{cert_file: {certs.broker_pem}, key_file: {certs.broker_pem}}}\n"
                  f"basic_auth_users: {{prometheus: '{HASH}'}}\n")
    client = ssl.create_default_context(cafile=certs.ca)
    assert _get(port, client, ("prometheus", "s3cret"))[:2] == (200, b"up 1\n")
    status, _, headers = _get(port, client, ("prometheus", "nope"))
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="kmon"'
    assert _get(port, client)[0] == 401
    status, body, _ = _get(port, None)   # plain HTTP to the TLS port
    assert status == 400 and b"HTTP request to an HTTPS server" in body
    with pytest.raises(ssl.SSLCertVerificationError):   # a client that does not trust the server's CA
        _get(port, ssl.create_default_context())
    # a client that connects and goes away, or sends garbage, costs nothing more
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"\x16\x03\x01garbage")
    assert _get(port, client, ("prometheus", "s3cret"))[0] == 200


def test_mtls_wants_a_certificate_of_the_client_ca_and_one_of_the_allowed_names(served, certs: SecureFiles) -> None:
    tls = (f"tls_server_config: {{cert_file: {certs.broker_pem}, key_file: {certs.broker_pem}, "
           f"client_auth_type: RequireAndVerifyClientCert, client_ca_file: {certs.ca}")
    port = served(tls + "}\n")
    anonymous = ssl.create_default_context(cafile=certs.ca)
    with pytest.raises((ssl.SSLError, ConnectionError, http_client.RemoteDisconnected)):
        _get(port, anonymous)
    known = ssl.create_default_context(cafile=certs.ca)
    known.load_cert_chain(certs.kmon_pem)
    assert _get(port, known)[0] == 200
    # kmon.pem names no SAN: a server that allows only some names refuses it
    port = served(tls + ", client_allowed_sans: [prometheus.example]}\n")
    with pytest.raises((ssl.SSLError, ConnectionError, http_client.RemoteDisconnected)):
        _get(port, known)


def test_an_api_client_reaches_a_secured_server_with_its_credentials_file(tmp_path: Path, certs: SecureFiles) -> None:
    """kmon mcp's credentials (kmon.http_client): Prometheus' basic_auth and tls_config, against kmon's own
    server behind mTLS and basic auth."""
    pem = certs.broker_pem
    web = _config(tmp_path, f"tls_server_config: {{cert_file: {pem}, key_file: {pem}, "
                            f"client_auth_type: RequireAndVerifyClientCert, client_ca_file: {certs.ca}}}\n"
                            f"basic_auth_users: {{alice: '{HASH}'}}\n")
    server = http.serve("127.0.0.1", 0, {"/api/v1/health": lambda request: (200, "application/json", b'{"ok": 1}')},
                        "test-web", load(web))
    url = f"https://127.0.0.1:{server.server_address[1]}"
    (tmp_path / "password").write_text("s3cret\n")

    def client(text: str) -> ApiClient:
        path = tmp_path / "creds.yml"
        path.write_text(text)
        return ApiClient(url, load_credentials(path))
    try:
        right = (f"basic_auth: {{username: alice, password_file: password}}\n"
                 f"tls_config: {{ca_file: {certs.ca}, cert_file: {certs.kmon_pem}, key_file: {certs.kmon_pem}}}\n")
        assert client(right).get("/api/v1/health") == {"ok": 1}
        wrong = right.replace("password_file: password", "password: nope")
        with pytest.raises(ApiError, match="401 Unauthorized"):
            client(wrong).get("/api/v1/health")
        no_certificate = right.split("tls_config")[0] + f"tls_config: {{ca_file: {certs.ca}}}\n"
        with pytest.raises(ApiError, match="does not answer"):
            client(no_certificate).get("/api/v1/health")
        with pytest.raises(ApiError, match="does not answer"):   # the server's CA not trusted
            client(right.split("tls_config")[0]).get("/api/v1/health")
    finally:
        http.stop(server)
    for text, says in [("basic_auth: {password: x}\n", "basic_auth: username is required"),
                       ("basic_auth: {username: a, password: x, password_file: y}\n", "exclude each other"),
                       ("tls_config: {cert_file: nothing.pem, key_file: nothing.pem}\n", "tls_config: cert_file: no such"),
                       (f"tls_config: {{cert_file: {certs.kmon_pem}}}\n", "cert_file and key_file go together"),
                       ("tls_config: {server_name: x}\n", "unknown key server_name")]:
        path = tmp_path / "bad.yml"
        path.write_text(text)
        with pytest.raises(CredentialsError) as e:
            load_credentials(path)
        assert str(e.value).startswith(f"credentials file {path}: ") and says in str(e.value)
