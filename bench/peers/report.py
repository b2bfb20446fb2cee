"""The bench's tables from what was recorded: per fault and system, per quiet period, per size."""
from __future__ import annotations

from dataclasses import dataclass

from bench.peers.faults import FaultRun
from bench.peers.watch import BURROW, HEALTHY, JMX, KLAG, KMON, SYSTEMS, Alert, BurrowStatus



@dataclass(frozen=True)
class Phase:
    """A stretch of the run: a fault (its FaultRun), or a quiet period on the healthy cluster."""
    name: str
    start: float
    end: float
    run: FaultRun | None = None


def _in(phase: Phase, t: float) -> bool:
    return phase.start <= t < phase.end


def _names(system: str, alerts: list[Alert], culprit: dict[str, str]) -> bool | None:
    """Do the labels of ``alerts`` name the culprit? None when the cluster itself is the culprit.
    kmon's labels are the culprit's own; the peer's `broker` is the broker whose agent reported the
    series (see alerts.yml), which names the culprit only when that broker is the one at fault."""
    if not culprit:
        return None
    return any(a.labels.get(key) == value for a in alerts for key, value in culprit.items())


def fault_rows(phases: list[Phase], alerts: list[Alert], groups: dict[str, BurrowStatus],
               systems: tuple[str, ...] = SYSTEMS) -> list[dict]:
    """A row per fault and system of ``systems`` (Burrow's only for a fault that names a group)."""
    rows = []
    for phase in (p for p in phases if p.run is not None):
        run = phase.run
        assert run is not None
        culprit = ", ".join(f"{k} {v}" for k, v in run.culprit.items()) or "the cluster"
        for system in systems:
            if system == BURROW:
                group = run.culprit.get("group")
                if group is None:
                    continue
                changes = [(t - run.moment, s) for t, s in groups.get(group, BurrowStatus(group)).changes
                           if _in(phase, t) and t >= run.moment and s not in HEALTHY]
                rows.append({"fault": run.name, "system": system, "culprit": culprit,
                             "alerts": ", ".join(f"status {s} {d:.1f} s" for d, s in changes) or "none",
                             "first_alert_s": changes[0][0] if changes else None, "names_culprit": bool(changes),
                             "notes": "; ".join(run.notes)})
                continue
            fired = sorted((a for a in alerts if a.system == system and a.fired_at is not None
                            and _in(phase, a.active_at)), key=lambda a: a.fired_at or 0)
            after = [a.fired_at - run.moment for a in fired if a.fired_at and a.fired_at >= run.moment]
            rows.append({"fault": run.name, "system": system, "culprit": culprit,
                         "alerts": ", ".join(f"{a.describe()} {a.fired_at - run.moment:.1f} s"   # type: ignore[operator]
                                             for a in fired) or "none",
                         "first_alert_s": min(after) if after else None,
                         "names_culprit": _names(system, fired, run.culprit), "notes": "; ".join(run.notes)})
    return rows


def quiet_rows(phases: list[Phase], alerts: list[Alert], groups: dict[str, BurrowStatus],
               systems: tuple[str, ...] = SYSTEMS) -> list[dict]:
    """Alerts that began while the cluster was healthy: false alarms, per system of ``systems``."""
    quiet = [p for p in phases if p.run is None]
    rows = []
    for system in (s for s in (KMON, JMX, KLAG) if s in systems):
        false = [a for a in alerts if a.system == system and a.fired_at is not None
                 and any(_in(p, a.active_at) for p in quiet)]
        rows.append({"system": system, "quiet_s": round(sum(p.end - p.start for p in quiet)),
                     "false_alerts": len(false), "which": ", ".join(a.describe() for a in false) or "none"})
    if BURROW not in systems:
        return rows
    burrow_false = [f"{g}: {s}" for g, st in groups.items() for t, s in st.changes
                    if s not in HEALTHY and any(_in(p, t) for p in quiet)]
    rows.append({"system": BURROW, "quiet_s": rows[0]["quiet_s"], "false_alerts": len(burrow_false),
                 "which": ", ".join(burrow_false) or "none"})
    return rows


def lag_rows(phases: list[Phase], systems: tuple[str, ...]) -> list[dict]:
    """Per lag fault and stretch of it: the last sample (the truth and each system's figures), and over
    the stretch each system's largest error in lag seconds and how many samples had none
    (``systems``: the prefixes of the figures, as lag_faults._figures names them)."""
    rows = []
    for run in (p.run for p in phases if p.run is not None and p.run.figures):
        stretches: dict[str, list[dict]] = {}
        for sample in run.figures:
            stretches.setdefault(sample["phase"], []).append(sample)
        for stretch, samples in stretches.items():
            row = {**samples[-1], "samples": len(samples)}
            for system in systems:
                errors = [abs(s[f"{system}_lag_s"] - s["true_lag_s"]) for s in samples
                          if s.get(f"{system}_lag_s") is not None and s.get("true_lag_s") is not None]
                row[f"{system}_max_err_s"] = round(max(errors), 1) if errors else None
                row[f"{system}_no_lag_s"] = sum(1 for s in samples if s.get(f"{system}_lag_s") is None)
            rows.append(row)
    return rows
