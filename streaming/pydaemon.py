"""The daemon Spark forks its Python workers from: pyspark's own, with zip archives on the
workers' path re-read only when they changed, and the garbage collector tuned (streaming/gc_tuning.py).

Before every task a pyspark worker calls ``importlib.invalidate_caches()`` (for files shipped
with the job). On Python 3.11 that makes every zip importer re-read its archive's whole
directory: pyspark.zip once per imported subpackage, and spark-core's 5k-entry jar, which
Spark puts on the workers' path. That was most of what a one-event micro-batch cost
(bench/README.md, "The delay"). An archive whose size and modification time are those of the
last read keeps its directory; a changed one is read again, as before.

The daemon also imports what every worker imports (pyspark's worker, pandas, pyarrow, kmon's
step) and freezes those objects (``gc.freeze``) before it forks any worker. pyspark's daemon
runs a full garbage collection after each task of a reused worker, and each scanned all those
module objects, twice per micro-batch, while the driver renders the views; frozen, they are
skipped. They are also left out of the workers' own collections, and their pages stay shared
with the daemon instead of being copied in each worker when a collection touches them; a worker
no longer imports them at its first task.

``StreamApp`` selects it (``spark.python.daemon.module``) when Spark runs in this process
(``local[...]``), where the workers are this interpreter with kmon importable. Under
spark-submit it is opt-in with ``--conf spark.python.daemon.module=streaming.pydaemon``, for
clusters where kmon is installed on the executors.
"""
from __future__ import annotations

import gc
import importlib
import os
import zipimport

from kmon.gc_tuning import collect_less_often

MODULE = "streaming.pydaemon"
# what a worker of the stream imports, in the order a task imports them
WORKER_MODULES = ("pyspark.worker", "pandas", "pyarrow", "streaming.fold.entity_step")


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def reread_when_changed(reread):
    """``zipimporter.invalidate_caches`` that calls ``reread`` only when the archive changed
    since it was last read. Python keeps one directory per archive; an importer of an
    unchanged archive (pyspark.zip has one per imported subpackage) takes that one."""
    read_at: dict[str, tuple[int, int] | None] = {}

    def invalidate_caches(importer: zipimport.zipimporter) -> None:
        archive = importer.archive
        stamp = _stamp(archive)
        current = getattr(zipimport, "_zip_directory_cache", {}).get(archive)
        if stamp is not None and read_at.get(archive) == stamp and current is not None:
            importer._files = current
            return
        reread(importer)
        read_at[archive] = stamp
    return invalidate_caches


def prepare_workers() -> None:
    """Import the workers' modules and freeze every object alive, before the first fork."""
    for name in WORKER_MODULES:
        importlib.import_module(name)
    gc.freeze()


if __name__ == "__main__":
    zipimport.zipimporter.invalidate_caches = reread_when_changed(zipimport.zipimporter.invalidate_caches)
    collect_less_often()   # inherited by the forked workers, as the patch is
    prepare_workers()
    # imported after the patch so that the workers it forks inherit it
    from pyspark.daemon import manager
    manager()
