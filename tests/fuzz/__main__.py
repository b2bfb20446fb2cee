"""``python -m tests.fuzz FAMILY [--target T] --cases N [--seed S] [--engine mutate|atheris]``: a
family's targets, N cases each, and a Markdown row per target; exit 1 on any finding.
``--replay I`` runs case I of seed S again and prints its trace; ``--replay-file`` a case that
the coverage-guided engine saved."""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from tests.fuzz import coverage, engine
from tests.fuzz.cases import from_bytes

FAMILIES = ("znodes", "groups", "kraft", "events", "history")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("family", choices=FAMILIES)
    p.add_argument("--target", help="one target of the family (default: each)")
    p.add_argument("--cases", type=int, default=100_000, help="mutated cases per target")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--engine", choices=("mutate", "atheris", "atheris-child"), default="mutate",
                   help="mutate: seeded structured mutation; atheris: coverage-guided (libFuzzer)")
    p.add_argument("--findings", type=Path, default=Path("/tmp/kmon-fuzz-findings"),
                   help="where the coverage-guided engine saves the cases it found")
    p.add_argument("--replay", type=int, metavar="INDEX", help="run case INDEX of --seed and print its trace")
    p.add_argument("--replay-file", type=Path, help="run a case the coverage-guided engine saved")
    args = p.parse_args(argv)
    module = (coverage.import_instrumented(args.family) if args.engine.startswith("atheris")
              else importlib.import_module(f"tests.fuzz.{args.family}"))
    targets = [t for t in module.TARGETS if args.target in (None, t.name)]
    if not targets:
        p.error(f"no target {args.target!r} in {args.family}: {', '.join(t.name for t in module.TARGETS)}")
    if args.engine == "atheris-child":
        coverage.fuzz_in_child(targets[0], args.cases, args.seed, args.findings)
    if args.replay is not None or args.replay_file is not None:
        return _replay(targets[0], args)
    print("| family | target | cases | seconds | slowest case s | findings |\n|---|---|---|---|---|---|")
    found = 0
    for target in targets:
        report = (coverage.run(args.family, target, args.cases, args.seed, args.findings)
                  if args.engine == "atheris" else engine.run(target, args.cases, args.seed))
        print(f"| {args.family} | {target.name} | {report.cases} | {report.seconds:.0f} | "
              f"{report.slowest_s:.3f} | {len(report.findings)} |", flush=True)
        for finding in report.findings.values():
            found += 1
            print(f"  {finding.error}\n    at {finding.where}\n    replay: {finding.replay(args.family)}",
                  file=sys.stderr)
    return 1 if found else 0


def _replay(target: engine.Target, args: argparse.Namespace) -> int:
    if args.replay_file is not None:
        case = from_bytes(args.replay_file.read_bytes(), target.arity)
    else:
        case = engine.case_at(target, list(target.seeds()), args.seed, args.replay)
    print(f"case: {case!r}")
    finding = engine.run_one(target, case, args.seed, args.replay if args.replay is not None else -1)
    print(finding.trace if finding else "passes")
    return 1 if finding else 0


if __name__ == "__main__":
    sys.exit(main())
