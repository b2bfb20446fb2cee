"""What a process of a monitored stack (or of the test suite) is, by what its command line names."""
from __future__ import annotations

# the stack's processes by what their command line names
PARTS = [("kafka.Kafka", "Kafka"), ("QuorumPeerMain", "ZooKeeper"), ("pydaemon", "Spark Python workers"),
         ("org.apache.spark", "Spark JVM"), ("pyspark", "Spark JVM"), ("daemon", "Spark Python workers"),
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
