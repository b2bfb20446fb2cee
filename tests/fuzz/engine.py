"""Runs a target's cases: seeded mutation of its seeds, a deadline per case, findings kept.

Case ``i`` of a run with seed ``s`` is made by ``random.Random(f"{s}:{i}")`` alone, from the
target's seeds (taken in turn), so any case of any run replays by its seed and index
(``python -m tests.fuzz FAMILY --target T --seed S --replay I``). A finding is a case whose
check raised (anything: the checks raise AssertionError for a broken property, and the
parsers' documented errors never leave a check) or that took longer than the deadline; the
run goes on, and keeps one finding per distinct failure.
"""
from __future__ import annotations

import logging
import random
import signal
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from tests.fuzz.cases import Case
from tests.fuzz.mutations import mutate

# a case that takes more CPU than this is a finding: nothing kmon parses may hang. CPU, not wall time:
# on a machine shared with the suite's stacks (load 30 on 2 cores) a 70 ms case took over a second
DEADLINE_S = 1.0


@dataclass(frozen=True)
class Target:
    """One entry point: ``check`` runs a case and raises when a property breaks."""
    name: str
    arity: int                                  # fields per message
    seeds: Callable[[], Sequence[Case]]         # valid inputs, built when the target runs
    check: Callable[[Case], None]
    max_messages: int = 64
    smoke_cases: int = 2000   # in the default test run: a few seconds at most


@dataclass(frozen=True)
class Finding:
    target: str
    seed: int
    index: int          # -1: a seed itself
    case: Case
    error: str          # the exception, one line
    where: str          # the innermost frame of kmon's code it came from
    trace: str

    def replay(self, family: str) -> str:
        return f"python -m tests.fuzz {family} --target {self.target} --seed {self.seed} --replay {self.index}"


@dataclass
class Report:
    target: str
    cases: int = 0
    seconds: float = 0.0
    slowest_s: float = 0.0
    findings: dict[str, Finding] = field(default_factory=dict)   # signature -> first case of it


class Timeout(Exception):
    """The case ran past the deadline."""


def case_at(target: Target, seeds: Sequence[Case], seed: int, index: int) -> Case:
    """Case ``index`` of a run with ``seed``: mutations of the seed whose turn it is, drawn from
    one generator of its own. Index -1 is the first seed as it is."""
    if index < 0:
        return seeds[0]
    rng = random.Random(f"{seed}:{index}")
    base = seeds[index % len(seeds)]
    return mutate(base, rng, seeds, target.max_messages)


def run(target: Target, cases: int, seed: int, seeds: Sequence[Case] | None = None,
        max_findings: int = 20) -> Report:
    """Every seed as it is, then ``cases`` mutated cases."""
    seeds = list(seeds if seeds is not None else target.seeds())
    report = Report(target.name)
    start = time.perf_counter()
    logging.disable(logging.CRITICAL)   # every bad case is logged: millions of lines, none read
    for index, case in _numbered(target, seeds, seed, cases):
        started = time.perf_counter()
        finding = run_one(target, case, seed, index)
        report.slowest_s = max(report.slowest_s, time.perf_counter() - started)
        report.cases += 1
        if finding is not None:
            report.findings.setdefault(finding.where + " " + finding.error.split(":")[0], finding)
            if len(report.findings) >= max_findings:
                break
    logging.disable(logging.NOTSET)
    report.seconds = time.perf_counter() - start
    return report


def _numbered(target: Target, seeds: Sequence[Case], seed: int, cases: int) -> Iterator[tuple[int, Case]]:
    for s in seeds:
        yield -1, s
    for index in range(cases):
        yield index, case_at(target, seeds, seed, index)


def run_one(target: Target, case: Case, seed: int = 0, index: int = -1) -> Finding | None:
    """The case's check under the deadline; a Finding if it failed."""
    previous = signal.signal(signal.SIGPROF, _alarm)
    started = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, DEADLINE_S * 2)   # a hang is stopped; past DEADLINE_S is found below
    try:
        target.check(case)
        error: BaseException | None = None
    except Exception as e:   # anything the check let through is a finding
        error = e
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    took = time.process_time() - started
    if error is None and took > DEADLINE_S:
        error = Timeout(f"took {took:.2f} CPU-s")
    if error is None:
        return None
    return Finding(target.name, seed, index, case, f"{type(error).__name__}: {error}"[:300],
                   _where(error), "".join(traceback.format_exception(error)))


def _where(error: BaseException) -> str:
    """The innermost frame in kmon's own code (not the harness's, not a library's)."""
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if "/tests/" not in f.filename and "site-packages" not in f.filename
           and "/lib/python" not in f.filename]
    frame = (own or frames or [None])[-1]
    return f"{'/'.join(frame.filename.rsplit('/', 2)[-2:])}:{frame.lineno}" if frame else "?"


def _alarm(signum: int, frame: object) -> None:
    raise Timeout(f"still running after {DEADLINE_S * 2:g} CPU-s")
