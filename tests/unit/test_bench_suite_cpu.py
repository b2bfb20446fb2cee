"""bench suite-cpu (bench/suite_cpu.py): a command's CPU by process kind, counted from its start. Run as
`python -m bench` runs it (bench/'s root imports test builders: imported here, it would be a cycle)."""
from __future__ import annotations

import json
import subprocess
import sys

from bench.support.parts import kind

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1: pass"


def test_a_commands_cpu_is_counted_by_kind_and_what_ran_before_it_is_not() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "suite-cpu", "--every", "0.2", "--", sys.executable, "-c",
                           SPIN], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {row["kind"]: row for row in json.loads(done.stderr.strip().splitlines()[-1])}
    assert rows["other"]["cpu_s"] >= 0.8   # the spinning command (a last interval of it may be lost)
    # this pytest process ran long before: only what it spent during the command counts
    assert rows.get("pytest", {"cpu_s": 0})["cpu_s"] < 10


def test_a_tests_processes_are_charged_to_its_group(tmp_path) -> None:
    """Under xdist, what a test's child process spends is its group's (a unit test's here)."""
    (tmp_path / "test_spin.py").write_text(
        "import subprocess, sys\n"
        f"def test_spin():\n    subprocess.run([sys.executable, '-c', {SPIN!r}], check=True)\n")
    done = subprocess.run([sys.executable, "-m", "bench", "suite-cpu", "--every", "0.2", "--", sys.executable, "-m",
                           "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", str(tmp_path / "test_spin.py")],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stderr.strip().splitlines()[-1])
    [unit] = [row for row in rows if row["group"] == "unit and fuzz tests"]
    assert unit["cpu_s"] >= 0.8 and unit["kind"].startswith("other "), unit   # the spinning child
    assert unit["wall_s"] >= 1


def test_the_suites_processes_are_told_apart() -> None:
    assert kind("/v/bin/python -m pytest -n 2") == "pytest"
    assert kind("python -c import sys;exec(eval(sys.stdin.readline()))") == "pytest"
    assert kind("java -Dkafka.logs.dir=/tmp/pytest-of-root/pytest-3/stack0/logs -cp libs/* kafka.Kafka b.properties"
                ) == "Kafka"
    assert kind("python -m streaming.pydaemon pyspark.worker") == "Spark Python workers"
    assert kind("python -m pyspark.daemon") == "Spark Python workers"
    assert kind("java -cp /v/pyspark/jars/* -Xmx1g org.apache.spark.deploy.SparkSubmit --conf "
                "spark.python.daemon.module=streaming.pydaemon pyspark-shell") == "Spark JVM"
    assert kind("python -m cli collect groups --cluster c") == "collectors"
