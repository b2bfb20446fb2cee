"""Class-data sharing for kmon's JVMs: the stack's Kafka and ZooKeeper, Spark's driver (AppCDS, JDK 13+'s
dynamic archive).

Most of a Kafka JVM's start is loading, parsing and verifying its classes; a dynamic archive keeps
them, parsed and verified, in a file the next JVM of the same kind maps instead (bench/README.md:
the test suite's section has the figures). The first JVM of a kind (java, class path, jars, main class)
writes the archive when it exits (``-XX:ArchiveClassesAtExit``) to ``<key>.jsa.part``; a later start
adopts it once no JVM writing it is left and ``-Xshare:on`` accepts it. A claim file lets one JVM of
a kind write it at a time (one made in the last CLAIM_GRACE_S, or whose JVM runs). A JVM killed
before it exits writes nothing, or half an archive: the next start tries again.

A checkout of its own (each fresh clone has its own venv, so its own Spark class path) makes a kind of
its own: an archive is touched at each use, and of each main class the KEEP most recently used stay.
"""
from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import time
from pathlib import Path

log = logging.getLogger("kmon")

# a claim this young counts as a JVM about to start and write the archive, whether or not it runs yet
CLAIM_GRACE_S = 300.0

# archives kept per main class (Spark's is 180 MB): the checkouts in use, not every clone ever made
KEEP = 2

# an archive that cannot be used is skipped, not printed; a java older than 13 ignores the options
QUIET = ["-XX:+IgnoreUnrecognizedVMOptions", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def archive_options(directory: Path, java: str, classpath: str, main: str, checked: bool = True) -> list[str]:
    """The JVM options that use this kind's archive, or write it, or neither (another JVM writes it).
    ``checked``: ``classpath`` is the JVM's own, and an archive is adopted once ``-Xshare:on`` maps it
    with it; else (a JVM whose launcher makes its class path: Spark's) it is adopted once its writer is gone."""
    name = f"{main.rpartition('.')[2]}-{_key(java, classpath, main)}"
    archive, part, claim = (directory / f"{name}{suffix}" for suffix in (".jsa", ".jsa.part", ".claim"))
    if archive.exists():
        _touch(archive)
        return [f"-XX:SharedArchiveFile={archive}", *QUIET]
    directory.mkdir(parents=True, exist_ok=True)
    if claim.exists():
        if _writing(part):
            return []
        if part.exists() and (not checked or _usable(java, classpath, part)):
            part.replace(archive)
            claim.unlink(missing_ok=True)
            log.info("class-data sharing archive %s made for %s", archive, main)
            _prune(directory, main.rpartition('.')[2])
            return [f"-XX:SharedArchiveFile={archive}", *QUIET]
        if not part.exists() and time.time() - _mtime(claim) < CLAIM_GRACE_S:
            return []   # its JVM may not have started yet
        part.unlink(missing_ok=True)   # its JVM was killed, or wrote what the JVM refuses: once more
        claim.unlink(missing_ok=True)
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:   # another start claimed it just now
        return []
    return [f"-XX:ArchiveClassesAtExit={part}", *QUIET]


def _touch(archive: Path) -> None:
    try:
        os.utime(archive)
    except OSError:   # another user's cache: it is used all the same
        pass


def _prune(directory: Path, main: str) -> None:
    """Of ``main``'s archives, the KEEP last used stay (a JVM that maps one keeps it after its unlink)."""
    used = sorted(directory.glob(f"{main}-*.jsa"), key=_mtime, reverse=True)
    for old in used[KEEP:]:
        old.unlink(missing_ok=True)
        log.info("class-data sharing archive %s removed: %d newer ones of %s are in use", old, KEEP, main)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _key(java: str, classpath: str, main: str) -> str:
    """The kind of a JVM: an archive holds the classes of one java, one class path (its jars as they
    are now: a reinstalled jar makes a new kind) and one main class."""
    jars = []
    for entry in classpath.split(os.pathsep):
        folder = Path(entry[:-1]) if entry.endswith("*") else None
        for jar in sorted(folder.glob("*.jar")) if folder else [Path(entry)]:
            try:
                st = jar.stat()
            except OSError:
                continue
            jars.append(f"{jar}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\0".join([java, classpath, main, *jars]).encode()).hexdigest()[:20]


def _writing(part: Path) -> bool:
    """A running JVM will write ``part`` when it exits."""
    wanted = f"-XX:ArchiveClassesAtExit={part}".encode()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if wanted in f.read():
                        return True
            except OSError:
                continue
    return False


def _usable(java: str, classpath: str, archive: Path) -> bool:
    """The JVM maps the archive with this class path (``-Xshare:on`` fails where it would not)."""
    try:
        return subprocess.run([java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
