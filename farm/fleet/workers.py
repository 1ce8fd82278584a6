"""Where the fleet's work runs: a thread per slow task, a pool per sweep.

Provisioning and recovery may each wait up to a minute for the app to
register; a session probe of a frozen app waits for its whole timeout. Each
such task gets its own thread (the manager runs at most one slow task and one
probe per phone), so their number follows the fleet and none waits behind
another phone's. Sweeps run on a separate pool sized to the phones swept, so a
sweep never queues behind slow work.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable

import structlog

__all__ = ["Closing", "SweepPool", "TaskThreads"]

log = structlog.get_logger(__name__)


class Closing(Exception):
    """The fleet closes: a task stops waiting and records nothing about the device."""


class TaskThreads:
    """Slow tasks, each on its own daemon thread, joined (bounded) at close."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()

    def start(self, label: str, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on a new thread named ``<name>-<label>``."""
        def run() -> None:
            try:
                fn()
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=f"{self._name}-{label}", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def running(self) -> int:
        """How many tasks run now."""
        with self._lock:
            return len(self._threads)

    def join(self, deadline_s: float) -> list[str]:
        """Wait up to ``deadline_s`` in all for every task; returns the names still running."""
        end = time.monotonic() + deadline_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
        return [t.name for t in threads if t.is_alive()]


class SweepPool:
    """A thread pool that grows to the number of phones one sweep reads at once."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._size = 0
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    def run_all(self, calls: Iterable[Callable[[], None]], timeout_s: float) -> int:
        """Run every call in parallel, one thread each; wait up to ``timeout_s``.

        Returns:
            How many calls had not finished by then (their phones' adb calls
            carry their own deadlines, so they end soon after).
        """
        calls = list(calls)
        if not calls:
            return 0
        with self._lock:
            if self._closed:
                return len(calls)
            if self._pool is None or self._size < len(calls):
                old, self._size = self._pool, len(calls)
                self._pool = concurrent.futures.ThreadPoolExecutor(self._size, self._name)
                if old is not None:
                    old.shutdown(wait=False)
            futures = [self._pool.submit(call) for call in calls]
        _, pending = concurrent.futures.wait(futures, timeout=timeout_s)
        return len(pending)

    def close(self) -> None:
        """Cancel what has not started; running calls end by their own deadlines."""
        with self._lock:
            self._closed = True
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
