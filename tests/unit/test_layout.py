"""The folders are floors: the ground floor (kmon/) imports nothing above it, the floors on it
import only it, and the roof (cli/) is imported by nothing. Read from the imports themselves."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# package -> the top-level packages it may import
ALLOWED = {
    "kmon": set(),
    "collectors": {"kmon"},
    "streaming": {"kmon"},
    "dashboards": {"kmon"},
    "stack": {"kmon"},
    "cli": {"kmon", "collectors", "streaming", "dashboards", "stack"},
}


def imported(path: Path) -> set[str]:
    """The modules a file imports by their absolute names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def imports_of(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` -> the other top-level kmon packages it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in imported(path):
            top = name.split(".")[0]
            if top in ALLOWED and top != package:
                found.setdefault(str(path.relative_to(ROOT)), set()).add(top)
    return found


def test_each_floor_imports_only_the_floors_below_it() -> None:
    wrong = {module: sorted(tops - ALLOWED[package]) for package in ALLOWED
             for module, tops in imports_of(package).items() if tops - ALLOWED[package]}
    assert wrong == {}


def test_the_folders_are_all_there() -> None:
    assert all((ROOT / package / "__init__.py").is_file() for package in ALLOWED)


WITH_BENCH_AND_TESTS = (*ALLOWED, "bench", "tests")


def folder_edges() -> dict[str, set[str]]:
    """Each folder of kmon's packages, its benches and its tests -> the other folders its modules import from."""
    edges: dict[str, set[str]] = {}
    for package in WITH_BENCH_AND_TESTS:
        for path in (ROOT / package).rglob("*.py"):
            here = str(path.parent.relative_to(ROOT))
            for name in imported(path):
                if name.split(".")[0] not in WITH_BENCH_AND_TESTS:
                    continue
                target = ROOT.joinpath(*name.split("."))
                folder = str((target if target.is_dir() else target.parent).relative_to(ROOT))
                if folder != here:
                    edges.setdefault(here, set()).add(folder)
    return edges


def test_no_folder_imports_a_folder_that_imports_it_back() -> None:
    edges = folder_edges()

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            folder = todo.pop()
            if folder == goal:
                return True
            if folder not in seen:
                seen.add(folder)
                todo.extend(edges.get(folder, ()))
        return False

    cycles = sorted((a, b) for a, targets in edges.items() for b in targets if reaches(b, a))
    assert cycles == []


def test_the_groups_codec_is_below_the_groups_model_and_io() -> None:
    """collectors/groups/codec reads Kafka's bytes only: it imports nothing else of the groups collector, and of
    the collectors' own code only the one reader of Kafka's encoding."""
    assert folder_edges().get("collectors/groups/codec", set()) <= {"kmon", "collectors"}
    taken = {name for path in (ROOT / "collectors" / "groups" / "codec").rglob("*.py") for name in imported(path)}
    assert {name for name in taken if name.startswith("collectors.") and not name.startswith("collectors.groups.codec.")
            } == {"collectors.kafka_encoding"}


def test_kafkas_encoding_is_read_with_the_standard_library_alone() -> None:
    """collectors/kafka_encoding.py is below both the KRaft collector and the groups' codec: it imports no kmon code."""
    tops = {name.split(".")[0] for name in imported(ROOT / "collectors" / "kafka_encoding.py")}
    assert tops <= set(sys.stdlib_module_names) | {"__future__"}
