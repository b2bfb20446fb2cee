"""Whether kmon reaches the addresses it was given, said in kmon's own words.

Every address a command is given plays one role (:data:`ROLES`). A :class:`Reachability`
follows one of them: the client using the address reports ``reached()`` or ``failed(why)``
from its own thread (or :func:`keep_probing` does it where the client says nothing), and
the command's main thread calls ``check()`` now and then, which logs one line once the
address has been out of reach for a few seconds, repeats it only every minute while that
lasts, and says when to give up: when ``--startup-timeout`` passed and the address was
never reached. ``reached()`` logs the recovery, so a long outage reads as two lines, not
a line per retry.
"""
from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
import time
from typing import Callable, Sequence

MONITORED_ZOOKEEPER = "monitored ZooKeeper"   # kmon collect zk --zookeeper
MONITORED_BOOTSTRAP = "monitored bootstrap"   # kmon collect groups --bootstrap-servers
MONITORED_CONTROLLERS = "monitored controller quorum"   # kmon collect kraft --controllers
EVENTS_BOOTSTRAP = "events bootstrap"         # --events-bootstrap-servers; kmon stream --bootstrap-servers
ROLES = (MONITORED_ZOOKEEPER, MONITORED_BOOTSTRAP, MONITORED_CONTROLLERS, EVENTS_BOOTSTRAP)

GRACE_S = 3.0      # a healthy address answers well within this: only a longer wait is worth a line
REPEAT_S = 60.0    # while an outage lasts, its line comes back this often
PROBE_S = 2.0      # pause between two probes where kmon probes itself


def unreachable_line(role: str, address: str, waited: float, error: str | None, then: str) -> str:
    return f"cannot reach the {role} {address} for {waited:.0f} s ({error or 'no answer yet'}); {then}"


def refused_line(role: str, address: str, error: str) -> str:
    return f"the {role} {address} refused kmon ({error}); exiting: retrying cannot fix that"


def reached_line(role: str, address: str, waited: float) -> str:
    return f"reached the {role} {address} after {waited:.0f} s"


def gave_up_line(role: str, address: str, timeout: float, error: str | None) -> str:
    return (f"cannot reach the {role} {address} within the startup timeout of {timeout:g} s "
            f"({error or 'no answer'}); exiting")


class Reachability:
    """One role's address: out of reach from the start until first reached, and after ``failed``.

    ``then`` says what kmon does meanwhile ("retrying every 2 s"); the owner may change it
    when that changes. Thread-safe; logs outside its lock.
    """

    def __init__(self, role: str, address: str, then: str, logger: logging.Logger, *,
                 clock: Callable[[], float] = time.monotonic, grace_s: float = GRACE_S,
                 repeat_s: float = REPEAT_S) -> None:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}")
        self.role, self.address, self.then = role, address, then
        self._log = logger
        self._clock = clock
        self._grace_s, self._repeat_s = grace_s, repeat_s
        self._lock = threading.Lock()
        self._started = clock()
        self._down_since: float | None = self._started   # None while reached
        self._error: str | None = None
        self._said_at: float | None = None   # when this outage's line was last logged
        self._ever_reached = False
        self._refused: str | None = None

    @property
    def ever_reached(self) -> bool:
        return self._ever_reached

    @property
    def out_of_reach(self) -> bool:
        return self._down_since is not None

    def reached(self) -> None:
        with self._lock:
            if self._down_since is None:
                return
            said, waited = self._said_at is not None, self._clock() - self._down_since
            self._down_since, self._said_at, self._error, self._ever_reached = None, None, None, True
        if said:
            self._log.info("%s", reached_line(self.role, self.address, waited))

    def failed(self, error: str) -> None:
        """The address stopped answering (or still does not), for ``error``."""
        with self._lock:
            if self._down_since is None:
                self._down_since = self._clock()
            self._error = error

    def refused(self, error: str) -> None:
        """The address answered but rejected kmon's credentials or what they are allowed: ``check``
        gives up at once."""
        with self._lock:
            self._refused = self._refused or error

    def explain(self, error: str) -> None:
        """A better reason while out of reach; no news while reached (one failed attempt
        among several addresses, say)."""
        with self._lock:
            if self._down_since is not None:
                self._error = error

    def observe(self, error: str | None) -> None:
        """A probe's verdict: None if it answered, else why not."""
        if error is None:
            self.reached()
        else:
            self.failed(error)

    def down_for(self) -> float:
        """Seconds out of reach so far; 0 while reached."""
        with self._lock:
            return 0.0 if self._down_since is None else self._clock() - self._down_since

    def line(self) -> str | None:
        """The unreachable line as of now, or None while reached."""
        with self._lock:
            return self._line(self._clock())

    @property
    def started(self) -> float:
        return self._started

    def check(self, startup_timeout: float = 0, since: float | None = None) -> bool:
        """Log the unreachable line when due; False (after logging why) once ``startup_timeout``
        (0: none) passed since ``since`` (by default, this role's start) without the address ever being
        reached, or once the address refused kmon (its credentials, or what they may do)."""
        with self._lock:
            now = self._clock()
            if self._refused is not None:
                gave_up = refused_line(self.role, self.address, self._refused)
                due = None
            elif not self._ever_reached and 0 < startup_timeout <= now - (self._started if since is None else since):
                gave_up = gave_up_line(self.role, self.address, startup_timeout, self._error)
                due = None
            else:
                gave_up = None
                due = self._line(now) if self._due(now) else None
                if due:
                    self._said_at = now
        if gave_up:
            self._log.error("%s", gave_up)
            return False
        if due:
            self._log.warning("%s", due)
        return True

    def _due(self, now: float) -> bool:
        if self._down_since is None or now - self._down_since < self._grace_s:
            return False
        return self._said_at is None or now - self._said_at >= self._repeat_s

    def _line(self, now: float) -> str | None:
        if self._down_since is None:
            return None
        return unreachable_line(self.role, self.address, now - self._down_since, self._error, self.then)


