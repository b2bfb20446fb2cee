"""The peers' parts: where their binaries come from, how they are configured and started.

- Prometheus' JMX exporter, as a Java agent in every monitored broker (its rules:
  jmx-exporter.yaml beside this file; jmx-exporter-kraft.yaml on a KRaft cluster), scraped by
  the same Prometheus as kmon and evaluated with the peer's alert rules (alerts.yml; on a KRaft
  cluster alerts-kraft.yml);
- Burrow, Debian's package, watching the same cluster's consumer groups (ZooKeeper mode only:
  Burrow 1.2.1 keeps its own coordination in ZooKeeper, which a KRaft cluster does not have);
- klag-exporter (crates.io, built by cargo), a lag exporter that reads the record at the committed
  offset too, twice: in its exact mode (``message``, job ``klag``) and its default one (``rate``, the
  lag in offsets over the production rate, job ``klag-rate``), scraped by the same Prometheus and
  evaluated with alerts-klag.yml.

They are fetched on first use into the cache (the jar, the binary) or the system (the Debian
packages), like deploy/install.sh does for kmon's own parts.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import yaml

from bench.support.harness import process
from stack import configs
from stack.local import LocalStack
from stack.process import Spawned, free_port, wait_until

HERE = Path(__file__).parent
JMX_RULES = HERE / "jmx-exporter.yaml"
PEER_ALERTS = HERE / "alerts.yml"
JMX_RULES_KRAFT = HERE / "jmx-exporter-kraft.yaml"
PEER_ALERTS_KRAFT = HERE / "alerts-kraft.yml"
KLAG_ALERTS = HERE / "alerts-klag.yml"
KLAG_GROUP = "peer-klag"   # the rule group of alerts-klag.yml
KLAG_CRATE = ("klag-exporter", "0.1.29")
# job -> klag-exporter's time-lag mode; each polls at its default interval (30 s), as kmon's lag
# interval is by default
KLAG_MODES = {"klag": "message", "klag-rate": "rate"}
# 1.0.1 is the newest jmx_prometheus_javaagent Maven Central serves here (1.1.0+ do not resolve)
JMX_AGENT = ("io.prometheus.jmx", "jmx_prometheus_javaagent", "1.0.1")
KAFKA_CLUSTER = "bench"   # the name both systems report the monitored cluster under
PEER_GROUP = "peer-kafka-jmx"   # the peer's rule group in alerts.yml and alerts-kraft.yml
JMX_JOB = "kafka-jmx"
# The agents' scrape interval and timeout. At kmon's 2 s the agents of a KRaft run on this 2-core
# machine took 33-50 s a scrape (2026-11-28): Prometheus gave up at 2 s, but the agent went on
# collecting for each abandoned scrape, collections piled up (load average 39) and no scrape was
# ever answered. 10 s is still shorter than operators run the agent at (15-60 s), so it is the
# peer's best case that holds up here; it delays the peer's alerts by up to 10 s.
PEER_SCRAPE_S = 10
PEER_SCRAPE = f"{PEER_SCRAPE_S}s"


@dataclass(frozen=True)
class PeerTools:
    burrow: str
    jmx_agent: Path
    klag: Path


def peer_tools(cache: Path, progress: Callable[[str], None], with_burrow: bool = True) -> PeerTools:
    """Burrow (unless ``with_burrow`` is false), the JMX exporter agent and klag-exporter, installed if
    missing (idempotent)."""
    if with_burrow and shutil.which("Burrow") is None:
        _debian_packages(["burrow"], "the peer for consumer lag", progress)
    group, artifact, version = JMX_AGENT
    jar = cache / "peers" / "jmx" / f"{artifact}-{version}.jar"
    if not jar.exists():
        progress(f"fetching {artifact} {version} from Maven Central into {jar.parent}")
        settings = Path(configs.DEPLOY) / "maven" / "settings.xml"
        subprocess.run(["mvn", "-q", "-B", "-s", str(settings), "dependency:copy",
                        f"-Dartifact={group}:{artifact}:{version}", f"-DoutputDirectory={jar.parent}"],
                       check=True, cwd=cache)
    return PeerTools(shutil.which("Burrow") or "Burrow", jar, _klag_binary(cache, progress))


def _debian_packages(packages: list[str], why: str, progress: Callable[[str], None]) -> None:
    progress(f"installing Debian's {', '.join(packages)} ({why})")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(install, env=env).returncode != 0:   # stale package lists on a fresh machine
        subprocess.run([*sudo, "apt-get", "update", "-q"], env=env, check=True)
        subprocess.run(install, env=env, check=True)


def _klag_binary(cache: Path, progress: Callable[[str], None]) -> Path:
    crate, version = KLAG_CRATE
    root = cache / "peers" / "klag" / version
    binary = root / "bin" / crate
    if binary.exists():
        return binary
    # librdkafka's build (rdkafka-sys) runs cmake and links the system's SASL, TLS, curl and zstd libraries
    missing = [p for p in ("cmake", "pkg-config", "libsasl2-dev", "libssl-dev", "libcurl4-openssl-dev", "libzstd-dev",
                           "zlib1g-dev")
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        _debian_packages(missing, f"to build {crate}", progress)
    progress(f"building {crate} {version} from crates.io into {root} (cargo install; ~15 minutes on 2 cores, once)")
    subprocess.run(["cargo", "install", "--quiet", "--root", str(root), "--version", version, crate], check=True)
    return binary


def jmx_agent_option(tools: PeerTools, port: int, kraft: bool = False) -> str:
    """The broker JVM option that starts the exporter on ``port`` with the rules of the cluster's mode."""
    return f"-javaagent:{tools.jmx_agent}=127.0.0.1:{port}:{JMX_RULES_KRAFT if kraft else JMX_RULES}"


