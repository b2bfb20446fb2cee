"""One KRaft cluster (Kafka 4.3.1, three combined nodes) with the whole monitor on it, shared by the
KRaft fault scenarios and the group protocols' tests of this package, and stopped after them. Each
test leaves it whole: what a test stopped is started again after it (``mon``)."""
from __future__ import annotations

from typing import Iterator

import pytest

from stack.local import LocalStack
from tests.conftest import monitored_stack

CLUSTER = "kraft"


@pytest.fixture(scope="package")
def kraft_monitored(tmp_path_factory: pytest.TempPathFactory, toolchain) -> Iterator[LocalStack]:
    with monitored_stack(tmp_path_factory.mktemp("kraft"), toolchain, CLUSTER, brokers=3, kraft=True) as stack:
        yield stack


@pytest.fixture
def mon(kraft_monitored: LocalStack) -> Iterator[LocalStack]:
    yield kraft_monitored
    kraft_monitored.restart_stopped()
