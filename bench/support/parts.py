"""What a process of a monitored stack (or of the test suite) is, by what its command line names."""
from __future__ import annotations

# the stack's processes by what their command line names, the first marker found deciding: the Spark
# driver's JVM names streaming.pydaemon too (its spark.python.daemon.module), its Python workers no class
PARTS = [("kafka.Kafka", "Kafka"), ("QuorumPeerMain", "ZooKeeper"), ("org.apache.spark", "Spark JVM"),
         ("pydaemon", "Spark Python workers"), ("pyspark.daemon", "Spark Python workers"), ("pyspark", "Spark JVM"),
         ("cli stream", "stream driver"), ("cli collect", "collectors"), ("alertmanager", "Alertmanager"),
         ("prometheus", "Prometheus")]


def part(cmdline: str) -> str:
    return next((name for marker, name in PARTS if marker in cmdline), "other")


def kind(cmdline: str) -> str:
    """A part of a stack, or the suite's own pytest processes (xdist's workers among them); a stack's
    process names the suite's directories (/tmp/pytest-of-...) and stays a part."""
    found = part(cmdline)
    if found == "other" and ("pytest" in cmdline or "import sys;exec(eval(sys.stdin.readline()))" in cmdline):
        return "pytest"
    return found
