"""Waking the dispatcher: a tick at once when work appears, the periodic tick as a safety net.

farmd's dispatcher used to notice a new job, a child that exited or a phone
that came back only at its next 2 s tick. Here the tick runs on one thread
(:class:`TickLoop`) that waits for a wake or its interval, whichever comes
first; wakes that arrive while a tick runs are coalesced into one more tick,
and two ticks never run at once. What wakes it::

    farmctl enqueue ──NOTIFY farm_jobs (PostgreSQL, in the enqueue's transaction)──> PgWake
                    └─datagram to <data_dir>/farmd.wake (SQLite, after the commit)──> SocketWake
    attempt child exits (the dispatcher watches each child)       ──> TickLoop.wake
    phone moved to ready (FleetManager.on_ready)                   ──> TickLoop.wake

``farmctl wait`` wakes the same way when its job may have ended
(:class:`JobWaiter`): each waiter binds a socket in ``<data_dir>/waiters/``,
which :func:`send_wake` (the attempt child's last act, farmctl's enqueue) also
reaches, and on PostgreSQL it listens to ``farm_jobs``, which the store
NOTIFYs when a job is queued, finished, failed or cancelled.

A lost wake costs at most one tick interval: the listeners are an
optimisation, never the only way a job starts. PostgreSQL delivers a NOTIFY
only after its transaction commits, to every farmd listening, on any host
(PostgreSQL docs, "NOTIFY"); the SQLite wake is local to the host, which is
the only place a SQLite queue is shared.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from farm import backoff, logs
from farm.queue.db import JOBS_CHANNEL

__all__ = ["WAITERS_DIR", "WAKE_SOCKET", "JobWaiter", "PgWake", "SocketWake", "TickLoop",
           "send_wake", "wake_path", "wake_waiters"]

log = logs.get_logger(__name__)

WAKE_SOCKET = "farmd.wake"
#: Folder of the data folder where each ``farmctl wait`` binds its socket.
WAITERS_DIR = "waiters"
#: How long a listener blocks before it looks whether it should stop.
_POLL_S = 1.0
#: Longest path a unix socket address holds (``sun_path``, 108 bytes on Linux, unix(7)).
_SUN_PATH_MAX = 107


def wake_path(data_dir: Path) -> Path:
    """The unix datagram socket farmd listens on for wakes, in its data folder."""
    return Path(data_dir).expanduser() / WAKE_SOCKET


def send_wake(data_dir: Path) -> bool:
    """Tell a farmd of ``data_dir``, and every ``farmctl wait``, that the queue changed.

    Never blocks or raises. A waiter's socket nobody holds any more (its
    farmctl was killed) is removed.

    Returns:
        True if a farmd's socket took the datagram; False if none listens
        (farmd not running: it finds the job at its start) or its buffer is full
        (a wake is already pending, which is as good).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        try:
            sock.sendto(b"w", str(wake_path(data_dir)))
        except OSError:
            delivered = False
        else:
            delivered = True
    wake_waiters(data_dir)
    return delivered


def wake_waiters(data_dir: Path) -> None:
    """Wake every ``farmctl wait`` of ``data_dir`` (:class:`JobWaiter`); never blocks or raises.

    A waiter's socket nobody holds any more (its farmctl was killed) is removed.
    """
    folder = Path(data_dir).expanduser() / WAITERS_DIR
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, contextlib.suppress(OSError):
        sock.setblocking(False)
        for waiter in folder.glob("*.wake"):
            try:
                sock.sendto(b"w", str(waiter))
            except ConnectionRefusedError:
                waiter.unlink(missing_ok=True)  # its farmctl is gone
            except OSError:
                continue  # full: a wake is pending there already


