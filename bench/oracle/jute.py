"""Jute's binary encoding, as ZooKeeper's ``BinaryInputArchive`` reads it: big-endian int32 and int64,
a boolean as one byte, and buffers, UTF-8 strings and vectors behind an int32 length (-1: null)."""
from __future__ import annotations

import struct
from typing import Callable, TypeVar

from bench.oracle import MalformedLog

T = TypeVar("T")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


class JuteReader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where   # named in every error: the file and the entry

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedLog(f"{self.where}: {what} of {n} bytes at byte {self.pos} runs past the end")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int32(self, what: str = "an int") -> int:
        return _INT.unpack(self._take(4, what))[0]

    def int64(self, what: str = "a long") -> int:
        return _LONG.unpack(self._take(8, what))[0]

    def boolean(self, what: str = "a boolean") -> bool:
        return self._take(1, what) != b"\0"

    def buffer(self, what: str = "a buffer") -> bytes | None:
        n = self.int32(f"the length of {what}")
        return None if n == -1 else self._take(n, what)

    def ustring(self, what: str = "a string") -> str | None:
        raw = self.buffer(what)
        try:
            return None if raw is None else raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedLog(f"{self.where}: {what} is not UTF-8 ({e.reason})") from None

    def vector(self, item: Callable[["JuteReader"], T], what: str = "a vector") -> list[T] | None:
        n = self.int32(f"the length of {what}")
        if n == -1:
            return None
        if n < 0 or n > self.remaining():   # every item takes a byte at least
            raise MalformedLog(f"{self.where}: {what} of {n} items at byte {self.pos}")
        return [item(self) for _ in range(n)]
