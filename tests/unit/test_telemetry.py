"""A collector's own telemetry: an unexpected error its loop went on after is logged with its trace,
counted (kmon_collector_errors_total) and said in /healthz for a minute (collectors/telemetry.py)."""
from __future__ import annotations

import logging

import pytest

from collectors import telemetry as telemetry_module
from collectors.telemetry import SURVIVED_SAID_S, Telemetry


def test_an_error_a_loop_survived_is_logged_counted_and_said_in_healthz_for_a_while(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    monkeypatch.setattr(telemetry_module.time, "monotonic", lambda: now[0])
    tel = Telemetry("c1")
    assert tel.problems() == []
    try:
        raise KeyError("partition 7")
    except KeyError:
        tel.survived("kraft", "while following the metadata log", logging.getLogger("test"))
    assert tel.metric("kmon_collector_errors_total", source="kraft")._value.get() == 1
    assert "unexpected error while following the metadata log; going on" in caplog.text
    assert "Traceback" in caplog.text and "KeyError: 'partition 7'" in caplog.text
    now[0] += 5
    (said,) = tel.problems()
    assert said == "unexpected error while following the metadata log: KeyError: 'partition 7' (5 s ago; see the log)"
    now[0] += SURVIVED_SAID_S
    assert tel.problems() == []
