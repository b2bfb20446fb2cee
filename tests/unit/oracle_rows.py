"""The rows the oracle's tests expect of their hand-built logs, whose transactions or records sit at
positions 1, 2, ... a second apart, about topic t's partition 0 where a row is a partition's."""
from __future__ import annotations

from bench.oracle import OracleTransition

T0 = 1_700_000_000_000


def time_at(position: int) -> int:
    return T0 + 1000 * (position - 1)


def row(position: int, kind: str, entity: str, **fields: object) -> OracleTransition:
    return OracleTransition(kind=kind, entity=entity, position=position, time_ms=time_at(position), **fields)


def isr(position: int, kind: str, broker: int, old: str, new: str, epoch: int) -> OracleTransition:
    return row(position, kind, "partition:t:0", topic="t", partition=0, broker=broker, old=old, new=new, epoch=epoch)


def election(position: int, kind: str, old: int, new: int, epoch: int) -> OracleTransition:
    return row(position, kind, "partition:t:0", topic="t", partition=0, broker=new, old=str(old), new=str(new),
               epoch=epoch)
