"""A real Prometheus scrapes kmon's HTTP server behind the web config (issue 51 item 3) as it
scrapes the exporters: over TLS with the server's CA, with a client certificate, with basic auth
(a `$2y$` hash, as htpasswd writes them); a wrong password is a 401 it reports."""
from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import bcrypt
import pytest
import yaml

from collectors.telemetry import Telemetry
from kmon.toolchain import Toolchain
from kmon.web_config import load
from stack.process import free_port
from stack.secure import SecureFiles
from tests.support import eventually

pytestmark = pytest.mark.integration


def test_prometheus_scrapes_a_collectors_endpoints_over_tls_with_a_client_certificate_and_a_password(
        tmp_path: Path, toolchain: Toolchain) -> None:
    certs = SecureFiles(tmp_path / "certs")
    certs.write()
    hashed = "$2y$" + bcrypt.hashpw(b"scrape-me", bcrypt.gensalt(6)).decode()[4:]
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({
        "tls_server_config": {"cert_file": str(certs.broker_pem), "key_file": str(certs.broker_pem),
                              "client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": str(certs.ca)},
        "basic_auth_users": {"prometheus": hashed}}))
    telemetry = Telemetry("web")
    port = telemetry.serve(0, "127.0.0.1", load(web))
    (tmp_path / "right").write_text("scrape-me")
    (tmp_path / "wrong").write_text("guess")

    def job(name: str, password_file: str, cert: bool = True) -> dict:
        tls = {"ca_file": str(certs.ca), **({"cert_file": str(certs.kmon_pem), "key_file": str(certs.kmon_pem)}
                                            if cert else {})}
        return {"job_name": name, "scheme": "https", "scrape_interval": "1s", "scrape_timeout": "1s",
                "tls_config": tls, "basic_auth": {"username": "prometheus", "password_file": str(tmp_path / password_file)},
                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job("right", "right"), job("wrong", "wrong"),
                                                         job("no-certificate", "right", cert=False)]}))
    prom_port = free_port()
    with (tmp_path / "prometheus.log").open("w") as out:
        prometheus = subprocess.Popen([toolchain.prometheus, f"--config.file={config}",
                                       f"--storage.tsdb.path={tmp_path / 'data'}",
                                       f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=out, stderr=subprocess.STDOUT)
    try:
        def targets() -> dict[str, dict] | None:
            with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/targets", timeout=5) as r:
                active = json.load(r)["data"]["activeTargets"]
            by_job = {t["labels"]["job"]: t for t in active}
            return by_job if len(by_job) == 3 and all(t["health"] != "unknown" for t in by_job.values()) else None
        seen = eventually(targets, 60, "every job scraped once")
        assert seen["right"]["health"] == "up", seen["right"]
        assert seen["wrong"]["health"] == "down" and "401" in seen["wrong"]["lastError"], seen["wrong"]
        assert seen["no-certificate"]["health"] == "down", seen["no-certificate"]
    finally:
        prometheus.terminate()
        prometheus.wait(30)
        telemetry.close()
