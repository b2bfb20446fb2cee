"""The Helm chart (deploy/helm/kmon) held to the CLI as tests/unit/test_deploy.py holds the other deploy
files: rendered by the real `helm template` over several values files (tests/data/helm), every
container's flags and variables exist in the command it runs, the ports agree with the probes, the
Services and the ServiceMonitor, the PrometheusRule is deploy/prometheus/rules' file, and the
dashboards' ConfigMaps are dashboards/*.json. `helm lint` passes; bad values fail naming the value."""
from __future__ import annotations

import argparse
import json
import subprocess
from string import Template
from pathlib import Path

import pytest
import yaml

from cli.main import build_parser
from kmon.config_file import parse_with_file
from kmon.toolchain import find_toolchain
from streaming.cluster_share import ClusterShare
from streaming.config import StreamConfig
from tests.unit.deploy_files import COLLECTOR_PORTS, assert_known, command

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


def config_file(docs: list[dict], root: Path) -> Path:
    """The chart's kmon.yaml, written under ``root`` with the files it names there (empty), as the
    containers' mounts would hold them."""
    (text,) = [d["data"]["kmon.yaml"] for d in docs if d["kind"] == "ConfigMap" and "kmon.yaml" in d["data"]]
    text = text.replace(" /etc/kmon/", f" {root}/etc/kmon/").replace(" /var/lib/kmon/", f" {root}/var/lib/kmon/")
    for line in text.splitlines():
        if line.strip().split(":", 1)[0] in ("command-config", "zk-client-config", "web-config-file"):
            path = Path(line.split(":", 1)[1].strip())
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    path = root / "etc" / "kmon" / "config" / "kmon.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def parsed(argv: list[str], env: dict[str, str], config: Path, monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """The container's command as kmon parses it: its variables set, its config file read."""
    with monkeypatch.context() as m:
        for name, value in env.items():
            m.setenv(name, str(config) if name == "KMON_CONFIG" else value)
        return parse_with_file(build_parser(), argv, lambda a: " ".join(filter(None, (a.command, getattr(
            a, "source", None)))))


@pytest.mark.parametrize("values", VALUES, ids=lambda p: p.stem)
def test_each_container_runs_a_kmon_command_with_its_own_flags_and_agreeing_ports(
        values: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = rendered(values)
    given = yaml.safe_load(values.read_text())
    clusters = {c["name"]: c for c in given["clusters"]}
    config = config_file(docs, tmp_path)
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    shares = given.get("stream", {}).get("shares", 1)
    assert len(workloads) == 2 * len(clusters) + shares   # two collectors per cluster, a stream app per share
    taken = []
    service_ports = {p["name"]: p["port"] for d in docs if d["kind"] == "Service" for p in d["spec"]["ports"]}
    web = given.get("web", {})
    for w in workloads:
        (container,) = w["spec"]["template"]["spec"]["containers"]
        parser = command(container["args"])
        env = {e["name"]: e["value"] if "value" in e else f"from {e['valueFrom']}" for e in container["env"]}
        assert_known({e["name"] for e in container["env"]}, parser, w["metadata"]["name"])
        args = parsed(container["args"], env, config, monkeypatch)
        (port,) = container["ports"]
        assert port["containerPort"] == args.metrics_port
        expected = StreamConfig.metrics_port if container["args"] == ["stream"] else COLLECTOR_PORTS[container["args"][1]]
        assert port["containerPort"] == expected and service_ports[port["name"]] == expected
        for probe in ("readinessProbe", "livenessProbe"):   # where a password guards every path, the port
            check = container[probe]["tcpSocket" if web.get("basicAuth") else "httpGet"]
            assert check["port"] == port["name"]
            assert web.get("basicAuth") or check["scheme"] == ("HTTPS" if web.get("tls") else "HTTP")
        mounted = {m["mountPath"] for m in container.get("volumeMounts", [])}
        assert bool(args.web_config_file) == bool(web.get("secret"))   # an empty web config: plain HTTP
        if args.web_config_file:
            assert any(str(args.web_config_file.source).startswith(f"{tmp_path}{m}/") for m in mounted)
        events = given.get("events", {})
        if container["args"] == ["stream"]:
            assert args.bootstrap_servers == events.get("bootstrapServers", "kmon-events-0.kmon-events:9092")
            files = [args.events_command_config, args.checkpoint]
            taken.append(args.cluster_share)
        else:
            cluster = clusters[args.cluster]
            source = container["args"][1]
            assert args.events_bootstrap_servers == events.get("bootstrapServers", "kmon-events-0.kmon-events:9092")
            if source == "zk":
                assert "".join(args.zookeeper) == cluster["zookeeper"]
                assert bool(args.zk_client_config) == bool(cluster.get("clientSecret"))
            else:
                assert args.bootstrap_servers == cluster["bootstrapServers"]
                assert bool(args.command_config) == bool(cluster.get("clientSecret"))
                secret = {name: value for name, value in env.items() if not name.startswith("KMON_")}
                assert getattr(args, "monitored_client", {}) == {   # inline, ${VAR} from the Secret's variable
                    k: Template(v).substitute(secret) for k, v in cluster.get("client", {}).items()}
            if source == "kraft":
                assert (args.controllers, args.sampled) == ((None, True) if cluster.get("sampled") else
                                                            (cluster["controllers"], False))
            files = [getattr(args, "command_config", None), getattr(args, "zk_client_config", None),
                     args.events_command_config]
        for path in filter(None, files):   # a client properties file or the checkpoint: on a mounted volume
            inside = "/" + str(path.relative_to(tmp_path))
            assert any(inside.startswith(m + "/") for m in mounted), f"{inside} not mounted"
    assert sorted(taken, key=str) == [ClusterShare(i, shares) for i in range(shares)]   # each cluster in one app
    by_cluster = {}
    for w in workloads:
        labels = w["metadata"]["labels"]
        if labels["app.kubernetes.io/component"] == "collector":
            by_cluster.setdefault(labels["kmon.io/cluster"], set()).add(labels["kmon.io/source"])
    assert by_cluster == {name: {"zk" if c["mode"] == "zookeeper" else "kraft", "groups"} for name, c in clusters.items()}
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):   # scraped as the endpoints are served
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint.get("scheme", "http") == ("https" if web.get("tls") else "http")
            assert endpoint.get("basicAuth") == given.get("serviceMonitor", {}).get("basicAuth")


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
    ("stream: {shares: 0}", "stream.shares: 0 is not a count of stream apps"),
])
def test_bad_values_fail_naming_the_value(tmp_path: Path, values: str, said: str) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(values)
    done = helm("template", "kmon", str(CHART), "-f", str(path))
    assert done.returncode != 0 and said in done.stderr, done.stderr
