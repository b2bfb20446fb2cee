"""How `make test` shares the suite among its xdist workers (tests/conftest.py): an integration module's
tests stay together (the kraft/ package's too, which share one stack), the longest groups go first."""
import ast
from pathlib import Path

from tests.conftest import LONGEST_FIRST, SESSION_STACK_MODULES, SESSION_STACKS, integration_group

ROOT = Path(__file__).resolve().parents[2]


def test_an_integration_module_is_one_group_and_the_kraft_package_another() -> None:
    assert integration_group("tests/integration/test_scenarios.py::test_0") == "tests/integration/test_scenarios.py"
    assert integration_group("tests/integration/kraft/test_groups.py::test_g1") == "tests/integration/kraft"
    assert integration_group("tests/integration/kraft/test_scenarios.py::test_k1") == "tests/integration/kraft"
    assert integration_group("tests/unit/test_views.py::test_y") is None
    assert integration_group("tests/fuzz/test_fuzz.py::test_fuzz_target[a]") is None


def test_the_longest_groups_named_exist() -> None:
    assert all(group == SESSION_STACKS or (ROOT / group).exists() for group in LONGEST_FIRST)


def asks_for(module: Path, fixtures: set[str]) -> bool:
    """Whether a test or fixture of the module takes one of ``fixtures`` as an argument."""
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.FunctionDef) and (node.name.startswith("test_") or any(
                "fixture" in ast.unparse(d) for d in node.decorator_list)):
            if fixtures & {a.arg for a in node.args.args}:
                return True
    return False


def test_the_modules_of_the_session_stacks_are_one_group_and_no_other_uses_them() -> None:
    users = {str(m.relative_to(ROOT)) for m in (ROOT / "tests/integration").rglob("test_*.py")
             if asks_for(m, {"stack", "session_stack", "chroot_stack"})}
    assert users == SESSION_STACK_MODULES
    assert {integration_group(f"{m}::test_x") for m in users} == {SESSION_STACKS}
