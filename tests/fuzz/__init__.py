"""Fuzzing every input kmon parses: one module per input family, each a list of targets.

A target is an entry point, the valid inputs its mutations start from (seeds, made with the
tests' own builders) and the property every input must keep: nothing raised but the parser's
documented error, the entity's last good state kept, every bad input counted, no case over a
second (:mod:`tests.fuzz.engine`). Cases are seeded, so a failure replays from its seed and
index. ``tests/fuzz/test_fuzz.py`` runs a few thousand cases of each in the default suite;
``python -m tests.fuzz`` runs the long ones (see bench/README.md, "Fuzzing").

They live under tests/ rather than bench/: they assert, and their short runs are tests.
"""
