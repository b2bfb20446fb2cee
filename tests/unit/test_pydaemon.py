"""The Python worker daemon's zip importers: an unchanged archive is not read again per task,
a changed one is (streaming/pydaemon.py)."""
from __future__ import annotations

import importlib
import os
import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

from streaming.pydaemon import reread_when_changed


def _archive(path: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, source in modules.items():
            z.writestr(name, source)


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """zipimporter.invalidate_caches patched as the daemon does; lists the archives it re-read."""
    original = zipimport.zipimporter.invalidate_caches
    reads: list[str] = []

    def counting(importer: zipimport.zipimporter) -> None:
        reads.append(importer.archive)
        original(importer)
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", reread_when_changed(counting))
    return reads


def test_an_unchanged_archive_is_read_once_for_all_its_importers(tmp_path: Path, patched: list[str]) -> None:
    archive = tmp_path / "lib.zip"
    _archive(archive, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/m.py": "X = 1\n"})
    importers = [zipimport.zipimporter(f"{archive}/{prefix}") for prefix in ("", "pkg", "pkg/sub")]
    for _ in range(3):
        for imp in importers:
            imp.invalidate_caches()
    assert patched == [str(archive)]
    assert importers[2].find_spec("pkg.sub.m") is not None


def test_a_changed_archive_is_read_again_and_its_new_module_found(tmp_path: Path, patched: list[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "shipped.zip"
    _archive(archive, {"kmon_shipped_a.py": "A = 1\n"})
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    assert importlib.import_module("kmon_shipped_a").A == 1
    _archive(archive, {"kmon_shipped_a.py": "A = 1\n", "kmon_shipped_b.py": "B = 2\n"})
    os.utime(archive, ns=(1, 1))   # a different stamp even within the file system's time resolution
    importlib.invalidate_caches()
    assert importlib.import_module("kmon_shipped_b").B == 2
    assert patched == [str(archive)]   # the read after the change; the importer made its first one
    for name in ("kmon_shipped_a", "kmon_shipped_b"):
        sys.modules.pop(name, None)


def test_the_daemon_imports_the_workers_modules_and_freezes_them_before_forking() -> None:
    """In a process of its own: freezing is process-wide."""
    import subprocess
    probe = ("import gc, sys\n"
             "from streaming.pydaemon import WORKER_MODULES, prepare_workers\n"
             "before = len(gc.get_objects())\n"
             "prepare_workers()\n"
             "assert all(m in sys.modules for m in WORKER_MODULES), 'imported'\n"
             "assert gc.get_freeze_count() > before, 'frozen'\n"
             "assert len(gc.get_objects()) < before, 'out of the collector reach'\n")
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
