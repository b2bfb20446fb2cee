"""The README's Layout names every folder of the code, so a newcomer finds each one there: a folder
added without its line fails here (and a line naming a folder that is gone)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("kmon", "collectors", "streaming", "dashboards", "deploy", "stack", "cli", "tests", "bench")


def layout(text: str) -> set[str]:
    """Pure: the paths the Layout table names (`a/b/`, `a/b.py`; `x`, `y` in one cell)."""
    table = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {p.rstrip("/") for cell in cells for p in re.findall(r"`([^`]+)`", cell)}


def code_folders() -> set[str]:
    """The top-level folders and the packages one level below them (tests/ and bench/ included)."""
    found = set(TOP)
    for top in TOP:
        found |= {str(p.parent.relative_to(ROOT)) for p in (ROOT / top).glob("*/__init__.py")}
    return found


def test_the_layout_names_every_folder_of_the_code() -> None:
    """A top-level folder is named, or one of its files or subfolders is; a subfolder is named, unless no
    sibling is (then its parent's line speaks for the whole folder, as bench/'s does)."""
    named = layout((ROOT / "README.md").read_text())

    def speaks_for(folder: str) -> bool:
        return folder in named or any(n.startswith(folder + "/") for n in named)
    missing = {f for f in code_folders() if not speaks_for(f) and (
        "/" not in f or any(n.startswith(f.rsplit("/", 1)[0] + "/") and n.count("/") >= 1 for n in named))}
    assert missing == set(), "folders the README's Layout does not name"
    gone = {n for n in named if "/" in n and not (ROOT / n).exists()}
    assert gone == set(), "the Layout names paths that do not exist"
