"""`kmon run --bootstrap-servers` given what does not work: one line naming it, nothing started, never a
stack trace. A real refused port and real files; no Kafka is needed to be refused."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from stack.process import free_port

ROOT = Path(__file__).resolve().parents[2]


def _kmon(*argv: str, tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cli", "run", *argv, "--dir", str(tmp_path / "kmon")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_a_bootstrap_that_does_not_answer_is_named_and_asked_again_until_sigterm(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    proc = _kmon("--bootstrap-servers", address, tmp_path=tmp_path)
    started, said = time.monotonic(), ""
    try:
        assert proc.stdout is not None
        while "asking again every" not in said and time.monotonic() - started < 60:
            said += proc.stdout.readline()
        took = time.monotonic() - started
        proc.send_signal(signal.SIGTERM)
        said += proc.communicate(timeout=30)[0]
    finally:
        proc.kill()
    assert f"no broker of {address} answers" in said and took < 30, said
    assert "Traceback" not in said and proc.returncode != 0
    assert not (tmp_path / "kmon" / "stack.json").exists(), "something was started for a cluster never reached"


def test_flags_that_shape_a_local_cluster_are_refused_beside_bootstrap_servers(tmp_path: Path) -> None:
    proc = _kmon("--bootstrap-servers", "127.0.0.1:9092", "--kraft", tmp_path=tmp_path)
    said = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2 and "--kraft" in said and "Traceback" not in said, said


def test_a_bad_client_properties_file_is_one_line_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSSL\n")
    proc = _kmon("--bootstrap-servers", f"127.0.0.1:{free_port()}", "--command-config", str(config),
                 tmp_path=tmp_path)
    said = proc.communicate(timeout=60)[0]
    assert proc.returncode == 1 and str(config) in said and "SASL_SSSL" in said, said
    assert "Traceback" not in said and len(said.strip().splitlines()) == 1, said


def test_a_fleet_whose_cluster_lacks_its_secret_here_is_one_line_naming_it(tmp_path: Path) -> None:
    """`kmon run --config`: a ${VAR} not set where kmon runs names the file's line and the variable,
    before anything is started."""
    config = tmp_path / "kmon.yaml"
    config.write_text("clusters:\n  - cluster: a\n    bootstrap-servers: 127.0.0.1:1\n"
                      "  - cluster: b\n    bootstrap-servers: 127.0.0.1:2\n    client:\n"
                      "      sasl.password: ${KMON_TEST_NEVER_SET}\n")
    proc = _kmon("--config", str(config), tmp_path=tmp_path)
    said = proc.communicate(timeout=60)[0]
    assert proc.returncode == 1 and "Traceback" not in said, said
    assert f"b: {config}:7: cluster: client: sasl.password: the environment variable KMON_TEST_NEVER_SET is not set" \
        in said, said
    assert not (tmp_path / "kmon" / "stack.json").exists(), "something was started"
