"""The controller listener's client settings and SCRAM, without a server (RFC 7677's exchange)."""
from __future__ import annotations

import pytest

from collectors.kraft.connection import ClientSecurity, ControllerError, scram_client_final, scram_client_first


def test_scram_sha_256_matches_rfc_7677() -> None:
    nonce = "rOprNGfwEbeRWgbNEkqO"
    first = scram_client_first("user", nonce)
    assert first == "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final, server_final = scram_client_final("SCRAM-SHA-256", "pencil", first, nonce, server_first)
    assert final == ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert server_final == "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_a_server_nonce_not_extending_ours_is_refused() -> None:
    with pytest.raises(ValueError, match="server-first"):
        scram_client_final("SCRAM-SHA-512", "pw", "n=u,r=abc", "abc", "r=xyz,s=c2FsdA==,i=4096")


def test_user_names_are_escaped() -> None:
    assert scram_client_first("a=b,c", "n") == "n=a=3Db=2Cc,r=n"


def test_client_settings_come_from_the_librdkafka_translation() -> None:
    s = ClientSecurity.from_librdkafka({"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
                                        "sasl.username": "kmon", "sasl.password": "pw",
                                        "ssl.ca.location": "/ca.pem", "ssl.endpoint.identification.algorithm": "none"})
    assert (s.protocol, s.mechanism, s.username, s.ca_file, s.check_hostname) == (
        "SASL_SSL", "SCRAM-SHA-512", "kmon", "/ca.pem", False)


@pytest.mark.parametrize("conf, says", [
    ({"security.protocol": "SASL_SSL"}, "GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"}, "PEM"),
])
def test_what_the_collector_cannot_speak_is_one_line_naming_it(conf: dict, says: str) -> None:
    with pytest.raises(ControllerError, match=says):
        ClientSecurity.from_librdkafka(conf)
