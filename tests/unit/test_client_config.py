"""Client properties as Kafka users write them, turned into librdkafka, Spark and kazoo settings."""
from __future__ import annotations

from pathlib import Path

import pytest

from kmon.client_config import (ClientConfigError, KafkaClientProperties, ZooKeeperClientProperties, parse_jaas,
                                read_properties)

SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="kmon" '
         'password="s3cret";')


def write(tmp_path: Path, text: str, name: str = "client.properties") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_properties_file_syntax(tmp_path: Path) -> None:
    path = write(tmp_path, "# a comment\n! another\n\nsecurity.protocol=SASL_SSL\n"
                           "sasl.mechanism : SCRAM-SHA-512\nclient.id kmon\n"
                           "sasl.jaas.config=org.x.Module required \\\n    username=\"a\";\n"
                           "ssl.truststore.location=C:\\\\certs\\\\ca.pem\nkey\\=with\\:escapes=v\\u00e9\n")
    assert read_properties(path) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "client.id": "kmon",
        "sasl.jaas.config": 'org.x.Module required username="a";',
        "ssl.truststore.location": "C:\\certs\\ca.pem", "key=with:escapes": "vé"}


def test_a_missing_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="nope.properties"):
        read_properties(tmp_path / "nope.properties")


def test_scram_over_tls_for_librdkafka_and_spark(tmp_path: Path) -> None:
    path = write(tmp_path, f"security.protocol=sasl_ssl\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={SCRAM}\n"
                           "ssl.truststore.type=PEM\nssl.truststore.location=/etc/kmon/ca.pem\n"
                           "ssl.endpoint.identification.algorithm=\nlinger.ms=5\n")
    client = KafkaClientProperties.load("monitored", path, {})
    assert client.librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "kmon",
        "sasl.password": "s3cret", "ssl.ca.location": "/etc/kmon/ca.pem",
        "ssl.endpoint.identification.algorithm": "none"}
    assert client.spark_options()["kafka.sasl.jaas.config"] == SCRAM
    assert client.spark_options()["kafka.linger.ms"] == "5"     # Spark's Java client takes any property
    assert client.unused_by_librdkafka() == ["linger.ms"]
    assert client.describe() == "SASL_SSL SCRAM-SHA-512 as 'kmon'"


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    env = {"KMON_EVENTS_KAFKA_SASL_JAAS_CONFIG":
           'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
           "KMON_EVENTS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KMON_MONITORED_KAFKA_CLIENT_ID": "other role"}
    client = KafkaClientProperties.load("events", path, env)
    assert client.librdkafka() == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                   "sasl.username": "u", "sasl.password": "p"}
    assert "KMON_EVENTS_KAFKA_*" in client.source and str(path) in client.source


def test_a_config_files_inline_properties_go_over_its_file_and_under_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    inline = {"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config":
              'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'}
    client = KafkaClientProperties.load("monitored", path, {"KMON_MONITORED_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"},
                                        inline)
    assert client.librdkafka() == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                                   "sasl.username": "u", "sasl.password": "p"}
    assert client.source == f"{path} and the config file's client: and KMON_MONITORED_KAFKA_*"


def test_keystores(tmp_path: Path) -> None:
    pkcs12 = KafkaClientProperties("monitored", {"security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
                                                 "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw",
                                                 "ssl.key.password": "kp"})
    assert pkcs12.librdkafka() == {"security.protocol": "SSL", "ssl.keystore.location": "/k.p12",
                                   "ssl.keystore.password": "pw", "ssl.key.password": "kp"}
    pem = KafkaClientProperties("monitored", {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"})
    assert pem.librdkafka() == {"ssl.key.location": "/k.pem", "ssl.certificate.location": "/k.pem"}


@pytest.mark.parametrize(("props", "named"), [
    ({"ssl.truststore.location": "/t.jks"}, "JKS truststore"),
    ({"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"}, "JKS keystore"),
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"sasl.jaas.config": "ScramLoginModule required username=\"u\";"}, "needs password"),
    ({"sasl.jaas.config": "org.x.OAuthBearerLoginModule required;"}, "OAuthBearerLoginModule is not supported"),
    ({"sasl.jaas.config": "just garbage"}, "not a JAAS login entry"),
])
def test_what_librdkafka_cannot_use_fails_at_load_naming_role_key_and_file(
        tmp_path: Path, props: dict[str, str], named: str) -> None:
    secret = "hunter2-do-not-print"
    text = "".join(f"{k}={v}\n" for k, v in props.items()) + f"ssl.key.password={secret}\n"
    with pytest.raises(ClientConfigError) as e:
        KafkaClientProperties.load("monitored", write(tmp_path, text), {})
    message = str(e.value)
    assert named in message and "monitored cluster" in message and "client.properties" in message
    assert secret not in message


def test_jaas_quoted_values_unescape() -> None:
    login = parse_jaas('a.b.ScramLoginModule required username=kmon password="s3cr\\"et" ;', "here")
    assert login.options == {"username": "kmon", "password": 's3cr"et'} and login.short_module == "ScramLoginModule"


def test_a_jaas_entry_that_cannot_be_read_does_not_echo_it() -> None:
    with pytest.raises(ClientConfigError) as e:
        parse_jaas('org.x.ScramLoginModule required username="u" password=="topsecret";', "here")
    assert "topsecret" not in str(e.value)


def test_zookeeper_tls_sasl_and_digest(tmp_path: Path) -> None:
    path = write(tmp_path, "zookeeper.ssl.client.enable=true\nzookeeper.ssl.truststore.location=/ca.pem\n"
                           "zookeeper.ssl.keystore.location=/me.pem\nzookeeper.ssl.keystore.password=kp\n"
                           "zookeeper.sasl.jaas.config=org.apache.zookeeper.server.auth.DigestLoginModule "
                           "required username=\"kmon\" password=\"pw\";\n", "zk.properties")
    client = ZooKeeperClientProperties.load(path, {"KMON_ZK_CLIENT_ZOOKEEPER_AUTH": "digest:kmon:pw"})
    assert client.kazoo() == {
        "use_ssl": True, "ca": "/ca.pem", "certfile": "/me.pem", "keyfile": "/me.pem", "keyfile_password": "kp",
        "verify_certs": True, "sasl_options": {"mechanism": "DIGEST-MD5", "username": "kmon", "password": "pw"},
        "auth_data": [("digest", "kmon:pw")]}
    assert client.describe() == "TLS, SASL DIGEST-MD5 as 'kmon', auth digest"
    assert ZooKeeperClientProperties.load(None, {}).kazoo() == {}


@pytest.mark.parametrize(("props", "named"), [
    ({"zookeeper.auth": "digest"}, "zookeeper.auth"),
    ({"zookeeper.ssl.client.enable": "true", "zookeeper.ssl.truststore.location": "/t.jks",
      "zookeeper.ssl.truststore.type": "JKS"}, "PEM files only"),
    ({"zookeeper.sasl.jaas.config": "org.x.DigestLoginModule required username=\"u\";"}, "needs username and password"),
])
def test_bad_zookeeper_settings_fail_at_load(tmp_path: Path, props: dict[str, str], named: str) -> None:
    text = "".join(f"{k}={v}\n" for k, v in props.items())
    with pytest.raises(ClientConfigError, match=named):
        ZooKeeperClientProperties.load(write(tmp_path, text, "zk.properties"), {})
