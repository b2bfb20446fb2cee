"""The oracle's reader of ZooKeeper's transaction log and its replay of the tree, on logs written byte
by byte (tests/unit/zk_txnlog_builders.py) and on a real one (tests/data/oracle/zk), checked against
ZooKeeper's own TxnLogToolkit where Java and ZooKeeper's jar are installed."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.oracle import IncompleteLog, MalformedLog
from bench.oracle.zk_tree import ZnodeChange, changes, versions
from bench.oracle.zk_txnlog import CloseSession, Create, Delete, SetData, read_log, read_logs
from kmon.toolchain import find_toolchain
from tests.unit.zk_txnlog_builders import (TxnLog, check, close_session, create, create_container, create_session,
                                           create_ttl, delete, error, multi, set_acl, set_data)

SAMPLE = Path(__file__).parents[1] / "data" / "oracle" / "zk"
T0 = 1_700_000_000_000


def test_every_type_a_transaction_can_have() -> None:
    log = TxnLog()
    for record in (create_session(), create("/a", b"1"), create("/a/e", None, ephemeral=True, opcode=15),
                   create_container("/c"), create_ttl("/t", b"x"), set_data("/a", b"2"), check("/a"),
                   set_acl("/a"), delete("/t"), error(), close_session("/a/e"), close_session(listed=False)):
        log.add(record)
    txns = read_log(log.bytes(), "log.1")
    assert [(t.zxid, t.time_ms, t.session, t.type, t.ops) for t in txns] == [
        (1, T0, 0x100, "createSession", ()),
        (2, T0 + 1000, 0x100, "create", (Create("/a", b"1", False),)),
        (3, T0 + 2000, 0x100, "create2", (Create("/a/e", None, True),)),
        (4, T0 + 3000, 0x100, "createContainer", (Create("/c", b"", False),)),
        (5, T0 + 4000, 0x100, "createTTL", (Create("/t", b"x", False),)),
        (6, T0 + 5000, 0x100, "setData", (SetData("/a", b"2"),)),
        (7, T0 + 6000, 0x100, "check", ()),
        (8, T0 + 7000, 0x100, "setACL", ()),
        (9, T0 + 8000, 0x100, "delete", (Delete("/t"),)),
        (10, T0 + 9000, 0x100, "error", ()),
        (11, T0 + 10000, 0x100, "closeSession", (CloseSession(("/a/e",)),)),
        (12, T0 + 11000, 0x100, "closeSession", (CloseSession(None),)),
    ]


def test_a_multi_applies_all_its_parts_or_none() -> None:
    log = TxnLog(digest=False)   # ZooKeeper with digests off writes none
    log.add(multi(check("/controller_epoch", 3), create("/p", b"a"), set_data("/q", b"b")))
    log.add(multi(check("/controller_epoch", 3), error(-103)))   # the check failed: nothing happened
    log.add(multi(create("/r"), error(0)))   # ZooKeeper marks each part of a failed multi an error
    assert [t.ops for t in read_log(log.bytes(), "log.1")] == [(Create("/p", b"a", False), SetData("/q", b"b")), (), ()]


def test_the_log_ends_at_the_preallocated_zeros_or_at_a_last_entry_cut_short() -> None:
    log = TxnLog()
    for record in (create("/a"), create("/b")):
        log.add(record)
    whole = log.bytes(tail=0)
    assert [t.zxid for t in read_log(whole + bytes(4096), "log.1")] == [1, 2]
    assert [t.zxid for t in read_log(whole[:-1], "log.1")] == [1]       # no 'B' after the last
    assert [t.zxid for t in read_log(whole[:-10], "log.1")] == [1]      # the last one's bytes cut
    assert [t.zxid for t in read_log(whole[:-1] + b"X", "log.1")] == [1]


def test_a_damaged_log_is_refused() -> None:
    log = TxnLog()
    log.add(create("/a", b"data"))
    data = bytearray(log.bytes())
    data[-70] ^= 0xFF   # in the entry: its checksum no longer matches
    with pytest.raises(MalformedLog, match="checksum"):
        read_log(bytes(data), "log.1")
    with pytest.raises(MalformedLog, match="ZKLG"):
        read_log(b"ZKSN" + log.bytes()[4:], "log.1")
    with pytest.raises(MalformedLog, match="version 1"):
        read_log(log.bytes()[:4] + b"\0\0\0\1" + log.bytes()[8:], "log.1")


def test_the_logs_must_run_from_the_first_transaction_without_a_gap(tmp_path: Path) -> None:
    first, second = TxnLog(first=1), TxnLog(first=3)
    for log in (first, second):
        log.add(create(f"/a{log.next_zxid}"))
        log.add(create(f"/b{log.next_zxid}"))
    first.write(tmp_path)
    second.write(tmp_path)
    assert [t.zxid for t in read_logs(tmp_path)] == [1, 2, 3, 4]

    new_epoch = TxnLog(first=(1 << 32) + 1)   # a new leader's epoch counts from 1 again
    new_epoch.add(create("/c"))
    new_epoch.write(tmp_path)
    assert [t.zxid for t in read_logs(tmp_path)][-1] == (1 << 32) + 1

    (tmp_path / "version-2" / "log.1").unlink()   # purged
    with pytest.raises(IncompleteLog, match="zxid 0x3 comes as the first transaction"):
        read_logs(tmp_path)
    TxnLog(first=1).write(tmp_path)   # an empty first log: zxids 1 and 2 are missing
    with pytest.raises(IncompleteLog, match="zxid 0x3 comes as the first"):
        read_logs(tmp_path)
    with pytest.raises(IncompleteLog, match="no transaction log"):
        read_logs(tmp_path / "elsewhere")


def test_a_gap_in_the_middle_is_said(tmp_path: Path) -> None:
    first, later = TxnLog(first=1), TxnLog(first=4)
    first.add(create("/a"))
    later.add(create("/b"))
    first.write(tmp_path)
    later.write(tmp_path)
    with pytest.raises(IncompleteLog, match="zxid 0x4 comes after 0x1"):
        read_logs(tmp_path)


def _replayed(*records: tuple[tuple[int, bytes], int]) -> list[tuple[int, list[ZnodeChange]]]:
    log = TxnLog()
    for record, session in records:
        log.add(record, session)
    return [(t.zxid, touched) for t, touched in changes(read_log(log.bytes(), "log.1"))]


def test_a_closed_session_takes_its_ephemeral_znodes_with_it() -> None:
    assert _replayed(
        (create("/brokers"), 1), (create("/brokers/ids/1", b"r", ephemeral=True), 7),
        (create("/controller", b"c", ephemeral=True), 7), (create("/kept", b"k"), 7),
        (delete("/controller"), 7), (create("/controller", b"d", ephemeral=True), 7),
        (close_session(listed=False), 7),   # not listed: what the session still owned
        (create("/brokers/ids/2", b"s", ephemeral=True), 8),
        (close_session("/brokers/ids/2", "/gone/already"), 8),
    ) == [
        (1, [ZnodeChange("/brokers", True, True, b"")]),
        (2, [ZnodeChange("/brokers/ids/1", True, True, b"r")]),
        (3, [ZnodeChange("/controller", True, True, b"c")]),
        (4, [ZnodeChange("/kept", True, True, b"k")]),
        (5, [ZnodeChange("/controller", False, False, None)]),
        (6, [ZnodeChange("/controller", True, True, b"d")]),
        (7, [ZnodeChange("/brokers/ids/1", False, False, None), ZnodeChange("/controller", False, False, None)]),
        (8, [ZnodeChange("/brokers/ids/2", True, True, b"s")]),
        (9, [ZnodeChange("/brokers/ids/2", False, False, None)]),
    ]


def test_one_transaction_s_changes_are_what_it_left() -> None:
    # a broker's registration: created without data, then written, in one multi
    assert _replayed((multi(create("/b", None, ephemeral=True), set_data("/b", b"reg", 1)), 3),
                     (multi(create("/tmp"), delete("/tmp")), 3),   # never seen by anyone
                     (multi(delete("/b"), create("/b", b"again")), 3)) == [
        (1, [ZnodeChange("/b", True, True, b"reg")]),
        (3, [ZnodeChange("/b", False, True, b"again")]),
    ]


def test_every_version_of_a_znode_is_counted() -> None:
    log = TxnLog()
    for record in (create("/s", b"0"), set_data("/s", b"1"), multi(set_data("/s", b"2"), create("/t")),
                   delete("/s"), create("/s", b"0"), multi(check("/x"), error())):
        log.add(record)
    assert versions(read_log(log.bytes(), "log.1")) == {"/s": 4, "/t": 1}


# ---------------------------------------------------------------- a real log, and ZooKeeper's own reading of it

def test_a_real_log_reads_whole() -> None:
    txns = read_logs(SAMPLE)
    assert (len(txns), txns[0].zxid, txns[-1].zxid) == (200, 1, 0xC8)
    assert [t.ops for t in txns if t.zxid == 0x30] == [(Create("/kafka/controller", _REGISTRATION, True),
                                                        SetData("/kafka/controller_epoch", b"1"))]


_REGISTRATION = b'{"version":2,"brokerid":1,"timestamp":"1795740346691","kraftControllerEpoch":-1}'
# TxnLogToolkit -d: "<date> session 0x<id> cxid 0x<n> zxid 0x<n> <type> <txn>"
_TOOLKIT_LINE = re.compile(r"session 0x([0-9a-f]+) cxid 0x[0-9a-f]+ zxid 0x([0-9a-f]+) (\w+)")


def test_zookeeper_s_own_toolkit_reads_the_same_transactions() -> None:
    jars = find_toolchain().kafka_libs
    if shutil.which("java") is None or not any(jars.glob("zookeeper-3.8*.jar")):
        pytest.fail("Java or ZooKeeper's jar is not installed: run deploy/install.sh, which `make test` runs first",
                    pytrace=False)
    (log,) = (SAMPLE / "version-2").iterdir()
    out = subprocess.run(["java", "-cp", f"{jars}/*", "org.apache.zookeeper.server.persistence.TxnLogToolkit",
                          "-d", str(log)], capture_output=True, text=True, errors="replace", check=True,
                         timeout=120).stdout
    theirs = [(int(zxid, 16), int(session, 16), kind) for session, zxid, kind in _TOOLKIT_LINE.findall(out)]
    assert theirs == [(t.zxid, t.session, t.type) for t in read_logs(SAMPLE)]
    assert "EOF reached after 200 txns." in out

