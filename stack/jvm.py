"""The command lines of a local stack's JVMs (ZooKeeper, Kafka 3.9 brokers, Kafka 4.x nodes): heap,
garbage collector, logging and class path, and the class-data sharing options chosen at each start."""
from __future__ import annotations

from pathlib import Path

from kmon.class_archive import archive_options
from kmon.toolchain import Toolchain

JVM_OPTS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=50", "-Djava.awt.headless=true",
            "-XX:+ExitOnOutOfMemoryError"]


def kafka3(tools: Toolchain, directory: Path, main: str, config: Path, heap: str, name: str,
           extra: list[str] | None = None) -> list[str]:
    """A JVM of Kafka 3.9's jars (a broker, ZooKeeper, the events node), logging through log4j."""
    return _java(tools, heap, [*(extra or []), f"-Dlog4j.configuration=file:{directory / 'log4j.properties'}",
                               f"-Dkafka.logs.dir={directory / 'logs' / name}"], tools.kafka_classpath, main, config)


def kafka4(tools: Toolchain, directory: Path, config: Path, heap: str, extra: list[str]) -> list[str]:
    """A Kafka 4.x node: its own jars, logging through log4j2."""
    return _java(tools, heap, [*extra, f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}"],
                 tools.kafka4_classpath, "kafka.Kafka", config)


def _java(tools: Toolchain, heap: str, options: list[str], classpath: str, main: str, config: Path) -> list[str]:
    return [tools.java, f"-Xmx{heap}", f"-Xms{heap}", *JVM_OPTS, *options, "-cp", classpath, main, str(config)]


def with_class_archive(tools: Toolchain, argv: list[str]) -> list[str]:
    """A Kafka or ZooKeeper JVM's command line with the class-data sharing options of its kind, chosen
    at each start (kmon/class_archive.py); any other command as it is."""
    if "-cp" not in argv or Path(argv[0]).name != "java":
        return argv
    at = argv.index("-cp")
    options = archive_options(tools.cache / "cds", argv[0], argv[at + 1], argv[at + 2])
    return [argv[0], *options, *argv[1:]]
