"""How `make test` shares the suite among its xdist workers (tests/conftest.py): an integration module's
tests stay together (the kraft/ package's too, which share one stack), the longest groups go first."""
from pathlib import Path

from tests.conftest import LONGEST_FIRST, integration_group


def test_an_integration_module_is_one_group_and_the_kraft_package_another() -> None:
    assert integration_group("tests/integration/test_stack.py::test_x[plain]") == "tests/integration/test_stack.py"
    assert integration_group("tests/integration/kraft/test_groups.py::test_g1") == "tests/integration/kraft"
    assert integration_group("tests/integration/kraft/test_scenarios.py::test_k1") == "tests/integration/kraft"
    assert integration_group("tests/unit/test_views.py::test_y") is None
    assert integration_group("tests/fuzz/test_fuzz.py::test_fuzz_target[a]") is None


def test_the_longest_groups_named_exist() -> None:
    root = Path(__file__).resolve().parents[2]
    assert all((root / group).exists() for group in LONGEST_FIRST)
