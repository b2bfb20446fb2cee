"""Where the installed parts live (see deploy/install.sh, which puts them there)."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class MissingTool(RuntimeError):
    pass


@dataclass(frozen=True)
class Toolchain:
    cache: Path
    java: str
    prometheus: str
    alertmanager: str

    @property
    def kafka_libs(self) -> Path:
        return self.cache / "jars" / "kafka"

    @property
    def spark_kafka_jars(self) -> Path:
        return self.cache / "jars" / "spark-kafka"

    @property
    def kafka_classpath(self) -> str:
        return str(self.kafka_libs / "*")

    def spark_jar_list(self) -> list[str]:
        return sorted(str(p) for p in self.spark_kafka_jars.glob("*.jar"))

    def check(self) -> "Toolchain":
        """Fail with the fix in the message rather than with a Java stack trace later."""
        if not any(self.kafka_libs.glob("kafka_2.13-*.jar")):
            raise MissingTool(f"Kafka broker jars not found in {self.kafka_libs}: run deploy/install.sh")
        return self


def _which(name: str, env: str) -> str:
    found = os.environ.get(env) or shutil.which(name)
    if not found:
        raise MissingTool(f"{name} not found on PATH (or ${env}): run deploy/install.sh")
    return found


def find_toolchain() -> Toolchain:
    cache = Path(os.environ.get("KMON_CACHE") or Path.home() / ".cache" / "kmon")
    return Toolchain(
        cache=cache,
        java=_which("java", "KMON_JAVA"),
        prometheus=_which("prometheus", "KMON_PROMETHEUS"),
        alertmanager=_which("prometheus-alertmanager", "KMON_ALERTMANAGER"),
    ).check()