class JobWaiter:
    """What ``farmctl wait`` sleeps on: woken when a job may have ended, else after a timeout.

    Bind it before reading the job's state, so an end between the read and the
    sleep still wakes it. Wakes are hints: the caller reads the job again
    after each :meth:`wait`, woken or timed out, so a lost wake costs one
    timeout at most, and a waiter that cannot bind its socket (a read-only
    data folder, a path too long) just sleeps the timeout, as polling did.

    Args:
        data_dir: the data folder farmd and the attempt children use.
        database_url: the queue's URL; a PostgreSQL one is also LISTENed on
            (jobs of other hosts end there).
    """

    def __init__(self, data_dir: Path, database_url: str | None = None) -> None:
        self._sock: socket.socket | None = None
        self.path: Path | None = None
        folder = Path(data_dir).expanduser() / WAITERS_DIR
        path = folder / f"{os.getpid()}-{secrets.token_hex(4)}.wake"
        try:
            if len(str(path).encode()) > _SUN_PATH_MAX:
                raise OSError(errno.ENAMETOOLONG, "too long for a unix socket address", str(path))
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.bind(str(path))
            except OSError:
                sock.close()
                raise
        except OSError as exc:
            log.debug("job_waiter_polls", reason=str(exc))
        else:
            self._sock, self.path = sock, path
        self._pg: PgWake | None = None
        if self._sock is not None and database_url and database_url.startswith("postgresql"):
            self._pg = PgWake(database_url, self._poke)

    def _poke(self) -> None:
        if self.path is not None:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, \
                    contextlib.suppress(OSError):
                sock.setblocking(False)
                sock.sendto(b"w", str(self.path))

    def wait(self, timeout_s: float) -> bool:
        """Sleep until a wake or ``timeout_s``; True if woken (pending wakes are drained)."""
        if self._sock is None:
            threading.Event().wait(timeout_s)
            return False
        self._sock.settimeout(timeout_s)
        try:
            self._sock.recv(64)
        except TimeoutError:
            return False
        self._sock.setblocking(False)
        with contextlib.suppress(OSError):
            while self._sock.recv(64):
                pass
        return True

    def close(self) -> None:
        """Stop listening and remove the socket; does not wait for the PostgreSQL listener."""
        if self._pg is not None:
            self._pg.close(wait=False)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> JobWaiter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class TickLoop:
    """Runs ``tick`` on its own thread every ``interval_s``, and at once after :meth:`wake`.

    Args:
        tick: the work (farmd logs its FarmErrors with ``_guarded``); any
            other exception is logged with its traceback and the loop goes on,
            as APScheduler did for the periodic job this replaces.
        interval_s: seconds between ticks when nothing wakes it.
        name: the thread's name.
    """

    def __init__(self, tick: Callable[[], object], interval_s: float,
                 name: str = "farm-dispatch") -> None:
        self._tick = tick
        self.interval_s = interval_s
        self._woken = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.ticks = 0

    def start(self) -> None:
        """Start the thread; its first tick runs at once."""
        self._woken.set()
        self._thread.start()

    def wake(self) -> None:
        """Ask for a tick now; thread-safe and cheap, any number of times."""
        self._woken.set()

    def _run(self) -> None:
        while True:
            self._woken.wait(self.interval_s)
            if self._stopping:
                return
            # Cleared before the tick: a wake during it asks for one more tick.
            self._woken.clear()
            try:
                self._tick()
            except Exception:  # a bug: say where, keep dispatching
                log.exception("tick_crashed", loop=self._thread.name)
            self.ticks += 1

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop after the running tick, if any; waits up to ``timeout_s`` for it."""
        self._stopping = True
        self._woken.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)


class SocketWake:
    """Calls ``on_wake()`` for each datagram on ``<data_dir>/farmd.wake`` (see :func:`send_wake`).

    The socket lives in farm's private data folder (0700, :mod:`farm.privacy`),
    so only farm's user can wake farmd; a datagram carries nothing but the wake.

    Raises:
        OSError: the socket cannot be bound (the path is too long for a unix
            socket address, or the folder is not writable).
    """

    def __init__(self, data_dir: Path, on_wake: Callable[[], None]) -> None:
        self.path = wake_path(data_dir)
        if len(str(self.path).encode()) > _SUN_PATH_MAX:
            raise OSError(errno.ENAMETOOLONG, "too long for a unix socket address", str(self.path))
        self._on_wake = on_wake
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a dead farmd's socket; adopt_predecessor ran already
        try:
            self._sock.bind(str(self.path))
        except OSError:
            self._sock.close()
            raise
        self._sock.settimeout(_POLL_S)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="farm-wake-socket", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                self._sock.recv(64)
            except TimeoutError:
                continue
            except OSError:
                return  # closed under us
            self._on_wake()

    def close(self) -> None:
        """Stop listening and remove the socket file."""
        self._closed.set()
        self._thread.join(_POLL_S * 3)
        self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class PgWake:
    """Calls ``on_wake()`` for each ``NOTIFY farm_jobs`` on a PostgreSQL queue.

    It holds one dedicated connection (``LISTEN`` needs a session of its own,
    outside the store's pool) and reconnects with farm's backoff when it
    drops; NOTIFYs sent while it was away are lost, and the periodic tick
    finds their jobs.

    Args:
        url: the store's SQLAlchemy URL (``postgresql+psycopg://...``).
        on_wake: called on the listener's thread.
        backoff_base_s: first reconnect wait (s).
        backoff_max_s: longest reconnect wait (s).
    """

    def __init__(self, url: str, on_wake: Callable[[], None], *,
                 backoff_base_s: float = 1.0, backoff_max_s: float = 30.0) -> None:
        import sqlalchemy as sa

        parsed = sa.make_url(url)
        # psycopg takes a libpq URL: the same one without SQLAlchemy's "+driver".
        self._conninfo = parsed.set(drivername="postgresql").render_as_string(
            hide_password=False)
        self._on_wake = on_wake
        self._backoff = (backoff_base_s, backoff_max_s)
        self._closed = threading.Event()
        self.listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="farm-wake-pg", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        failures = 0
        while not self._closed.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {JOBS_CHANNEL}")
                    self.listening.set()
                    failures = 0
                    self._on_wake()  # jobs queued while it was not listening
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=_POLL_S):
                            self._on_wake()
            except psycopg.Error as exc:
                self.listening.clear()
                failures += 1
                wait_s = backoff.backoff_s(failures, *self._backoff)
                log.warning("job_listener_failed", reason=str(exc), retry_in_s=wait_s)
                self._closed.wait(wait_s)

    def close(self, *, wait: bool = True) -> None:
        """Stop listening (within about a second) and close the connection.

        Args:
            wait: join the listener; a farmctl about to exit does not (the
                thread is a daemon and its connection closes with the process).
        """
        self._closed.set()
        if wait:
            self._thread.join(_POLL_S * 5)
