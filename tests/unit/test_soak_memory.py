"""The soak's memory verdict: a JVM's committed heap read from hsperfdata, its resident heap and code cache
from the kernel's map, and growth judged beyond both."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.soak.memory import JvmMemory, Sample, memory_row, split
from bench.support.jvm import heap_committed_mb, parse_code_span, parse_heap_span, perf_counters, resident_within

MB = 2**20


def hsperfdata(counters: dict[str, int], order: str = "<") -> bytes:
    """An hsperfdata file as a HotSpot JVM writes it: a header, then one entry per long counter."""
    entries = b""
    for name, value in counters.items():
        raw = name.encode() + b"\0"
        raw += b"\0" * (-(20 + len(raw)) % 8)
        entries += struct.pack(order + "iiibbbbi", 20 + len(raw) + 8, 20, 0, ord("J"), 0, 0, 0,
                               20 + len(raw)) + raw + struct.pack(order + "q", value)
    header = struct.pack(">I", 0xCAFEC0C0) + bytes([1 if order == "<" else 0, 2, 0, 1])
    header += struct.pack(order + "iiqii", 32 + len(entries), 0, 0, 32, len(counters))
    return header + entries


@pytest.mark.parametrize("order", ["<", ">"])
def test_the_heap_committed_is_the_young_and_old_generations_capacity(tmp_path: Path, order: str) -> None:
    (tmp_path / "4242").write_bytes(hsperfdata({"sun.gc.generation.0.capacity": 96 * MB,
                                                "sun.gc.generation.0.used": 17 * MB,
                                                "sun.gc.generation.1.capacity": 133 * MB}, order))
    assert heap_committed_mb(4242, tmp_path) == 229


def test_no_jvm_or_no_counters_is_none_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "1").write_bytes(b"#!/bin/sh\n" * 8)
    (tmp_path / "2").write_bytes(hsperfdata({"sun.gc.generation.0.capacity": MB}))
    (tmp_path / "3").write_bytes(hsperfdata({"sun.gc.generation.0.capacity": MB})[:40])
    assert [heap_committed_mb(pid, tmp_path) for pid in (1, 2, 3, 4)] == [None, None, None, None]
    with pytest.raises(ValueError):
        perf_counters(b"\0" * 64)


def test_a_jvm_committing_its_heap_in_steps_is_not_growth_but_memory_beyond_the_heap_is() -> None:
    """The stream app of the 60-minute KRaft soak: each step of its resident memory was a step of its heap."""
    steps = [Sample(t * 60.0, 900.0 + heap, heap, heap, 40.0) for t, heap in
             [(m, 279.0 if m < 25 else 381.0 if m < 45 else 510.0) for m in range(60)]]
    row = memory_row(steps, warm_up_s=600)
    assert row and row.last > row.first * 1.1 and abs(row.growth) < 0.001 and (row.heap_first, row.heap_last) == (
        279, 510)
    leaking = [s._replace(mb=s.mb + s.at / 60) for s in steps]   # a megabyte a minute beyond the heap
    assert memory_row(leaking, warm_up_s=600).growth > 0.05   # type: ignore[union-attr]
    assert memory_row(steps[:11], warm_up_s=600) is None


def test_a_committed_heap_becoming_resident_and_the_jit_filling_its_code_cache_are_not_growth() -> None:
    """The stream app of the 50-minute ZooKeeper-mode soak: its heap committed at 320 MB throughout, its
    resident memory rising as the collector first wrote regions of it, and as the JIT compiled."""
    touched = lambda t: min(320.0, 200 + 4 * t)
    code = lambda t: 30 + 0.9 * t
    filling = [Sample(t * 60.0, 800.0 + touched(t) + code(t), touched(t), 320.0, code(t)) for t in range(40)]
    row = memory_row(filling, warm_up_s=600)
    assert row and row.last > row.first and abs(row.growth) < 1e-9 and (row.heap_first, row.heap_last) == (320, 320)
    assert (round(row.code_first), round(row.code_last)) == (39, 65)


def test_python_workers_forked_for_a_batch_now_and_then_are_not_growth() -> None:
    """The stream app of the 60-minute KRaft soak: flat beyond its heap and code cache, but for a sample now
    and then in which Spark ran 770 MB more of Python workers; late in a run they would read as a leak."""
    flat = [Sample(t * 10.0, 1250.0, 330.0, 384.0, 80.0) for t in range(170)]
    forked = [s._replace(mb=s.mb + 770) if i in (150, 162) else s for i, s in enumerate(flat)]
    assert abs(memory_row(forked, warm_up_s=600).growth) < 1e-9   # type: ignore[union-attr]
    leaking = [s._replace(mb=s.mb + s.at / 60) for s in forked]   # a megabyte a minute beyond them
    assert memory_row(leaking, warm_up_s=600).growth > 0.05   # type: ignore[union-attr]


def test_a_sample_tells_the_driver_its_jvm_and_heap_and_its_workers_apart() -> None:
    parts = split(120.0, [(900.0, JvmMemory(300.0, 432.0, 60.0)), (40.0, None), (35.0, None)])
    assert (parts.own, parts.jvm, parts.heap_resident, parts.heap_committed, parts.code_resident, parts.other) == (
        120.0, 900.0, 300.0, 432.0, 60.0, 75.0)
    assert parts.total == 1095.0


def test_where_the_heap_and_the_code_cache_lie_is_read_from_jcmd() -> None:
    said = """27558:
 garbage-first heap   total 401408K, used 181593K [0x00000000c0000000, 0x0000000100000000)
  region size 1024K, 64 young (65536K), 4 survivors (4096K)
 Metaspace       used 156547K, committed 158208K, reserved 1245184K
"""
    assert parse_heap_span(said) == (0xC0000000, 0x100000000)
    failed = "27558:\ncom.sun.tools.attach.AttachNotSupportedException: no such process\n"
    assert parse_heap_span(failed) is None
    said = """27558:
CodeHeap 'non-profiled nmethods': size=120036Kb used=11973Kb max_used=11973Kb free=108062Kb
 bounds [0x00007f91e4ec7000, 0x00007f91e5a87000, 0x00007f91ec400000]
CodeHeap 'profiled nmethods': size=120032Kb used=35388Kb max_used=35388Kb free=84643Kb
 bounds [0x00007f91dd400000, 0x00007f91df6a0000, 0x00007f91e4938000]
CodeHeap 'non-nmethods': size=5692Kb used=1826Kb max_used=1883Kb free=3865Kb
 bounds [0x00007f91e4938000, 0x00007f91e4ba8000, 0x00007f91e4ec7000]
 total_blobs=19930 nmethods=18666 adapters=1175
"""
    assert parse_code_span(said) == (0x7F91DD400000, 0x7F91EC400000)
    assert parse_code_span(failed) is None


def test_the_resident_part_of_a_span_is_the_resident_memory_of_the_mappings_within_it() -> None:
    def mapping(start: int, end: int, rss_kb: int, perms: str = "rw-p") -> str:
        return (f"{start:08x}-{end:08x} {perms} 00000000 00:00 0 \nSize: {(end - start) // 1024} kB\n"
                f"Rss: {rss_kb} kB\nPss: {rss_kb} kB\n")
    smaps = (mapping(0xBFF00000, 0xC0000000, 512)              # just below the heap
             + mapping(0xC0000000, 0xD8800000, 300 * 1024)    # committed, mostly written
             + mapping(0xD8800000, 0x100000000, 0, "---p")    # reserved, not committed
             + mapping(0x100000000, 0x100100000, 1024))       # class space, just above
    assert resident_within(smaps, (0xC0000000, 0x100000000)) == 300
