"""Where the installed parts live (see deploy/install.sh, which puts them there): the Kafka jars
(3.9 for ZooKeeper mode and the events node, 4.x for the KRaft mode) and servers the local stack
runs, and Spark's Kafka source jars `kmon stream` gives Spark.

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
    def helm(self) -> str:
        """Helm, as `deploy/install.sh --with-helm` builds it (the chart's tests), else on PATH."""
        built = self.cache / "go" / "bin" / "helm"
        return str(built) if built.is_file() else _which("helm", "KMON_HELM")

    @property
    def kafka_libs(self) -> Path:
        return self.cache / "jars" / "kafka"

    @property
    def kafka_classpath(self) -> str:
        return _classpath(self.kafka_libs, "kafka_2.13-*.jar", "Kafka broker")

    @property
    def kafka4_libs(self) -> Path:
        return self.cache / "jars" / "kafka4"

    @property
    def kafka4_classpath(self) -> str:
        """Kafka 4.x (KRaft only), for the local stack's --kraft cluster."""
        return _classpath(self.kafka4_libs, "kafka_2.13-4.*.jar", "Kafka 4 node")

    def spark_jar_list(self) -> list[str]:
        jars = sorted(str(p) for p in (self.cache / "jars" / "spark-kafka").glob("*.jar"))
        if not jars:
            raise MissingTool(f"Spark's Kafka source jars not found in {self.cache / 'jars' / 'spark-kafka'}: "
                              "run deploy/install.sh")
        return jars


def _classpath(libs: Path, jar: str, what: str) -> str:
    if not any(libs.glob(jar)):
        raise MissingTool(f"{what} jars not found in {libs}: run deploy/install.sh")
    return str(libs / "*")


def _which(name: str, env: str) -> str:
    found = os.environ.get(env) or shutil.which(name)
    if not found:
        raise MissingTool(f"{name} not found on PATH (or ${env}): run deploy/install.sh")
    return found


def find_toolchain() -> Toolchain:
    return Toolchain(cache=Path(os.environ.get("KMON_CACHE") or Path.home() / ".cache" / "kmon"))
