"""The samples of a Prometheus text exposition, as the tests read /metrics: {(name, labels): value}.

The integration tests read a stack's /metrics every half second while they wait, and
prometheus_client's parser took ~40 µs a sample: a core's tenth per waiting test at the views'
size, on a suite that is short of CPU. This reads the same samples (tests/unit/test_exposition.py
holds it to that parser) with two regular expressions.
"""
from __future__ import annotations

import re

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

_SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^"}]*(?:"[^"\\]*(?:\\.[^"\\]*)*"[^"}]*)*)\})?[ \t]+(\S+)[ \t]*(?:\S+)?$')
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(?:,|$)')
_PLAIN = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')   # a label with no escape: nearly all
_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"n": "\n", "\\": "\\", '"': '"'}


def samples(text: str) -> Samples:
    """Every sample line of ``text``; ValueError naming the line for one that is not a sample.
    Lines are split on "\\n" only: a label value may hold any other line separator unescaped."""
    out: Samples = {}
    for line in text.split("\n"):
        if not line or line.startswith("#"):
            continue
        found = _SAMPLE.match(line)
        if found is None:
            raise ValueError(f"not a sample: {line!r}")
        name, labels, value = found.groups()
        out[(name, _labels(labels, line) if labels else frozenset())] = float(value)
    return out


def _labels(text: str, line: str) -> frozenset[tuple[str, str]]:
    if "\\" not in text:
        plain = _PLAIN.findall(text)
        if text.count('"') == 2 * len(plain) and text.count("=") == len(plain):
            return frozenset(plain)
    pairs, pos = [], 0
    while pos < len(text):
        found = _LABEL.match(text, pos)
        if found is None:
            if text[pos:].strip(" \t,"):
                raise ValueError(f"labels not read at {pos}: {line!r}")
            break
        name, raw = found.groups()
        pairs.append((name, _ESCAPE.sub(lambda m: _ESCAPED.get(m.group(1), m.group(0)), raw) if "\\" in raw else raw))
        pos = found.end()
    return frozenset(pairs)
