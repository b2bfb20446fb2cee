"""The Helm chart (deploy/helm/kmon) held to the CLI as tests/unit/test_deploy.py holds the other deploy
files: rendered by the real `helm template` over several values files (tests/data/helm), every
container's flags and variables exist in the command it runs, the ports agree with the probes, the
Services and the ServiceMonitor, the PrometheusRule is deploy/prometheus/rules' file, and the
dashboards' ConfigMaps are dashboards/*.json. `helm lint` passes; bad values fail naming the value."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from kmon.toolchain import find_toolchain
from streaming.app import StreamConfig
from tests.unit.test_deploy import COLLECTOR_PORTS, assert_known, command

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kmon"
VALUES = sorted((ROOT / "tests" / "data" / "helm").glob("*.yaml"))


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([find_toolchain().helm, *args], capture_output=True, text=True, timeout=120)


def rendered(values: Path | None) -> list[dict]:
    done = helm("template", "kmon", str(CHART), *(("-f", str(values)) if values else ()))
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_helm_lint_passes_with_every_values_file() -> None:
    for values in [None, *VALUES]:
        done = helm("lint", "--strict", str(CHART), *(("-f", str(values)) if values else ()))
        assert done.returncode == 0, f"{values}: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("values", VALUES, ids=lambda p: p.stem)
def test_each_container_runs_a_kmon_command_with_its_own_flags_and_agreeing_ports(values: Path) -> None:
    docs = rendered(values)
    clusters = yaml.safe_load(values.read_text())["clusters"]
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    assert len(workloads) == 2 * len(clusters) + 1   # two collectors per cluster, one stream app
    service_ports = {p["name"]: p["port"] for d in docs if d["kind"] == "Service" for p in d["spec"]["ports"]}
    for w in workloads:
        (container,) = w["spec"]["template"]["spec"]["containers"]
        parser = command(container["args"])
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert_known(set(env), parser, w["metadata"]["name"])
        (port,) = container["ports"]
        assert str(port["containerPort"]) == env["KMON_METRICS_PORT"]
        expected = StreamConfig.metrics_port if container["args"] == ["stream"] else COLLECTOR_PORTS[container["args"][1]]
        assert port["containerPort"] == expected and service_ports[port["name"]] == expected
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["port"] == port["name"]
        mounted = {m["mountPath"] for m in container.get("volumeMounts", [])}
        for name, value in env.items():
            if name.endswith("CONFIG") and value:   # a client properties file: on a mounted Secret
                assert any(value.startswith(m + "/") for m in mounted), f"{name}={value} not mounted"
    by_cluster = {}
    for w in workloads:
        labels = w["metadata"]["labels"]
        if labels["app.kubernetes.io/component"] == "collector":
            by_cluster.setdefault(labels["kmon.io/cluster"], set()).add(labels["kmon.io/source"])
    assert by_cluster == {c["name"]: {"zk" if c["mode"] == "zookeeper" else "kraft", "groups"} for c in clusters}


def test_the_prometheus_rule_is_kmons_rule_file_and_the_dashboards_are_its_json() -> None:
    docs = rendered(ROOT / "tests" / "data" / "helm" / "kraft.yaml")
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert rule["spec"] == yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules" / "kmon-alerts.yml").read_text())
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    dashboards = {name: json.loads(text) for d in docs if d["kind"] == "ConfigMap"
                  and d["metadata"]["labels"].get("grafana_dashboard") == "1" for name, text in d["data"].items()}
    assert dashboards == {p.name: json.loads(p.read_text()) for p in (ROOT / "dashboards").glob("*.json")}
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics", *(f"metrics-{s}" for s in COLLECTOR_PORTS)}


@pytest.mark.parametrize("values, said", [
    ("clusters: [{name: a, mode: kraft, bootstrapServers: 'b:1', controllers: 'c:1'}, "
     "{name: a, mode: zookeeper, bootstrapServers: 'b:1', zookeeper: 'z:1'}]", '"a" is named twice'),
    ("clusters: [{name: 'a/b', mode: kraft, bootstrapServers: 'b:1', controllers: 'c:1'}]", '"a/b" is not a cluster name'),
    ("clusters: [{name: a, mode: raft, bootstrapServers: 'b:1'}]", 'clusters[a].mode: "raft" is not zookeeper or kraft'),
    ("clusters: [{name: a, mode: kraft, bootstrapServers: 'b:1'}]", "clusters[a].controllers is required"),
    ("clusters: [{name: a, mode: zookeeper, bootstrapServers: 'b:1'}]", "clusters[a].zookeeper is required"),
])
def test_bad_values_fail_naming_the_value(tmp_path: Path, values: str, said: str) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(values)
    done = helm("template", "kmon", str(CHART), "-f", str(path))
    assert done.returncode != 0 and said in done.stderr, done.stderr
