"""Where the installed parts live (see deploy/install.sh, which puts them there): the Kafka jars and
servers the local stack runs, and Spark's Kafka source jars `kmon stream` gives Spark.

Each part is looked up when it is used, so `kmon stream` does not need Prometheus
installed, nor `kmon stack` the Spark jars; a missing part fails with the fix.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


class MissingTool(RuntimeError):
    pass


@dataclass(frozen=True)
class Toolchain:
    cache: Path

    @property
    def java(self) -> str:
        return _which("java", "KMON_JAVA")

    @property
    def prometheus(self) -> str:
        return _which("prometheus", "KMON_PROMETHEUS")

    @property
    def alertmanager(self) -> str:
        return _which("prometheus-alertmanager", "KMON_ALERTMANAGER")

    @property
    def kafka_libs(self) -> Path:
        return self.cache / "jars" / "kafka"

    @property
    def kafka_classpath(self) -> str:
        if not any(self.kafka_libs.glob("kafka_2.13-*.jar")):
            raise MissingTool(f"Kafka broker jars not found in {self.kafka_libs}: run deploy/install.sh")
        return str(self.kafka_libs / "*")

    def spark_jar_list(self) -> list[str]:
        jars = sorted(str(p) for p in (self.cache / "jars" / "spark-kafka").glob("*.jar"))
        if not jars:
            raise MissingTool(f"Spark's Kafka source jars not found in {self.cache / 'jars' / 'spark-kafka'}: "
                              "run deploy/install.sh")
        return jars


def _which(name: str, env: str) -> str:
    found = os.environ.get(env) or shutil.which(name)
    if not found:
        raise MissingTool(f"{name} not found on PATH (or ${env}): run deploy/install.sh")
    return found


def find_toolchain() -> Toolchain:
    return Toolchain(cache=Path(os.environ.get("KMON_CACHE") or Path.home() / ".cache" / "kmon"))
