"""Waking the dispatcher: the tick loop, the local socket and PostgreSQL's NOTIFY."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from farm.clock import wait_until
from farm.queue import Store
from farm.runner.wake import PgWake, SocketWake, TickLoop, send_wake

LONG_TICK_S = 600.0  # a tick that never comes within a test: only wakes can tick
WAIT_S = 10.0
GEMM = {"kind": "gemm", "params": {"n": 64}}


class Counter:
    """Counts calls, thread-safe."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.calls += 1


class TestTickLoop:
    def test_first_tick_runs_at_start(self) -> None:
        """The loop ticks once at start, without waiting for its interval."""
        ticks = Counter()
        loop = TickLoop(ticks, LONG_TICK_S)
        loop.start()
        try:
            wait_until(lambda: ticks.calls == 1, WAIT_S, "the first tick")
        finally:
            loop.stop()

    def test_wake_ticks_now(self) -> None:
        """A wake runs a tick at once, long before the interval."""
        ticks = Counter()
        loop = TickLoop(ticks, LONG_TICK_S)
        loop.start()
        try:
            wait_until(lambda: ticks.calls == 1, WAIT_S, "the first tick")
            loop.wake()
            wait_until(lambda: ticks.calls == 2, WAIT_S, "a tick after the wake")
        finally:
            loop.stop()

    def test_wakes_during_a_tick_coalesce_into_one_more(self) -> None:
        """Many wakes while a tick runs give exactly one more tick, never two at once."""
        running = 0
        most = 0
        ticks = 0
        release = threading.Event()
        entered = threading.Event()

        def tick() -> None:
            nonlocal running, most, ticks
            running += 1
            most = max(most, running)
            entered.set()
            if ticks == 1:
                release.wait(WAIT_S)  # the second tick blocks while wakes pile up
            ticks += 1
            running -= 1

        loop = TickLoop(tick, LONG_TICK_S)
        loop.start()
        try:
            wait_until(lambda: ticks == 1, WAIT_S, "the first tick")
            entered.clear()
            loop.wake()
            assert entered.wait(WAIT_S)
            for _ in range(50):
                loop.wake()
            release.set()
            wait_until(lambda: ticks == 3, WAIT_S, "one tick for the piled-up wakes")
            assert not wait_until(lambda: ticks > 3, 0.5)
            assert most == 1
        finally:
            release.set()
            loop.stop()

    def test_a_crashing_tick_does_not_end_the_loop(self) -> None:
        """A tick that raises is logged; the next wake ticks again."""
        calls = Counter()

        def tick() -> None:
            calls()
            raise RuntimeError("a bug")

        loop = TickLoop(tick, LONG_TICK_S)
        loop.start()
        try:
            wait_until(lambda: calls.calls == 1, WAIT_S, "the first tick")
            loop.wake()
            wait_until(lambda: calls.calls == 2, WAIT_S, "a tick after the crash")
        finally:
            loop.stop()

    def test_stop_ends_the_thread(self) -> None:
        """After stop, wakes tick no more."""
        ticks = Counter()
        loop = TickLoop(ticks, LONG_TICK_S)
        loop.start()
        wait_until(lambda: ticks.calls == 1, WAIT_S, "the first tick")
        loop.stop()
        loop.wake()
        assert not wait_until(lambda: ticks.calls > 1, 0.3)


class TestSocketWake:
    def test_send_wake_reaches_the_listener(self, tmp_path: Path) -> None:
        """A datagram from send_wake calls the listener's on_wake."""
        woken = Counter()
        listener = SocketWake(tmp_path, woken)
        try:
            assert send_wake(tmp_path)
            wait_until(lambda: woken.calls == 1, WAIT_S, "the wake")
        finally:
            listener.close()
        assert not (tmp_path / "farmd.wake").exists()

    def test_send_wake_without_farmd_is_harmless(self, tmp_path: Path) -> None:
        """With no farmd listening, send_wake says so and raises nothing."""
        assert send_wake(tmp_path) is False

    def test_a_dead_farmds_socket_file_is_replaced(self, tmp_path: Path) -> None:
        """A socket file left by a killed farmd does not stop the next one listening."""
        (tmp_path / "farmd.wake").write_bytes(b"")
        woken = Counter()
        listener = SocketWake(tmp_path, woken)
        try:
            assert send_wake(tmp_path)
            wait_until(lambda: woken.calls == 1, WAIT_S, "the wake")
        finally:
            listener.close()


class TestPgWake:
    # LISTEN/NOTIFY is PostgreSQL's: only that store (skipped without TEST_POSTGRES_URL).
    @pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
    def test_enqueue_notifies_a_listener(self, store_url: str) -> None:
        """On PostgreSQL an enqueue's commit NOTIFYs farm_jobs, which calls on_wake."""
        with Store(store_url) as store:
            woken = Counter()
            listener = PgWake(store_url, woken)
            try:
                assert listener.listening.wait(WAIT_S)
                wait_until(lambda: woken.calls == 1, WAIT_S, "the wake on listening")
                store.enqueue(GEMM, datetime.now(UTC))
                wait_until(lambda: woken.calls == 2, WAIT_S, "the wake of the enqueue")
            finally:
                listener.close()
