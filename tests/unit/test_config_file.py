"""kmon's config file (kmon/config_file.py): its keys are the flags', each value checked by its flag's
own check, and every problem is one error naming the file, the line and the key."""
from __future__ import annotations

from pathlib import Path

import pytest

from kmon.config_file import ClusterEntry, ConfigError, EventsEntry, StreamEntry, flag_values, load, parse_with_file

GOOD = """\
clusters:
  - cluster: prod
    bootstrap-servers: b1:9092,b2:9092
    client:
      security.protocol: SASL_SSL
      sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule required password="${PROD_PASSWORD}";
  - cluster: legacy
    bootstrap-servers: old1:9092
    zookeeper: zk1:2181,zk2:2181/kafka
    command-config: legacy.properties
  - cluster: locked-down
    bootstrap-servers: k1:9092
    controllers: c1:9093
    sampled: true
events:
  bootstrap-servers: events1:9092
  topic: kmon-events-fleet
stream:
  metrics-port: 9308
  trigger-interval: 0.5
  checkpoint: state/checkpoint
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "legacy.properties").write_text("security.protocol=PLAINTEXT\n")
    path = tmp_path / "kmon.yaml"
    path.write_text(text)
    return path


def test_a_fleet_is_read_with_its_paths_beside_the_file_and_its_secrets_from_the_environment(tmp_path: Path) -> None:
    config = load(write(tmp_path, GOOD), {"PROD_PASSWORD": "s3cret"})
    assert [c.cluster for c in config.clusters] == ["prod", "legacy", "locked-down"]
    prod, legacy, locked = config.clusters
    assert prod == ClusterEntry(cluster="prod", bootstrap_servers="b1:9092,b2:9092", line=2, client={
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cret";'})
    assert legacy.zookeeper == ("zk1:2181,zk2:2181", "/kafka") and legacy.command_config == tmp_path / "legacy.properties"
    assert locked.controllers == "c1:9093" and locked.sampled is True and legacy.sampled is False
    assert config.events == EventsEntry(bootstrap_servers="events1:9092", topic="kmon-events-fleet")
    assert config.stream == StreamEntry(checkpoint=tmp_path / "state" / "checkpoint", metrics_port=9308,
                                        trigger_interval=0.5)
    assert config.cluster("legacy") is legacy
    with pytest.raises(ConfigError, match=r"no cluster 'other' \(it names prod, legacy, locked-down\)"):
        config.cluster("other")


def test_a_minimal_file_is_one_cluster(tmp_path: Path) -> None:
    config = load(write(tmp_path, "clusters:\n  - cluster: a\n    bootstrap-servers: h:1\n"), {})
    assert config.clusters == (ClusterEntry(cluster="a", bootstrap_servers="h:1", line=2),)
    assert config.events == EventsEntry() and config.stream == StreamEntry()


@pytest.mark.parametrize("text, error", [
    (GOOD.replace("    zookeeper:", "    zookeper:"),
     r"kmon.yaml:9: cluster: unknown key 'zookeper' \(known: bootstrap-servers, client, cluster, command-config, "
     r"controllers, sampled, zk-client-config, zookeeper\)"),
    (GOOD.replace("cluster: legacy", "cluster: prod"), r"kmon.yaml:7: cluster 'prod' is named twice \(first at line 2\)"),
    (GOOD.replace("bootstrap-servers: old1:9092", "bootstrap-servers: old1"),
     r"kmon.yaml:8: cluster: bootstrap-servers: 'old1' in 'old1' is not host:port"),
    (GOOD.replace("metrics-port: 9308", "metrics-port: lots"), r"kmon.yaml:19: stream: metrics-port: 'lots' is not an integer"),
    (GOOD.replace("sampled: true", "sampled: maybe"), r"kmon.yaml:14: cluster: sampled: 'maybe' is not true or false"),
    (GOOD.replace("cluster: legacy", "cluster: legacy/east"), r"kmon.yaml:7: cluster: cluster: 'legacy/east' is not a cluster name"),
    (GOOD.replace("    controllers: c1:9093\n", "    controllers: c1:9093\n    controllers: c2:9093\n"),
     r"kmon.yaml:14: cluster: controllers is given twice \(first at line 13\)"),
    (GOOD.replace("  - cluster: legacy\n", "  - \n"), r"kmon.yaml:8: cluster: cluster is missing"),
    (GOOD.replace("events:", "event:"), r"kmon.yaml:15: the file: unknown key 'event' \(known: clusters, events, stream, web-config-file\)"),
    (GOOD.replace("  topic: kmon-events-fleet", "  topic: [a, b]"), r"kmon.yaml:17: events: topic: a single value"),
    ("clusters: prod\n", r"kmon.yaml:1: clusters: a list of clusters"),
    ("events: {}\n", r"kmon.yaml: no clusters"),
    ("", r"kmon.yaml: empty"),
    ("clusters:\n  - cluster: [\n", r"kmon.yaml:3: not YAML"),
])
def test_a_bad_file_is_one_error_naming_the_line_and_the_key(tmp_path: Path, text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        load(write(tmp_path, text), {"PROD_PASSWORD": "x"})


@pytest.mark.parametrize("text, cluster, error", [
    (GOOD.replace("command-config: legacy.properties", "command-config: missing.properties"), "legacy",
     r"kmon.yaml:10: cluster: command-config: '.*/missing.properties' is not a file"),
    (GOOD.replace("${PROD_PASSWORD}", "${NOT_SET_ANYWHERE}"), "prod",
     r"kmon.yaml:6: cluster: client: sasl.jaas.config: the environment variable NOT_SET_ANYWHERE is not set"),
])
def test_what_one_cluster_lacks_here_is_said_where_that_cluster_is_used(
        tmp_path: Path, text: str, cluster: str, error: str) -> None:
    """A collector of one cluster runs where another's secrets and client files are not (a Helm chart's
    pods): the file loads, the other clusters are used, the lacking one is one error naming the line."""
    config = load(write(tmp_path, text), {"PROD_PASSWORD": "x"})
    others = [c.cluster for c in config.clusters if c.cluster != cluster]
    assert [config.cluster(name).cluster for name in others] == others
    with pytest.raises(ConfigError, match=error):
        config.cluster(cluster)


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere.yaml: cannot be read: No such file or directory"):
        load(tmp_path / "nowhere.yaml", {})


def test_config_check_of_a_bad_file_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.main import main

    monkeypatch.setenv("PROD_PASSWORD", "x")
    path = write(tmp_path, GOOD.replace("cluster: legacy", "cluster: prod"))
    assert main(["config", "check", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"kmon config check: {path}:7: cluster 'prod' is named twice (first at line 2)"]


def test_each_command_takes_its_flags_from_the_file_and_a_flag_or_variable_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.main import build_parser

    path = write(tmp_path, GOOD)
    monkeypatch.setenv("PROD_PASSWORD", "s3cret")

    def parsed(*argv: str):
        return parse_with_file(build_parser(), list(argv), lambda a: " ".join(filter(None, (a.command, getattr(
            a, "source", None)))))

    kraft = parsed("collect", "kraft", "--config", str(path), "--cluster", "locked-down")
    assert (kraft.controllers, kraft.bootstrap_servers, kraft.sampled) == ("c1:9093", "k1:9092", True)
    assert (kraft.events_bootstrap_servers, kraft.events_topic) == ("events1:9092", "kmon-events-fleet")
    groups = parsed("collect", "groups", "--config", str(path), "--cluster", "prod", "--events-topic", "given")
    assert groups.bootstrap_servers == "b1:9092,b2:9092" and groups.events_topic == "given"
    assert groups.monitored_client["sasl.jaas.config"].endswith('password="s3cret";')
    zk = parsed("collect", "zk", "--config", str(path), "--cluster", "legacy")
    assert zk.zookeeper == ("zk1:2181,zk2:2181", "/kafka") and zk.cluster == "legacy"
    monkeypatch.setenv("KMON_METRICS_PORT", "9999")
    stream = parsed("stream", "--config", str(path))
    assert (stream.bootstrap_servers, stream.trigger_interval, stream.metrics_port) == ("events1:9092", 0.5, 9999)
    assert stream.checkpoint == tmp_path / "state" / "checkpoint"
    run = parsed("run", "--config", str(path), "--cluster", "prod")   # the clusters: cmd_run reads them
    assert (run.events_bootstrap_servers, run.events_topic, run.trigger_interval, run.cluster) == (
        "events1:9092", "kmon-events-fleet", 0.5, "prod")
    assert run.bootstrap_servers is None and run.controllers is None
    assert flag_values("collect groups", load(path, {"PROD_PASSWORD": "x"}), "legacy") == {
        "cluster": "legacy", "bootstrap_servers": "old1:9092", "command_config": tmp_path / "legacy.properties",
        "events_bootstrap_servers": "events1:9092", "events_topic": "kmon-events-fleet"}


def test_a_collector_of_a_fleet_needs_to_be_told_which_cluster(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.main import main

    monkeypatch.setenv("PROD_PASSWORD", "x")
    path = write(tmp_path, GOOD)
    for argv, said in ((["--cluster", "nope"], f"{path}: no cluster 'nope' (it names prod, legacy, locked-down)"),
                       ([], f"{path} names several clusters (prod, legacy, locked-down): --cluster NAME says which")):
        with pytest.raises(SystemExit) as exit:
            main(["collect", "groups", "--config", str(path), *argv])
        assert exit.value.code == 2
        assert capsys.readouterr().err == f"kmon: {said}\n"


def test_the_web_config_file_secures_every_service_reading_the_file_and_kmon_run_refuses_it(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from cli.main import build_parser

    hashed = "$2b$04$" + "a" * 53
    (tmp_path / "web.yml").write_text(f"basic_auth_users: {{prometheus: '{hashed}'}}\n")
    path = write(tmp_path, "clusters:\n  - cluster: prod\n    bootstrap-servers: b1:9092\n"
                           "events: {bootstrap-servers: e1:9092}\nweb-config-file: web.yml\n")

    def parsed(*argv: str):
        return parse_with_file(build_parser(), list(argv), lambda a: " ".join(filter(None, (a.command, getattr(
            a, "source", None)))))
    for argv in (("collect", "groups"), ("stream",)):
        web = parsed(*argv, "--config", str(path)).web_config_file
        assert web.source == tmp_path / "web.yml" and set(web.users) == {"prometheus"}, argv
    with pytest.raises(SystemExit):
        parsed("run", "--config", str(path))
    assert "web-config-file: kmon run starts a Prometheus of its own" in capsys.readouterr().err
    (tmp_path / "web.yml").write_text("basic_auth_users: {prometheus: plain}\n")
    with pytest.raises(ConfigError, match=r"kmon.yaml:5: web-config-file: web config .*web.yml: basic_auth_users: "
                                          r"prometheus: not a bcrypt hash"):
        load(path)
