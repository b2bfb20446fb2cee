"""Where the stream app keeps what outlives it, known without loading Spark or the views: `kmon
history` and `kmon run` need the paths, not the app."""
from __future__ import annotations

from pathlib import Path

from kmon.flags import state_dir


def default_checkpoint() -> Path:
    """``kmon stream``'s checkpoint when no flag names one: the same whatever directory it starts in."""
    return state_dir() / "checkpoint"


def history_dir(checkpoint: Path, given: Path | None = None) -> Path:
    """Where the transition history goes: ``given`` (``--history-dir``), else beside the checkpoint's state."""
    return given if given is not None else checkpoint / "history"
