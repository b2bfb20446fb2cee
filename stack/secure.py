"""The secured variant of the local stack: what a production cluster looks like to kmon.

The monitored brokers listen on SASL_SSL only (SCRAM-SHA-512 users ``admin`` for the
brokers themselves and ``kmon`` for the monitor; a CA and one broker certificate for
127.0.0.1 made at start with openssl), and ZooKeeper requires SASL (DIGEST-MD5) from every
client while the brokers write their znodes with ACLs (``zookeeper.set.acl``). kmon's own
events cluster stays plaintext: it is kmon's, not the user's.

A KRaft cluster (Kafka 4.x) has no ZooKeeper; its controller listener is secured too, and its
authorizer holds ACLs. The listener ``CONTROLLER`` is SASL_SSL, offering PLAIN (what the
controllers speak to each other: SCRAM credentials live in the metadata log, which a quorum still
electing its first leader cannot read) and SCRAM-SHA-512 (kmon's, once the quorum runs); the
listener ``CONTROLLER_MTLS`` is TLS with a client certificate required, kmon's being ``CN=kmon``.
The SCRAM users are formatted into the storage (``--add-scram``). ``admin`` is a super user;
kmon is granted on the cluster what it needs and no more: DESCRIBE (DescribeQuorum, ListGroups)
and CLUSTER_ACTION (fetching the metadata log as an observer).

kmon's own HTTP endpoints (the stream app's /metrics and API, each collector's /metrics and
/healthz) are served over TLS with the same CA's certificate for 127.0.0.1, behind basic auth
(user ``kmon``): ``web-config.yml`` is their ``--web-config-file``, ``web-client.yml`` the
credentials their clients take (Prometheus' scrape, ``kmon mcp --api-credentials-file``).

Everything lives in ``<stack dir>/secure/``: passwords (random per stack, files readable by
the owner only), certificates, JAAS files, and the client files kmon's commands take
(``--command-config``, ``--zk-client-config``, ``--web-config-file``, ``--api-credentials-file``).
"""
from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import yaml

from stack.configs import properties

MECHANISM = "SCRAM-SHA-512"
USERS = ("admin", "kmon")            # Kafka (SCRAM): the brokers' own user, the monitor's
ZK_USERS = ("kafka", "kmon")         # ZooKeeper (DIGEST-MD5)
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SUPER_USER = "User:admin"
# kmon's principals on a KRaft stack, by SASL login and by client certificate
KMON_PRINCIPALS = ("User:kmon", "User:CN=kmon")
MTLS_LISTENER = "CONTROLLER_MTLS"
WEB_USER = "kmon"                    # the user of kmon's own endpoints (its web config's basic auth)
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"


def jaas_entry(module: str, **options: str) -> str:
    return module + " required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


