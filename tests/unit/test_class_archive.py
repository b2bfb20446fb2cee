"""Class-data sharing for kmon's JVMs (kmon/class_archive.py), with the real java and Kafka's jars:
the first JVM of a kind writes the archive at its exit, the next start adopts it and maps it, a
writer killed before its exit leaves the next one to try again, one running writer is enough, and
the cache keeps the archives of each main class used last."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from kmon.toolchain import Toolchain, find_toolchain
from kmon.class_archive import CLAIM_GRACE_S, KEEP, archive_options

MAIN = "kafka.tools.StorageTool"   # a short-lived JVM of Kafka's class path


def _run(tools: Toolchain, options: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([tools.java, *options, "-cp", tools.kafka_classpath, MAIN, "random-uuid"],
                          capture_output=True, text=True, timeout=120)


def test_the_first_jvm_of_a_kind_writes_the_archive_and_the_next_one_maps_it(tmp_path: Path) -> None:
    tools = find_toolchain()
    first = archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN)
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in first)
    assert archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN) == [], "a second writer of one kind"
    assert _run(tools, first).returncode == 0

    second = archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN)
    archive = next(o.split("=", 1)[1] for o in second if o.startswith("-XX:SharedArchiveFile="))
    assert Path(archive).is_file() and not list(tmp_path.glob("*.part")) and not list(tmp_path.glob("*.claim"))
    mapped = _run(tools, [*second, "-Xshare:on"])   # -Xshare:on: the JVM fails where it cannot map the archive
    assert mapped.returncode == 0 and mapped.stdout.strip(), mapped.stderr
    assert archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN) == second
    other = archive_options(tmp_path, tools.java, tools.kafka_classpath, "kafka.Kafka")
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in other), "another main class is another kind"


def test_a_writer_that_never_exited_cleanly_leaves_the_next_start_to_write_it(tmp_path: Path) -> None:
    tools = find_toolchain()
    first = archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN)   # its JVM SIGKILLed: nothing written
    part = Path(next(o.split("=", 1)[1] for o in first if o.startswith("-XX:ArchiveClassesAtExit=")))
    assert archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN) == [], "its claim is still young"
    long_ago = time.time() - CLAIM_GRACE_S - 1
    for claim in tmp_path.glob("*.claim"):
        os.utime(claim, (long_ago, long_ago))
    assert archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN) == first, "an old claim, no archive"
    part.write_bytes(b"half an archive")   # its JVM killed while writing it: refused, and written once more
    assert archive_options(tmp_path, tools.java, tools.kafka_classpath, MAIN) == first and not part.exists()


def test_an_archive_of_a_jvm_whose_launcher_makes_its_class_path_is_adopted_once_its_writer_is_gone(
        tmp_path: Path) -> None:
    """Spark's driver (streaming/cli.py): its class path is not known here, so -Xshare:on cannot check
    the archive; one its writer left is taken, and a JVM that cannot map it runs without it."""
    tools = find_toolchain()
    first = archive_options(tmp_path, tools.java, "/opt/spark/jars/*", "org.example.Main", checked=False)
    part = Path(next(o.split("=", 1)[1] for o in first if o.startswith("-XX:ArchiveClassesAtExit=")))
    part.write_bytes(b"an archive")
    adopted = archive_options(tmp_path, tools.java, "/opt/spark/jars/*", "org.example.Main", checked=False)
    assert f"-XX:SharedArchiveFile={part.with_suffix('')}" in adopted and not part.exists()


def test_of_each_main_class_the_archives_last_used_stay(tmp_path: Path) -> None:
    """Each fresh clone is a kind of its own (its venv's Spark jars): the cache keeps the KEEP archives
    of a main class used last, not one per clone ever made."""
    java = find_toolchain().java

    def adopt(checkout: str, at: float) -> Path:
        options = archive_options(tmp_path, java, f"/{checkout}/jars/*", "org.example.Main", checked=False)
        Path(next(o.split("=", 1)[1] for o in options if o.startswith("-XX:ArchiveClassesAtExit="))).write_bytes(b"x")
        used = archive_options(tmp_path, java, f"/{checkout}/jars/*", "org.example.Main", checked=False)
        archive = Path(next(o.split("=", 1)[1] for o in used if o.startswith("-XX:SharedArchiveFile=")))
        os.utime(archive, (at, at))
        return archive

    now = time.time()
    a, b, c = adopt("a", now - 300), adopt("b", now - 200), adopt("c", now - 100)
    assert not a.exists() and b.exists() and c.exists() and KEEP == 2
    archive_options(tmp_path, java, "/b/jars/*", "org.example.Main", checked=False)   # b used again: the newest
    d = adopt("d", now)
    assert b.exists() and d.exists() and not c.exists()
    other = archive_options(tmp_path, java, "/a/jars/*", "org.example.Other", checked=False)
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in other)   # another main class: its own count
