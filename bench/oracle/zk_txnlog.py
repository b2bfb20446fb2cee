"""ZooKeeper's transaction log, as ZooKeeper 3.8 writes it (FileTxnLog, persistence.Util and
SerializeUtils; the records in zookeeper-jute's zookeeper.jute; the types in ZooDefs.OpCode):

* a file ``<dataDir>/version-2/log.<zxid of its first transaction, hex>``: a FileHeader (int magic
  "ZKLG", int version 2, long dbid), then entries: long checksum (Adler32 of the entry), int length,
  the entry, byte 'B'. ZooKeeper preallocates the file: a zero length ends it, and so does a last
  entry cut short (a crash while writing it), as ZooKeeper itself reads it;
* an entry: TxnHeader (long clientId: the session, int cxid, long zxid, long time, int type), the
  transaction of that type, and a TxnDigest (int version, long treeDigest) when digests are on.

Each transaction becomes a :class:`Txn` holding what it did to the tree: creates, deletes, data
writes, and a session's close (whose ephemeral znodes go with it). A multi whose sub-transactions
include an error did nothing (ZooKeeper logs a failed multi whole, applying none of it).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from bench.oracle import IncompleteLog, MalformedLog
from bench.oracle.jute import JuteReader

MAGIC = int.from_bytes(b"ZKLG", "big")
VERSION = 2
DIGEST_BYTES = 12   # TxnDigest: int version, long treeDigest
EOR = 0x42          # 'B', after each entry
# ZooDefs.OpCode: the types a transaction can have
OPCODES = {1: "create", 2: "delete", 5: "setData", 7: "setACL", 13: "check", 14: "multi", 15: "create2",
           16: "reconfig", 19: "createContainer", 20: "deleteContainer", 21: "createTTL", -10: "createSession",
           -11: "closeSession", -1: "error"}


@dataclass(frozen=True)
class Create:
    path: str
    data: bytes | None
    ephemeral: bool   # owned by the creating session: it goes when the session closes


@dataclass(frozen=True)
class Delete:
    path: str


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes | None


@dataclass(frozen=True)
class CloseSession:
    # the session's ephemeral znodes as the leader listed them (CloseSessionTxn, ZooKeeper 3.6+);
    # None when it did not list them (zookeeper.closeSessionTxn.enabled=false)
    paths: tuple[str, ...] | None


Op = Create | Delete | SetData | CloseSession


@dataclass(frozen=True)
class Txn:
    zxid: int
    time_ms: int
    session: int
    type: str              # its OpCode's name
    ops: tuple[Op, ...]    # what it did to the tree, in order (none: e.g. an error, a check, a session opened)


def read_logs(data_dir: Path) -> list[Txn]:
    """Every transaction in ``data_dir``'s logs, in zxid order. Raises IncompleteLog unless they run
    from the first transaction ZooKeeper ever logged there, without a gap."""
    logs = sorted((int(p.name.split(".", 1)[1], 16), p) for p in (data_dir / "version-2").glob("log.*"))
    if not logs:
        raise IncompleteLog(f"{data_dir}: no transaction log (version-2/log.*)")
    txns: list[Txn] = []
    for _, path in logs:
        for txn in read_log(path.read_bytes(), str(path)):
            _check_follows(txns[-1].zxid if txns else None, txn.zxid, path)
            txns.append(txn)
    return txns


def _check_follows(prev: int | None, zxid: int, path: Path) -> None:
    """A zxid is an epoch (high 32 bits) and a counter; each epoch's transactions count from 1, and
    every transaction is logged (a failed one as an error), so a log without a gap counts up by one."""
    epoch, counter = zxid >> 32, zxid & 0xFFFFFFFF
    if prev is None:
        follows = counter == 1
    else:
        follows = (epoch == prev >> 32 and counter == (prev & 0xFFFFFFFF) + 1) or (epoch > prev >> 32 and counter == 1)
    if not follows:
        after = f"after {prev:#x}" if prev is not None else "as the first transaction"
        raise IncompleteLog(f"{path}: zxid {zxid:#x} comes {after}: the transactions before it are not in this "
                            "dataDir's logs (purged, or this server started from another's snapshot)")


def read_log(data: bytes, name: str) -> list[Txn]:
    """The transactions of one log file's bytes; ``name`` is said in errors."""
    r = JuteReader(data, name)
    if len(data) < 16 or r.int32("the magic") != MAGIC:
        raise MalformedLog(f"{name}: not a ZooKeeper transaction log (no ZKLG header)")
    version = r.int32("the version")
    if version != VERSION:
        raise MalformedLog(f"{name}: transaction log format version {version}, not {VERSION}")
    r.int64("the dbid")
    txns = []
    while r.remaining() >= 12:
        start = r.pos
        checksum, length = r.int64("a checksum"), r.int32("an entry's length")
        if length <= 0 or r.remaining() < length + 1:
            break   # the preallocated zeros, or a last entry cut short
        entry = data[r.pos:r.pos + length]
        r.pos += length
        if data[r.pos] != EOR:
            break   # ZooKeeper: "Last transaction was partial"
        r.pos += 1
        if zlib.adler32(entry) != checksum:
            raise MalformedLog(f"{name}: the entry at byte {start} fails its checksum")
        txns.append(_txn(JuteReader(entry, f"{name}, entry at byte {start}")))
    return txns


