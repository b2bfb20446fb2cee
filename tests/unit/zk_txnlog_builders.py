"""Encoders of ZooKeeper transaction logs for the oracle's tests, byte by byte, from zookeeper.jute and
FileTxnLog (ZooKeeper 3.8): a file header, then per transaction an Adler32 checksum, the length, the
TxnHeader, the txn record and a TxnDigest, and the end-of-record byte 'B'; zeros after the last (the
preallocated tail). Written apart from the reader under test, so that a field read in the wrong
place or width fails here."""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

Record = tuple[int, bytes]   # an OpCode and the txn record's bytes


def _int(n: int) -> bytes:
    return struct.pack(">i", n)


def _long(n: int) -> bytes:
    return struct.pack(">q", n)


def _buffer(b: bytes | None) -> bytes:
    return _int(-1) if b is None else _int(len(b)) + b


def _string(s: str) -> bytes:
    return _buffer(s.encode())


def _vector(items: list[bytes]) -> bytes:
    return _int(len(items)) + b"".join(items)


OPEN_ACL = _vector([_int(31) + _string("world") + _string("anyone")])


def create(path: str, data: bytes | None = b"", ephemeral: bool = False, opcode: int = 1) -> Record:
    return opcode, _string(path) + _buffer(data) + OPEN_ACL + bytes([ephemeral]) + _int(0)   # parentCVersion


def create_container(path: str, data: bytes | None = b"") -> Record:
    return 19, _string(path) + _buffer(data) + OPEN_ACL + _int(0)


def create_ttl(path: str, data: bytes | None = b"", ttl: int = 60_000) -> Record:
    return 21, _string(path) + _buffer(data) + OPEN_ACL + _int(0) + _long(ttl)


def set_data(path: str, data: bytes | None, version: int = 1) -> Record:
    return 5, _string(path) + _buffer(data) + _int(version)


def delete(path: str) -> Record:
    return 2, _string(path)


def check(path: str, version: int = 0) -> Record:
    return 13, _string(path) + _int(version)


def error(code: int = -101) -> Record:
    return -1, _int(code)


def set_acl(path: str) -> Record:
    return 7, _string(path) + OPEN_ACL + _int(1)


def multi(*records: Record) -> Record:
    return 14, _vector([_int(op) + _buffer(body) for op, body in records])


def create_session(timeout_ms: int = 6000) -> Record:
    return -10, _int(timeout_ms)


def close_session(*paths: str, listed: bool = True) -> Record:
    """``listed=False``: a close written without CloseSessionTxn (zookeeper.closeSessionTxn.enabled=false)."""
    return -11, _vector([_string(p) for p in paths]) if listed else b""


# ---------------------------------------------------------------- Kafka's znode data

def partition_state(leader: int, isr: list[int], leader_epoch: int = 0, controller_epoch: int = 1) -> bytes:
    return json.dumps({"controller_epoch": controller_epoch, "leader": leader, "version": 1,
                       "leader_epoch": leader_epoch, "isr": isr}).encode()


def controller(broker: int, timestamp: int = 1_700_000_000_000) -> bytes:
    return json.dumps({"version": 2, "brokerid": broker, "timestamp": str(timestamp),
                       "kraftControllerEpoch": -1}).encode()


def topic(partitions: dict[int, list[int]], adding: dict[int, list[int]] | None = None,
          removing: dict[int, list[int]] | None = None) -> bytes:
    def keyed(m: dict[int, list[int]] | None) -> dict[str, list[int]]:
        return {str(p): r for p, r in (m or {}).items()}
    return json.dumps({"partitions": keyed(partitions), "topic_id": "fnIoJlAcR46Z5sTw3r0EeQ",
                       "adding_replicas": keyed(adding), "removing_replicas": keyed(removing), "version": 3}).encode()


# ---------------------------------------------------------------- the file

class TxnLog:
    """Transactions with zxids counting up from ``first`` (and times from ``time_ms``, a second apart)."""

    def __init__(self, first: int = 1, time_ms: int = 1_700_000_000_000, digest: bool = True) -> None:
        self.first = self.next_zxid = first
        self.time_ms = time_ms
        self.digest = digest
        self.entries: list[bytes] = []

    def add(self, record: Record, session: int = 0x100) -> int:
        """Appends a transaction; returns its zxid."""
        zxid, (opcode, body) = self.next_zxid, record
        header = _long(session) + _int(len(self.entries)) + _long(zxid) + _long(self.time(zxid)) + _int(opcode)
        self.entries.append(header + body + (_int(2) + _long(0x5EED) if self.digest else b""))
        self.next_zxid += 1
        return zxid

    def time(self, zxid: int) -> int:
        return self.time_ms + 1000 * (zxid - self.first)

    def bytes(self, tail: int = 64) -> bytes:
        out = _int(int.from_bytes(b"ZKLG", "big")) + _int(2) + _long(0)
        for entry in self.entries:
            out += _long(zlib.adler32(entry)) + _int(len(entry)) + entry + b"B"
        return out + bytes(tail)

    def write(self, data_dir: Path) -> Path:
        path = data_dir / "version-2" / f"log.{self.first:x}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.bytes())
        return path