@dataclass(frozen=True)
class SecureFiles:
    root: Path

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    @property
    def broker_pem(self) -> Path:
        return self.root / "broker.pem"        # the broker's key and certificate chain

    @property
    def zk_server_jaas(self) -> Path:
        return self.root / "zookeeper-jaas.conf"

    @property
    def broker_jaas(self) -> Path:
        return self.root / "broker-jaas.conf"    # the brokers' ZooKeeper login

    @property
    def kafka_client(self) -> Path:
        return self.root / "kmon-kafka.properties"

    @property
    def zk_client(self) -> Path:
        return self.root / "kmon-zookeeper.properties"

    @property
    def kmon_pem(self) -> Path:
        return self.root / "kmon.pem"          # kmon's client key and certificate chain (mTLS)

    @property
    def web_config(self) -> Path:
        return self.root / "web-config.yml"       # kmon's endpoints: TLS and basic auth (kmon.web_config)

    @property
    def web_client(self) -> Path:
        return self.root / "web-client.yml"       # their clients' credentials (kmon.http_client)

    @property
    def web_password(self) -> Path:
        return self.root / f"web-{WEB_USER}.password"   # where password("web", WEB_USER) keeps it

    @property
    def kafka_client_mtls(self) -> Path:
        return self.root / "kmon-kafka-mtls.properties"   # the controller listener by certificate

    def password(self, system: str, user: str) -> str:
        """A per-stack password, made on first use and kept in a file only its owner reads."""
        path = self.root / f"{system}-{user}.password"
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(18))
        return path.read_text()

    # ------------------------------------------------------------------ writing

    def write(self) -> None:
        """Certificates, JAAS files and kmon's client properties (idempotent: kept if present)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        if not self.broker_pem.exists():
            self._certificates()
        self.zk_server_jaas.write_text("Server {\n  " + jaas_entry(DIGEST_MODULE, **{
            f"user_{u}": self.password("zookeeper", u) for u in ZK_USERS}) + "\n};\n")
        self.broker_jaas.write_text("Client {\n  " + jaas_entry(
            DIGEST_MODULE, username="kafka", password=self.password("zookeeper", "kafka")) + "\n};\n")
        self.kafka_client.write_text(properties({
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas_entry(SCRAM_MODULE, username="kmon", password=self.password("kafka", "kmon")),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
        }))
        self.kafka_client_mtls.write_text(properties({
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.kmon_pem,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
        }))
        self.zk_client.write_text(properties({
            "zookeeper.sasl.jaas.config": jaas_entry(DIGEST_MODULE, username="kmon",
                                                     password=self.password("zookeeper", "kmon")),
        }))
        password = self.password("web", WEB_USER)   # written to web_password
        hashed = self.root / f"web-{WEB_USER}.bcrypt"   # bcrypt salts each hash: made once, kept
        if not hashed.exists():
            hashed.write_bytes(bcrypt.hashpw(password.encode(), bcrypt.gensalt()))
        self.web_config.write_text(yaml.safe_dump({
            "tls_server_config": {"cert_file": str(self.broker_pem), "key_file": str(self.broker_pem)},
            "basic_auth_users": {WEB_USER: hashed.read_text()}}))
        self.web_client.write_text(yaml.safe_dump({
            "basic_auth": {"username": WEB_USER, "password_file": str(self.web_password)},
            "tls_config": {"ca_file": str(self.ca)}}))
        for path in (self.kafka_client, self.kafka_client_mtls, self.zk_client, self.zk_server_jaas,
                     self.broker_jaas, self.web_config, self.web_client, hashed):
            path.chmod(0o600)

    def _certificates(self) -> None:
        ca_key = self.root / "ca.key"
        _openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", self.ca,
                  "-days", "30", "-subj", "/CN=kmon local stack CA"])
        self._signed("broker", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost", ca_key, self.broker_pem)
        self._signed("kmon", "/CN=kmon", "extendedKeyUsage=clientAuth", ca_key, self.kmon_pem)

    def _signed(self, name: str, subject: str, extension: str, ca_key: Path, pem: Path) -> None:
        """A key and a certificate for it signed by the stack's CA, both in ``pem`` with the chain."""
        key, csr, crt, ext = (self.root / f"{name}.{suffix}" for suffix in ("key", "csr", "crt", "ext"))
        ext.write_text(extension + "\n")
        _openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subject])
        _openssl(["x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
                  "-days", "30", "-extfile", ext])
        pem.write_text(key.read_text() + crt.read_text() + self.ca.read_text())
        pem.chmod(0o600)

    # ------------------------------------------------------------------ server settings

    def zookeeper_properties(self) -> dict[str, object]:
        return {
            "authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            # every client must log in: proves kmon's collector does
            "enforce.auth.enabled": "true",
            "enforce.auth.schemes": "sasl",
        }

    def broker_properties(self, port: int) -> dict[str, object]:
        listener = f"SASL_SSL://127.0.0.1:{port}"
        return {
            "listeners": listener,
            "advertised.listeners": listener,
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config":
                jaas_entry(SCRAM_MODULE, username="admin", password=self.password("kafka", "admin")),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.broker_pem,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "zookeeper.set.acl": "true",
        }

    def jvm_options(self, server_jaas: bool) -> list[str]:
        return [f"-Djava.security.auth.login.config={self.zk_server_jaas if server_jaas else self.broker_jaas}"]

    def kraft_properties(self, broker_port: int, controller_port: int, mtls_port: int) -> dict[str, object]:
        """A KRaft node's listeners, logins and authorizer (ports 0: the node has no such role)."""
        listeners = [f"{name}://127.0.0.1:{port}" for name, port in
                     (("SASL_SSL", broker_port), ("CONTROLLER", controller_port), (MTLS_LISTENER, mtls_port)) if port]
        admin = {"username": "admin", "password": self.password("kafka", "admin")}
        values: dict[str, object] = {
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": f"SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL,{MTLS_LISTENER}:SSL",
            # the first is the one brokers and voters use; the second is only for clients by certificate
            "controller.listener.names": f"CONTROLLER,{MTLS_LISTENER}" if controller_port else "CONTROLLER",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": f"PLAIN,{MECHANISM}",
            "listener.name.controller.plain.sasl.jaas.config":
                jaas_entry(PLAIN_MODULE, **admin, user_admin=admin["password"]),
            f"listener.name.controller.{MECHANISM.lower()}.sasl.jaas.config": jaas_entry(SCRAM_MODULE, **admin),
            f"listener.name.{MTLS_LISTENER.lower()}.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas_entry(SCRAM_MODULE, **admin),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.broker_pem,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": SUPER_USER,
            # what has no ACL (topics, groups) is open to the stack's users; the cluster is not, once
            # kmon's grants are its ACLs
            "allow.everyone.if.no.acl.found": "true",
        }
        if broker_port:
            values.update({
                "advertised.listeners": f"SASL_SSL://127.0.0.1:{broker_port}",
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.mechanism.inter.broker.protocol": MECHANISM,
            })
        return values

    def kraft_format_args(self) -> list[str]:
        """kafka-storage format's arguments that put every SCRAM user in the new cluster's metadata."""
        return [arg for user in USERS for arg in
                ("--add-scram", f"{MECHANISM}=[name={user},password={self.password('kafka', user)}]")]

    def admin_client(self) -> dict[str, str]:
        """librdkafka settings of the super user (the stack grants kmon's ACLs with them)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": "admin",
                "sasl.password": self.password("kafka", "admin"), "ssl.ca.location": str(self.ca)}

    def scram_users(self) -> list[tuple[str, str]]:
        """(user, the --add-config value of kafka-configs) for every SCRAM user."""
        return [(u, f"{MECHANISM}=[iterations=4096,password={self.password('kafka', u)}]") for u in USERS]


def _openssl(argv: list[object]) -> None:
    done = subprocess.run(["openssl", *map(str, argv)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {argv[0]} failed: {done.stderr.strip()}")