def _txn(r: JuteReader) -> Txn:
    session = r.int64("clientId")
    r.int32("cxid")
    zxid, time_ms, code = r.int64("zxid"), r.int64("time"), r.int32("type")
    ops = _close_session(r) if code == -11 else _ops(r, _opcode(r, code))
    if r.remaining() not in (0, DIGEST_BYTES):
        raise MalformedLog(f"{r.where}: {r.remaining()} bytes left after the transaction")
    return Txn(zxid, time_ms, session, OPCODES[code], ops)


def _opcode(r: JuteReader, code: int) -> str:
    if code not in OPCODES:
        raise MalformedLog(f"{r.where}: transaction type {code}, which ZooKeeper 3.8 does not log")
    return OPCODES[code]


def _ops(r: JuteReader, op: str) -> tuple[Op, ...]:
    """The record of type ``op`` (all of it), as what it did to the tree."""
    if op in ("create", "create2", "createContainer", "createTTL"):
        path, data = r.ustring("the path"), r.buffer("the data")
        r.vector(_acl, "the ACL")
        ephemeral = r.boolean("ephemeral") if op in ("create", "create2") else False
        r.int32("parentCVersion")
        if op == "createTTL":
            r.int64("the TTL")
        return (Create(_path(r, path), data, ephemeral),)
    if op in ("delete", "deleteContainer"):
        return (Delete(_path(r, r.ustring("the path"))),)
    if op in ("setData", "reconfig"):   # reconfig writes the new config into /zookeeper/config
        path, data = r.ustring("the path"), r.buffer("the data")
        r.int32("the version")
        return (SetData(_path(r, path), data),)
    if op == "setACL":
        r.ustring("the path")
        r.vector(_acl, "the ACL")
        r.int32("the version")
    elif op == "check":
        r.ustring("the path")
        r.int32("the version")
    elif op in ("error", "createSession"):
        r.int32("the error" if op == "error" else "the session timeout")
    elif op == "multi":
        return _multi(r)
    return ()


def _multi(r: JuteReader) -> tuple[Op, ...]:
    subs = r.vector(lambda x: (x.int32("a sub-transaction's type"), x.buffer("a sub-transaction")),
                    "the sub-transactions") or []
    ops: list[Op] = []
    for i, (code, body) in enumerate(subs):
        sub = JuteReader(body or b"", f"{r.where}, sub-transaction {i}")
        ops += _ops(sub, _opcode(sub, code))
        if sub.remaining():
            raise MalformedLog(f"{sub.where}: {sub.remaining()} bytes left after it")
    # one error among them: the multi failed, ZooKeeper applied none of it
    return () if any(code == -1 for code, _ in subs) else tuple(ops)


def _close_session(r: JuteReader) -> tuple[Op, ...]:
    start = r.pos
    try:
        paths = r.vector(lambda x: _path(x, x.ustring("a path")), "the ephemeral paths")
        if r.remaining() in (0, DIGEST_BYTES):
            return (CloseSession(None if paths is None else tuple(paths)),)
    except MalformedLog:
        pass
    r.pos = start   # no CloseSessionTxn: what is there is the digest
    return (CloseSession(None),)


def _acl(r: JuteReader) -> None:
    r.int32("an ACL's permissions")
    r.ustring("an ACL's scheme")
    r.ustring("an ACL's id")


def _path(r: JuteReader, path: str | None) -> str:
    if not path or not path.startswith("/"):
        raise MalformedLog(f"{r.where}: {path!r} is not a znode path")
    return path
