"""The soak's memory verdict: a JVM's committed heap read from hsperfdata, and growth judged beyond it."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.soak.memory import memory_row, split
from bench.support.jvm import heap_committed_mb, perf_counters

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
    steps = [(t * 60.0, 900.0 + heap, heap) for t, heap in
             [(m, 279.0 if m < 25 else 381.0 if m < 45 else 510.0) for m in range(60)]]
    first, last, growth, heap_first, heap_last = memory_row(steps, warm_up_s=600)   # type: ignore[misc]
    assert last > first * 1.1 and abs(growth) < 0.001 and (heap_first, heap_last) == (279, 510)
    leaking = [(t, mb + t / 60, heap) for t, mb, heap in steps]   # a megabyte a minute beyond the heap
    assert memory_row(leaking, warm_up_s=600)[2] > 0.05   # type: ignore[index]
    assert memory_row(steps[:11], warm_up_s=600) is None


def test_a_sample_tells_the_driver_its_jvm_and_heap_and_its_workers_apart() -> None:
    parts = split(120.0, [(900.0, 432.0), (40.0, None), (35.0, None)])
    assert (parts.own, parts.jvm, parts.heap, parts.other) == (120.0, 900.0, 432.0, 75.0)
    assert parts.total == 1095.0
