"""`kmon stream`'s flags and the Kafka source options they become (no Spark started)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli.main import build_parser
from streaming.app import OFFSET_RETRY_INTERVAL_S, jvm_gone, kafka_source_options, shuffle_partitions
from streaming.cluster_share import ClusterShare
from streaming.config import StreamConfig
from streaming.cli import stream_config


@pytest.fixture
def jar_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A toolchain cache holding a Kafka source jar, as deploy/install.sh leaves it."""
    jars = tmp_path / "jars" / "spark-kafka"
    jars.mkdir(parents=True)
    (jars / "spark-sql-kafka.jar").write_bytes(b"")
    monkeypatch.setenv("KMON_CACHE", str(tmp_path))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    return jars


def parse(*argv: str) -> StreamConfig:
    return stream_config(build_parser().parse_args(["stream", *argv]))


def test_kafka_timeouts_come_from_flags_and_environment(jar_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse("--bootstrap-servers", "k1:9092", "--kafka-timeout", "4.5")
    assert (cfg.kafka_timeout_s, cfg.kafka_outage_limit_s) == (4.5, 300.0)
    assert cfg.spark_jars == (str(jar_cache / "spark-sql-kafka.jar"),)
    monkeypatch.setenv("KMON_KAFKA_OUTAGE_LIMIT", "60")
    assert parse("--bootstrap-servers", "k1:9092").kafka_outage_limit_s == 60.0


def test_the_stall_timeout_comes_from_its_flag_or_the_environment(jar_cache: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse("--bootstrap-servers", "k1:9092").stall_timeout_s == StreamConfig.stall_timeout_s
    assert parse("--bootstrap-servers", "k1:9092", "--stall-timeout", "0").stall_timeout_s == 0
    monkeypatch.setenv("KMON_STALL_TIMEOUT", "90")
    assert parse("--bootstrap-servers", "k1:9092").stall_timeout_s == 90.0


@pytest.mark.parametrize("argv, named", [
    (["--stall-timeout", "-1"], "'-1'"),
    (["--kafka-timeout", "0"], "'0' must be greater than 0"),
    (["--kafka-outage-limit", "soon"], "'soon' is not a number"),
])
def test_bad_kafka_timeouts_are_named(jar_cache: Path, capsys: pytest.CaptureFixture[str],
                                      argv: list[str], named: str) -> None:
    with pytest.raises(SystemExit):
        parse("--bootstrap-servers", "k1:9092", *argv)
    err = capsys.readouterr().err
    assert argv[0] in err and named in err


def test_the_share_comes_from_its_flag_or_the_environment_and_a_bad_one_is_named(
        jar_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def share(*argv: str) -> ClusterShare:
        return parse("--bootstrap-servers", "k1:9092", *argv).cluster_share

    assert share() == ClusterShare() and share().everything
    assert share("--cluster-share", "1/4") == ClusterShare(1, 4)
    monkeypatch.setenv("KMON_CLUSTER_SHARE", "2/3")
    assert share() == ClusterShare(2, 3)
    monkeypatch.setenv("KMON_CLUSTER_SHARE", "3/3")
    with pytest.raises(SystemExit):
        share()
    err = capsys.readouterr().err
    assert "--cluster-share" in err and "3/3" in err and "KMON_CLUSTER_SHARE" in err


def test_source_gives_up_on_a_dead_leader_after_the_timeout_and_retries_through_the_outage_limit() -> None:
    cfg = StreamConfig(bootstrap_servers="k1:9092", events_topic="ev", kafka_timeout_s=10, kafka_outage_limit_s=300,
                       max_offsets_per_trigger=500)
    opts = kafka_source_options(cfg)
    assert opts["kafka.bootstrap.servers"] == "k1:9092" and opts["subscribe"] == "ev"
    assert opts["maxOffsetsPerTrigger"] == "500"
    # the Admin client rejects an API timeout below its request timeout
    assert opts["kafka.default.api.timeout.ms"] == opts["kafka.request.timeout.ms"] == "10000"
    attempts, pause = int(opts["fetchOffset.numRetries"]), int(opts["fetchOffset.retryIntervalMs"]) / 1000
    assert pause == OFFSET_RETRY_INTERVAL_S
    assert attempts * (10 + pause) >= 300 > (attempts - 1) * (10 + pause)


def test_a_short_outage_limit_keeps_sparks_three_attempts() -> None:
    opts = kafka_source_options(StreamConfig(bootstrap_servers="k1:9092", kafka_timeout_s=30, kafka_outage_limit_s=5))
    assert opts["fetchOffset.numRetries"] == "3"
    assert opts["kafka.default.api.timeout.ms"] == "30000"


@pytest.mark.parametrize("master, cores", [("local[2]", 2), ("local[3,2]", 3), ("local", 1), ("local[*]", None),
                                           ("spark://m:7077", 4), (None, 4), ("local-cluster[2,1,1024]", 4)])
def test_state_partitions_default_to_the_local_masters_cores(master: str | None, cores: int | None) -> None:
    expected = cores if cores is not None else (os.cpu_count() or 1)
    assert shuffle_partitions(StreamConfig(bootstrap_servers="k", master=master)) == expected
    assert shuffle_partitions(StreamConfig(bootstrap_servers="k", master=master, shuffle_partitions=7)) == 7


def test_the_default_checkpoint_is_the_users_state_directory_whatever_the_working_directory(
        jar_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("KMON_CHECKPOINT", raising=False)
    monkeypatch.chdir(tmp_path)
    here = parse("--bootstrap-servers", "k1:9092").checkpoint
    monkeypatch.chdir(jar_cache)
    assert parse("--bootstrap-servers", "k1:9092").checkpoint == here == tmp_path / "state" / "kmon" / "checkpoint"
    history = build_parser().parse_args(["history"]).dir
    assert history == here / "history"
    monkeypatch.setenv("KMON_CHECKPOINT", "/srv/kmon")
    assert parse("--bootstrap-servers", "k1:9092").checkpoint == Path("/srv/kmon")


def test_a_jvm_that_ended_itself_is_told_with_its_exit_code_and_out_of_memory_with_what_to_change() -> None:
    assert jvm_gone("ConnectionRefusedError", None) == "Spark's JVM is gone (ConnectionRefusedError)"
    oom = jvm_gone("ConnectionRefusedError", 52)
    assert "exited with 52, out of memory" in oom and "--driver-memory" in oom and "--cluster-share" in oom
    assert "exited with 50, an uncaught exception" in jvm_gone("Py4JNetworkError", 50)
    killed = jvm_gone("ConnectionRefusedError", -9)
    assert "exited with -9, its log above says why" in killed and "--driver-memory" not in killed