def watch(stop: threading.Event, reaches: Sequence[Reachability], startup_timeout: float = 0, *,
          until: Callable[[], bool] = lambda: False, every: float = 0.5) -> bool:
    """Check ``reaches`` until ``stop`` is set or ``until()`` holds; False as soon as one gave up
    (its line is the only one: the others are not checked any more). The startup timeout counts from
    the first one's start, the command's, for them all: where several were never reached, the line
    names the first of ``reaches`` (a collector's monitored cluster before its events cluster), not
    whichever was made a moment earlier."""
    since = min((r.started for r in reaches), default=None)
    while not until():
        if not all(r.check(startup_timeout, since) for r in reaches):
            return False
        if stop.wait(every):
            break
    return True


def tcp_probe(servers: str, timeout: float = PROBE_S) -> str | None:
    """None if any host:port of ``servers`` accepts a TCP connection, else why none did."""
    errors = []
    for item in servers.split(","):
        host, _, port = item.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout):
                return None
        except OSError as e:
            errors.append((item.strip(), e.strerror or str(e)))
    if len(errors) == 1:
        return errors[0][1]
    return ", ".join(f"{address}: {why}" for address, why in errors)


def keep_probing(reach: Reachability, probe: Callable[[], str | None], stop: threading.Event,
                 every: float = PROBE_S) -> None:
    """Feed ``reach`` with ``probe()`` until ``stop`` is set (a thread's loop)."""
    while True:
        reach.observe(probe())
        if stop.wait(every):
            return


# ApiVersions v0 (api key 18), which every Kafka server answers, before any login too
_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, len(b"kmon-probe")) + b"kmon-probe"
_API_VERSIONS_REQUEST = struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0


def kafka_probe(host: str, port: int, timeout: float, tls: ssl.SSLContext | None = None) -> str | None:
    """None if the Kafka server on ``host:port`` answers an ApiVersions request within ``timeout``
    (a server that serves requests, which is more than a port that accepts connections: a hung JVM's
    kernel still accepts them), else why not. ``tls``: the listener is TLS; the handshake is the first
    answer then, and a refusal in it (a client certificate wanted) is an answer too."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as plain:
            conn = plain
            if tls is not None:
                try:
                    conn = tls.wrap_socket(plain, server_hostname=host)
                except ssl.SSLError:
                    return None   # it spoke TLS: it answers
            conn.settimeout(max(0.001, deadline - time.monotonic()))
            conn.sendall(_API_VERSIONS_REQUEST)
            if len(conn.recv(8)) < 4:
                return "closed the connection without an answer"
            return None
    except socket.timeout:
        return f"no answer within {timeout:g} s"
    except OSError as e:
        return e.strerror or str(e)


def any_tls() -> ssl.SSLContext:
    """A TLS context that takes any certificate: enough to tell whether a TLS listener answers."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