def prometheus_config(stream_port: int, collector_ports: list[int], agent_ports: dict[int, int],
                      kraft: bool = False, klag_ports: dict[str, int] | None = None) -> str:
    """kmon's Prometheus configuration (its targets and rules, as `kmon run` writes it) plus the
    brokers' agents as one more job, scraped every PEER_SCRAPE, and the peer's rules of the
    cluster's mode; klag-exporter's instances (job -> port), scraped every PEER_SCRAPE too, with
    their rules: one Prometheus, one evaluation interval for all."""
    cfg = yaml.safe_load(configs.prometheus_config(
        [f"127.0.0.1:{stream_port}"], [f"127.0.0.1:{p}" for p in collector_ports],
        "127.0.0.1:9"))   # the bench reads alerts from Prometheus itself, no Alertmanager
    cfg["rule_files"].append(str(PEER_ALERTS_KRAFT if kraft else PEER_ALERTS))
    if klag_ports:
        cfg["rule_files"].append(str(KLAG_ALERTS))
        cfg["scrape_configs"] += [{"job_name": job, "scrape_interval": PEER_SCRAPE, "scrape_timeout": PEER_SCRAPE,
                                   "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                                  for job, port in sorted(klag_ports.items())]
    cfg["scrape_configs"].append({
        "job_name": JMX_JOB,
        "scrape_interval": PEER_SCRAPE,
        "scrape_timeout": PEER_SCRAPE,
        "static_configs": [{"targets": [f"127.0.0.1:{port}"],
                            "labels": {"kafka_cluster": KAFKA_CLUSTER, "broker": str(broker)}}
                           for broker, port in sorted(agent_ports.items())]})
    return yaml.safe_dump(cfg, sort_keys=False)


@contextlib.contextmanager
def prometheus(stack: LocalStack, agent_ports: dict[int, int], klag_ports: dict[str, int]) -> Iterator[str]:
    """Prometheus scraping kmon, the agents and klag-exporter; yields its URL."""
    port = free_port()
    cfg = stack.dir / "peers-prometheus.yml"
    assert stack.state
    cfg.write_text(prometheus_config(stack.state.stream_port, list(stack.state.collector_ports.values()),
                                     agent_ports, stack.state.kraft, klag_ports))
    argv = [stack.tools.prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={stack.dir / 'peers-prometheus'}",
            f"--web.listen-address=127.0.0.1:{port}"]
    with process(argv, stack.dir / "logs" / "peers-prometheus.log", str(cfg)):
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: urllib.request.urlopen(f"{url}/-/ready", timeout=2).status == 200, 60, "prometheus")
        yield url


def burrow_config(stack: LocalStack, http_port: int, workdir: Path) -> str:
    """Burrow 1.2's TOML: ZooKeeper for its own coordination (a root of its own in the stack's
    ensemble), the cluster and its __consumer_offsets, the HTTP API. Values are Burrow's defaults
    where the bench has no reason to choose (storage intervals 10, evaluator cache 10 s)."""
    state = stack.state
    assert state
    servers = json.dumps(state.bootstrap_servers.split(","))
    return f"""[general]
pidfile="{workdir / 'burrow.pid'}"

[logging]
filename="{workdir / 'burrow.log'}"
level="info"

[zookeeper]
servers=["{state.zk_address}"]
timeout=6
root-path="/burrow-bench"

[client-profile.bench]
client-id="burrow-bench"
# Burrow 1.2.1's Kafka client (sarama) knows protocol versions up to 2.1
kafka-version="2.1.0"

[cluster.{KAFKA_CLUSTER}]
class-name="kafka"
servers={servers}
client-profile="bench"
topic-refresh=60
offset-refresh=10

[consumer.{KAFKA_CLUSTER}]
class-name="kafka"
cluster="{KAFKA_CLUSTER}"
servers={servers}
client-profile="bench"
start-latest=false

[storage.default]
class-name="inmemory"
workers=20
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=10

[httpserver.default]
address="127.0.0.1:{http_port}"
"""


@contextlib.contextmanager
def burrow(stack: LocalStack, tools: PeerTools) -> Iterator[tuple[str, Spawned]]:
    """Burrow on the stack's cluster until the block ends; yields its HTTP API's URL and process."""
    workdir = stack.dir / "burrow"
    workdir.mkdir(exist_ok=True)
    port = free_port()
    (workdir / "burrow.toml").write_text(burrow_config(stack, port, workdir))
    url = f"http://127.0.0.1:{port}"
    with process([tools.burrow, "--config-dir", str(workdir)], workdir / "stdout.log", str(workdir)) as proc:
        wait_until(lambda: KAFKA_CLUSTER in get_json(f"{url}/v3/kafka")["clusters"], 60,
                   f"burrow (log: {workdir / 'burrow.log'})")
        yield url, proc


def klag_config(stack: LocalStack, http_port: int, mode: str) -> str:
    """klag-exporter's TOML: the cluster under the name kmon reports it, every group and topic but
    Kafka's internal ones, per-partition series (its lost messages and retention ratio are only
    per partition), the time-lag ``mode``; its defaults otherwise (30 s polls, message mode's 60 s
    cache of a record's time)."""
    assert stack.state
    return f"""[exporter]
http_port = {http_port}
http_host = "127.0.0.1"
granularity = "partition"

[exporter.timestamp_sampling]
enabled = true
mode = "{mode}"

[[clusters]]
name = "{KAFKA_CLUSTER}"
bootstrap_servers = "{stack.state.bootstrap_servers}"
group_whitelist = [".*"]
topic_whitelist = [".*"]
topic_blacklist = ["__.*"]
"""


@contextlib.contextmanager
def klag(stack: LocalStack, tools: PeerTools) -> Iterator[dict[str, tuple[int, Spawned]]]:
    """An instance of klag-exporter per KLAG_MODES until the block ends; yields job -> (its HTTP
    port, its process)."""
    with contextlib.ExitStack() as keep:
        started: dict[str, tuple[int, Spawned]] = {}
        for job, mode in KLAG_MODES.items():
            workdir = stack.dir / job
            workdir.mkdir(exist_ok=True)
            port = free_port()
            (workdir / "config.toml").write_text(klag_config(stack, port, mode))
            proc = keep.enter_context(process([str(tools.klag), "--config", str(workdir / "config.toml")],
                                              workdir / "klag.log", str(workdir)))
            url = f"http://127.0.0.1:{port}"
            wait_until(lambda: urllib.request.urlopen(f"{url}/health", timeout=2).status == 200, 60,
                       f"{job} (log: {workdir / 'klag.log'})")
            started[job] = (port, proc)
        yield started


def get_json(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def prom_value(prometheus: str, query: str) -> float | None:
    """An instant query's first value, None when it has none."""
    data = get_json(f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': query})}")["data"]["result"]
    return float(data[0]["value"][1]) if data else None
