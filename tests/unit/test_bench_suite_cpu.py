"""bench suite-cpu (bench/suite_cpu.py): a command's CPU by process kind, counted from its start."""
from __future__ import annotations

import sys

from bench import suite_cpu

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1: pass"


def test_a_commands_cpu_is_counted_by_kind_and_what_ran_before_it_is_not() -> None:
    rows = {row["kind"]: row for row in suite_cpu.run([sys.executable, "-c", SPIN], 0.2, lambda line: None)}
    assert rows["other"]["cpu_s"] >= 0.8   # the spinning command (a last interval of it may be lost)
    # this pytest process ran long before: only what it spent during the command counts
    assert rows.get("pytest", {"cpu_s": 0})["cpu_s"] < 10


def test_the_suites_processes_are_told_apart() -> None:
    assert suite_cpu.kind("/v/bin/python -m pytest -n 2") == "pytest"
    assert suite_cpu.kind("python -c import sys;exec(eval(sys.stdin.readline()))") == "pytest"
    assert suite_cpu.kind("java -cp libs/* kafka.Kafka server.properties") == "Kafka"
    assert suite_cpu.kind("python -m streaming.pydaemon pyspark.worker") == "Spark Python workers"
    assert suite_cpu.kind("python -m cli collect groups --cluster c") == "collectors"
