"""Kafka's own reading of a KRaft metadata log: ``DumpLogSegments --cluster-metadata-decoder`` (Kafka 4,
org.apache.kafka.tools.DumpLogSegments), which decodes every record with Kafka's generated schemas and
prints it as JSON, and the parse of what it prints:

    baseOffset: 85 lastOffset: 85 count: 1 ... partitionLeaderEpoch: 2 ... isControl: true ... CreateTime: 1795740473422 ... isvalid: true
    | offset: 85 CreateTime: 1795740473422 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] LeaderChange: {"version":0,"leaderId":1,...}
    | offset: 91 CreateTime: ... headerKeys: [] payload: {"type":"REGISTER_BROKER_RECORD","version":4,"data":{"brokerId":1,...}}

Kafka's tool rather than a parser of the record batches: the oracle then shares no decoding with kmon
(whose collector decodes the batches itself), and follows each new record version as Kafka does.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.oracle import IncompleteLog, MalformedLog
from kmon.toolchain import Toolchain

TOOL = "org.apache.kafka.tools.DumpLogSegments"
_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .* partitionLeaderEpoch: (-?\d+) .* isControl: (true|false) "
                    r".* CreateTime: (-?\d+) .* isvalid: (true|false)$")
_RECORD = re.compile(r"\| offset: (\d+) CreateTime: -?\d+ keySize: -?\d+ valueSize: -?\d+ sequence: -?\d+ "
                     r"headerKeys: \[[^\]]*\] ?(.*)$")
_CONTENT = re.compile(r"(\w+):? (.*)$")   # "payload: {..}", "LeaderChange: {..}", "KRaftVoters {..}"


@dataclass(frozen=True)
class MetadataRecord:
    offset: int
    epoch: int        # its batch's partitionLeaderEpoch: the raft epoch of the leader that wrote it
    time_ms: int      # its batch's CreateTime (the newest of its records'): when the leader appended it
    control: bool     # a raft control record (LeaderChange, KRaftVoters ...), not a metadata record
    type: str         # e.g. PARTITION_CHANGE_RECORD; a control record's kind, e.g. LeaderChange
    data: dict[str, Any]   # its fields as Kafka's JSON converters name them


def segments(metadata_log_dir: Path) -> list[Path]:
    """The log's segments in offset order. Raises IncompleteLog unless the first begins at offset 0."""
    found = sorted(metadata_log_dir.glob("*.log"), key=lambda p: int(p.stem))
    if not found:
        raise IncompleteLog(f"{metadata_log_dir}: no log segment (*.log)")
    if int(found[0].stem) != 0:
        raise IncompleteLog(f"{metadata_log_dir}: the log starts at offset {int(found[0].stem)}; the records before "
                            "were cleaned away (a snapshot holds the state they left, not what happened)")
    return found


def dump(files: list[Path], toolchain: Toolchain) -> str:
    """What DumpLogSegments prints of ``files``, read in that order."""
    done = subprocess.run([toolchain.java, "-cp", toolchain.kafka4_classpath, TOOL, "--cluster-metadata-decoder",
                           "--files", ",".join(map(str, files))], capture_output=True, text=True)
    if done.returncode != 0:
        raise MalformedLog(f"{TOOL} failed on {files[0].parent}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def parse(text: str) -> list[MetadataRecord]:
    """The records DumpLogSegments printed, in offset order. Raises IncompleteLog if they do not run from
    offset 0 without a gap, MalformedLog if Kafka could not read one."""
    records: list[MetadataRecord] = []
    batch: tuple[int, bool, int] | None = None   # epoch, control, time of the batch being read
    next_offset = 0
    for line in text.splitlines():
        if m := _BATCH.match(line):
            base, last, epoch, control, time_ms, valid = m.groups()
            if valid != "true":
                raise MalformedLog(f"the batch at offset {base} fails its CRC")
            if int(base) != next_offset:
                raise IncompleteLog(f"the batch at offset {base} follows offset {next_offset - 1}: the records "
                                    "between are missing")
            batch, next_offset = (int(epoch), control == "true", int(time_ms)), int(last) + 1
        elif m := _RECORD.match(line):
            if batch is None:
                raise MalformedLog(f"a record before any batch: {line[:200]}")
            records.append(_record(int(m.group(1)), batch, m.group(2)))
    return records


def _record(offset: int, batch: tuple[int, bool, int], content: str) -> MetadataRecord:
    epoch, control, time_ms = batch
    m = _CONTENT.match(content)
    try:
        doc = json.loads(m.group(2)) if m else None
    except ValueError:
        doc = None
    if control:   # the raft layer's own: only LeaderChange matters here
        return MetadataRecord(offset, epoch, time_ms, True, m.group(1) if m else content, doc or {})
    if m is None or not isinstance(doc, dict):
        # e.g. "payload: Error at 12, skipping. ..." where Kafka could not decode the record
        raise MalformedLog(f"the record at offset {offset}: {content[:300]}")
    return MetadataRecord(offset, epoch, time_ms, False, str(doc.get("type")), doc.get("data") or {})
