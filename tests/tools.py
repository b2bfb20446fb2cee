"""What the tests of deploy/ share: the Prometheus tools they run, and Prometheus durations."""
from __future__ import annotations

import re
import shutil

import pytest

# The Debian package of each tool; deploy/install.sh installs them and `make test` runs it.
PACKAGES = {"promtool": "prometheus", "amtool": "prometheus-alertmanager"}
UNITS_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def required_tool(name: str) -> str:
    """The tool's path, else the calling test fails: `make test` installs the tool, so its
    absence is an install defect, not a reason to skip."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (Debian package {PACKAGES[name]}): run deploy/install.sh, "
                    "which `make test` runs first", pytrace=False)
    return path


def duration_s(text: str) -> float:
    """A Prometheus duration (``1m30s``, ``500ms``) in seconds."""
    assert re.fullmatch(r"(\d+(ms|s|m|h|d))+", text), f"not a Prometheus duration: {text!r}"
    return sum(int(amount) * UNITS_S[unit] for amount, unit in re.findall(r"(\d+)(ms|s|m|h|d)", text))


def prometheus_global(config: str, key: str) -> float:
    """A duration of the ``global:`` section of a Prometheus config, in seconds."""
    found = re.findall(rf"^  {key}:\s*(\S+)\s*$", config, re.M)
    assert len(found) == 1, f"global {key} of the Prometheus config: {found}"
    return duration_s(found[0])
