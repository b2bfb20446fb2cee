"""The benches' pictures: the stream app's cost curve, and fault -> alert times beside the peers."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def require() -> None:
    """Exit with what to install when matplotlib is missing."""
    _pyplot()


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as e:
        raise SystemExit(f"--plot needs matplotlib: .venv/bin/pip install -e '.[bench]' ({e})") from None
    matplotlib.use("Agg")   # no display here
    import matplotlib.pyplot as plt
    return plt


def cost_curve(rows: list[dict], path: str) -> None:
    """Four panels over the partition counts of ``rows`` (bench.stream.run rows), log-scaled."""
    plt = _pyplot()

    rows = sorted(rows, key=lambda r: r["partitions"])
    x = [r["partitions"] for r in rows]
    panels = [
        ("backlog drain (events/s)", [("kmon", "drain_events_per_s"), ("fold alone, 1 core", "fold_events_per_s")],
         (20_000, "goal")),
        ("produce → view exported (s)", [("p50", "delay_p50_s"), ("p99", "delay_p99_s")], (1.0, "goal for p99")),
        ("/metrics (s; MB on the right)", [("scrape p50", "first_scrape_p50_s"), ("scrape max", "first_scrape_max_s")],
         (0.2, "goal")),
        ("resident memory (MB)", [("driver, Python", "driver_python_rss_mb"), ("Spark JVM", "spark_jvm_rss_mb"),
                                  ("Python workers", "python_workers_rss_mb")], None),
    ]
    fig, grid = plt.subplots(2, 2, figsize=(10, 7.5))
    axes = grid.flatten()
    for ax, (title, series, goal) in zip(axes, panels):
        for label, key in series:
            ax.plot(x, [r[key] for r in rows], marker="o", label=label)
        if goal is not None:
            ax.axhline(goal[0], color="red", linestyle=":", label=goal[1])
        ax.set(title=title, xscale="log", yscale="log", xlabel="partitions")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    mb = axes[2].twinx()
    mb.plot(x, [r["scrape_bytes"] / 1e6 for r in rows], color="grey", linestyle="--", marker="x", label="body MB")
    mb.set_yscale("log")
    mb.legend(fontsize="small", loc="center right")
    sizes = ", ".join(f"{r['partitions']:,} partitions / {r['backlog_events']:,} events" for r in rows)
    fig.suptitle(f"kmon stream on local[2]: {sizes}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(Path(path), dpi=110)


# the peers bench's systems as the plot's title names them (a KRaft run has no Burrow)
SYSTEM_TITLES = {"kmon": "kmon", "jmx": "Kafka's JMX metrics with the Strimzi-style rules", "burrow": "Burrow",
                 "klag": "klag-exporter"}


def alert_times(rows: list[dict], path: str) -> None:
    """Fault -> first alert seconds per system (bench.peers' fault rows), a bar per system and
    fault; a fault a system did not alert on is marked instead of drawn."""
    plt = _pyplot()
    systems = list(dict.fromkeys(r["system"] for r in rows))
    faults = list(dict.fromkeys(r["fault"] for r in rows))
    seconds = {(r["fault"], r["system"]): r["first_alert_s"] for r in rows}
    longest = max([s for s in seconds.values() if s is not None], default=1.0)
    fig, ax = plt.subplots(figsize=(10, 0.5 + 0.75 * len(faults)))
    height = 0.8 / len(systems)
    for i, system in enumerate(systems):
        ys = [f + i * height for f in range(len(faults))]
        xs = [seconds.get((fault, system)) for fault in faults]
        bars = ax.barh(ys, [x or 0 for x in xs], height, label=system)
        for y, x, fault in zip(ys, xs, faults):
            if x is None and (fault, system) in seconds:
                ax.text(longest * 0.01, y, "no alert", va="center", fontsize="x-small", color=bars.patches[0].get_facecolor())
    ax.set_yticks([f + 0.4 - height / 2 for f in range(len(faults))], faults)
    ax.invert_yaxis()
    ax.set(xscale="log" if longest > 100 else "linear", xlabel="seconds from the fault to the first alert")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    fig.suptitle("Fault -> first alert: " + ", ".join(SYSTEM_TITLES.get(s, s) for s in systems), fontsize="medium")
    fig.tight_layout()
    fig.savefig(Path(path), dpi=110)
