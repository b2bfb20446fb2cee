"""How `make test` shares the suite among its xdist workers (tests/conftest.py): an integration module's
tests stay together (the kraft/ package's too, which share one stack), the longest groups go first."""
from pathlib import Path

from stack.process import port_slice
from tests.conftest import LONGEST_FIRST, integration_group, port_slice_of


def test_an_integration_module_is_one_group_and_the_kraft_package_another() -> None:
    assert integration_group("tests/integration/test_stack.py::test_x[plain]") == "tests/integration/test_stack.py"
    assert integration_group("tests/integration/kraft/test_groups.py::test_g1") == "tests/integration/kraft"
    assert integration_group("tests/integration/kraft/test_scenarios.py::test_k1") == "tests/integration/kraft"
    assert integration_group("tests/unit/test_views.py::test_y") is None
    assert integration_group("tests/fuzz/test_fuzz.py::test_fuzz_target[a]") is None


def test_the_longest_groups_named_exist() -> None:
    root = Path(__file__).resolve().parents[2]
    assert all((root / group).exists() for group in LONGEST_FIRST)


def test_a_worker_xdist_starts_in_place_of_a_crashed_one_gets_a_port_slice_no_live_worker_has() -> None:
    """CI, 2026-11-29: gw0 crashed, its replacement gw2 got "2/2", which port_slice refuses, and every
    stack it started failed."""
    whole = range(20000, 32768)
    # gw0 and gw1 start; two replacements at most (--max-worker-restart=2), numbered on from gw2
    every = [set(port_slice(whole, {"KMON_PORT_SLICE": port_slice_of(worker, 2, 2)})) for worker in range(4)]
    assert all(len(ports) > 3000 for ports in every)
    assert all(not (a & b) for i, a in enumerate(every) for b in every[i + 1:])
