"""What a local stack asks its servers to know they serve (and reads off their files): metadata
answers, ApiVersions, ZooKeeper's four-letter words, HTTP readiness, a formatted KRaft directory's
cluster id, a Java tool's error."""
from __future__ import annotations

import base64
import re
import socket
import ssl
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from kmon.http_client import Credentials
from kmon.reachability import kafka_probe


def formatted_cluster_id(log_dir: Path) -> str | None:
    """The cluster id a KRaft log directory was formatted with (its meta.properties), if it was."""
    try:
        text = (log_dir / "meta.properties").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "cluster.id" and value.strip():
            return value.strip()
    return None


def java_error(output: str) -> str:
    """Pure: what a Java tool's output says went wrong, without its stack frames: the message of
    the first exception it printed, else its last line that is no frame."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        found = re.search(r"(?:Exception|Error): (.+)$", line)
        if found:
            return found.group(1)
    said = [line for line in lines if not line.startswith("at ") and not line.startswith("...")]
    return said[-1] if said else ""


def kraft_cluster_id() -> str:
    """A random cluster id as Kafka writes them (a UUID in URL-safe base64), never starting with
    '-': the storage tool would read one that does as an option (1 start in 64; Kafka's own
    Uuid.randomUuid draws again too)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return cluster_id


def _metadata(port: int, client: dict[str, str] | None = None) -> ClusterMetadata | None:
    """The broker on ``port``'s answer to a metadata request, None while it gives none."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0, **(client or {})})
    try:
        return admin.list_topics(timeout=2)
    except KafkaException:
        return None


def serves_metadata(port: int, broker_id: int, client: dict[str, str] | None = None) -> bool:
    """The broker on ``port`` answers a metadata request that lists itself and a controller."""
    md = _metadata(port, client)
    return md is not None and broker_id in md.brokers and md.controller_id >= 0


def metadata_brokers(port: int, client: dict[str, str] | None = None) -> set[int]:
    """The brokers the broker on ``port`` lists in its metadata (under KRaft: registered and unfenced)."""
    md = _metadata(port, client)
    return set(md.brokers) if md is not None else set()


def answers_api_versions(port: int, tls: ssl.SSLContext | None = None) -> bool:
    """The Kafka server on ``port`` answers an ApiVersions request: it serves requests, which is more
    than listening. A KRaft controller is asked so, as no client library here talks to one."""
    return kafka_probe("127.0.0.1", port, 2.0, tls) is None


def four_letter(port: int, word: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def http_ok(url: str, credentials: Credentials | None = None) -> bool:
    """200 from ``url`` (kmon's own endpoints: over TLS and with a password where the stack is secured)."""
    credentials = credentials or Credentials()
    request = urllib.request.Request(url, headers=credentials.header())
    with urllib.request.urlopen(request, timeout=2, context=credentials.tls) as r:
        return r.status == 200
