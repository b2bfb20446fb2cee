"""The jars fetched from Maven must match the Python packages they run with."""
import re
from pathlib import Path

import pyspark

REPO = Path(__file__).resolve().parents[2]


def _pom_version(pom: str, artifact: str) -> str:
    text = (REPO / "deploy" / "maven" / pom / "pom.xml").read_text()
    m = re.search(rf"<artifactId>{re.escape(artifact)}</artifactId>\s*<version>([^<]+)</version>", text)
    assert m, f"{artifact} not in {pom}/pom.xml"
    return m.group(1)


def test_spark_kafka_connector_matches_pyspark() -> None:
    assert _pom_version("spark-kafka", "spark-sql-kafka-0-10_2.13") == pyspark.__version__


def test_kafka_broker_is_the_last_zookeeper_line() -> None:
    assert _pom_version("kafka", "kafka_2.13").startswith("3.9.")


def test_constraints_pin_pyspark() -> None:
    pins = dict(line.split("==") for line in (REPO / "constraints.txt").read_text().splitlines()
                if "==" in line)
    assert pins["pyspark"] == pyspark.__version__
