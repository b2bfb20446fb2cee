"""The deploy files (deploy/systemd, deploy/kubernetes, deploy/compose) kept true: every flag and
KMON_* variable they use exists in the command they run, the ports agree with each other and with
the exporter's default, the files the Dockerfile copies exist, and systemd itself accepts the units."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from streaming.config import StreamConfig
from tests.unit.deploy_files import COLLECTOR_PORTS, PREFIXES, assert_known, command, env_vars, flags

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def words_of(argv: list[str]) -> list[str]:
    return [w for w in argv if not w.startswith("-")][:2] if argv[0] == "collect" else argv[:1]


def collectors_read() -> set[str]:
    """What a file or map shared by a cluster's collectors may set."""
    return set().union(*(env_vars(command(["collect", source])) for source in COLLECTOR_PORTS))


# ------------------------------------------------------------------ systemd

def units() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((DEPLOY / "systemd").glob("*.service"))}


def env_file(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_systemd_units_use_existing_flags_and_variables() -> None:
    assert set(units()) == {"kmon-collect-zk@.service", "kmon-collect-kraft@.service", "kmon-collect-groups@.service",
                            "kmon-stream.service"}
    cluster_env = env_file((DEPLOY / "systemd" / "cluster.env.example").read_text())
    stream_env = env_file((DEPLOY / "systemd" / "stream.env.example").read_text())
    for name, text in units().items():
        argv = re.search(r"^ExecStart=/opt/kmon/\.venv/bin/kmon (.*)$", text, re.M).group(1).split()  # type: ignore[union-attr]
        parser = command(words_of(argv))
        used = {w.split("=")[0] for w in argv if w.startswith("--")}
        assert used <= flags(parser), f"{name}: unknown flags {used - flags(parser)}"
        env = stream_env if "stream" in name else cluster_env
        inline = dict(re.findall(r"^Environment=(\w+)=(.*)$", text, re.M))
        # the cluster file serves both collectors: checked below against the two
        assert_known(set(inline) | (set(env) if env is stream_env else set()), parser, name)
        for ref in re.findall(r"\$\{(\w+)\}", text):   # ExecStart's own variables come from the env file
            assert ref in env, f"{name} uses ${{{ref}}}, which its env file does not set"
        assert "Restart=on-failure" in text and "EnvironmentFile=/etc/kmon/" in text
    # the cluster file serves both collectors: each of its variables is read by one of them
    unknown = {v for v in cluster_env if v.startswith("KMON_") and v not in collectors_read()
               and not v.startswith(PREFIXES)}
    assert not unknown
    assert {cluster_env[f"{source.upper()}_METRICS_PORT"] for source in COLLECTOR_PORTS} == {
        str(p) for p in COLLECTOR_PORTS.values()}
    assert stream_env["KMON_METRICS_PORT"] == str(StreamConfig.metrics_port)


def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    kmon = Path(sys.executable).parent / "kmon"
    paths = []
    for name, text in units().items():
        path = tmp_path / name.replace("@.", "@prod.")
        path.write_text(text.replace("/opt/kmon/.venv/bin/kmon", str(kmon)))
        paths.append(str(path))
    done = subprocess.run(["systemd-analyze", "verify", *paths], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


# ------------------------------------------------------------------ Kubernetes

def test_kubernetes_containers_use_existing_variables_and_agreeing_ports() -> None:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "kmon.yaml").read_text()) if d]
    config_maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    services = {d["spec"]["selector"]["app"]: d for d in docs if d["kind"] == "Service"}
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    assert len(workloads) == 4
    for w in workloads:
        pod = w["spec"]["template"]
        (container,) = pod["spec"]["containers"]
        parser = command(container["args"])
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        assert_known(set(env), parser, w["metadata"]["name"])
        for source in container.get("envFrom", []):   # one cluster's map serves both its collectors
            shared = config_maps[source["configMapRef"]["name"]]
            assert {v for v in shared if not v.startswith(PREFIXES)} <= collectors_read()
        port = int(env["KMON_METRICS_PORT"])
        assert [p["containerPort"] for p in container["ports"]] == [port]
        annotations = pod["metadata"].get("annotations") or services[pod["metadata"]["labels"]["app"]]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == str(port)
        expected = StreamConfig.metrics_port if container["args"] == ["stream"] else COLLECTOR_PORTS[container["args"][1]]
        assert port == expected
    (stream,) = [w for w in workloads if w["kind"] == "StatefulSet"]
    mounts = stream["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    checkpoint = dict((e["name"], e["value"]) for e in stream["spec"]["template"]["spec"]["containers"][0]["env"])
    assert any(checkpoint["KMON_CHECKPOINT"].startswith(m["mountPath"]) for m in mounts)


# ------------------------------------------------------------------ compose and the image

def test_compose_services_use_existing_variables_and_publish_their_metrics_port() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    kmon_services = {n: s for n, s in compose["services"].items() if s.get("image") == "kmon:latest"}
    assert set(kmon_services) == {"collect-zk", "collect-kraft", "collect-groups", "stream"}
    for name, service in kmon_services.items():
        parser = command(service["command"])
        env = service["environment"]
        assert_known(set(env), parser, name)
        port = env["KMON_METRICS_PORT"]
        assert service["ports"] == [f"{port}:{port}"]


def test_the_dockerfile_copies_what_exists_and_uses_the_toolchains_cache() -> None:
    text = (DEPLOY / "compose" / "Dockerfile").read_text()
    repo = DEPLOY.parent
    sources = [line.split()[1:-1] for line in text.splitlines() if line.startswith("COPY") and "--from" not in line]
    missing = [s for srcs in sources for s in srcs if not (repo / s).exists()]
    assert sources and not missing
    assert "spark-kafka/pom.xml" in text and "/cache/jars/spark-kafka" in text and "KMON_CACHE=/opt/kmon/cache" in text
