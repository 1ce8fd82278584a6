"""Device tracking: who is attached to the adb server, in which state.

The adb server pushes the whole device list on ``host:track-devices`` at every
change (AOSP ``SERVICES.TXT``: "host:track-devices ... each time the list
changes, a new one is sent"). A USB hub makes states flap (``offline`` for a
few hundred ms during enumeration), so a new state is reported only after it
held for ``debounce_s``. The subscription dies with the adb server: the
tracker subscribes again once the server is back, and every
``reconcile_interval_s`` it also reads the list directly, so a missed push
cannot leave a phone in the wrong state for long.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import adbutils
import structlog

from farm.adb.client import _DeadlineClient
from farm.adb.server import AdbServer
from farm.errors import AdbServerDown

log = structlog.get_logger(__name__)

StateCallback = Callable[[str, str], None]
"""Called as ``on_change(serial, state)``; state is an adb state or ``"absent"``."""


def parse_track_list(text: str) -> dict[str, str]:
    r"""``serial\tstate`` lines (the track-devices payload) -> {serial: state}."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        serial, sep, state = line.partition("\t")
        if sep and serial:
            states[serial] = state.strip()
    return states


class DeviceTracker:
    """Follows the adb server's device list and reports debounced state changes.

    Args:
        server: the host's adb server.
        on_change: called from the tracker's thread for every settled change.
        debounce_s: how long a new state must hold before it is reported.
        reconcile_interval_s: period of the direct ``host:devices`` read.
        monotonic: the clock (seconds); injectable for tests.
    """

    def __init__(
        self,
        server: AdbServer,
        on_change: StateCallback,
        *,
        debounce_s: float = 1.0,
        reconcile_interval_s: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._server = server
        self._client = _DeadlineClient(server, socket_timeout_s=5.0)
        self._on_change = on_change
        self._debounce_s = debounce_s
        self._reconcile_interval_s = reconcile_interval_s
        self._monotonic = monotonic
        self._reported: dict[str, str] = {}
        self._pending: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = None
        self._threads: list[threading.Thread] = []
        self.subscriptions = 0  # how many times the track-devices stream was opened

    # -- state ---------------------------------------------------------------

    def states(self) -> dict[str, str]:
        """The settled states reported so far (absent phones left out)."""
        with self._lock:
            return dict(self._reported)

    def observe(self, listed: dict[str, str]) -> None:
        """Feed one full device list (from a push or a direct read)."""
        now = self._monotonic()
        with self._lock:
            for serial in set(self._reported) | set(self._pending) | set(listed):
                state = listed.get(serial, "absent")
                if self._reported.get(serial, "absent") == state:
                    self._pending.pop(serial, None)
                elif self._pending.get(serial, (None, 0.0))[0] != state:
                    self._pending[serial] = (state, now)

    def settle(self) -> list[tuple[str, str]]:
        """Report every pending state that held for ``debounce_s``; returns them."""
        now = self._monotonic()
        settled = []
        with self._lock:
            for serial, (state, since) in list(self._pending.items()):
                if now - since >= self._debounce_s:
                    del self._pending[serial]
                    if state == "absent":
                        self._reported.pop(serial, None)
                    else:
                        self._reported[serial] = state
                    settled.append((serial, state))
        for serial, state in settled:
            log.info("device_state_settled", serial=serial, to_state=state)
            self._on_change(serial, state)
        return settled

    # -- threads ---------------------------------------------------------------

    def start(self) -> None:
        """Start the subscription and settle threads (daemon threads)."""
        for target, name in ((self._follow, "adb-track"), (self._tick, "adb-settle")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop both threads; returns when they ended or ``timeout_s`` passed."""
        self._stop.set()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(2)
        for thread in self._threads:
            thread.join(timeout_s)

    def read_list(self) -> dict[str, str]:
        """The adb server's device list right now (``host:devices``).

        Raises:
            AdbServerDown: the server does not answer.
        """
        try:
            with self._client.make_connection(timeout=5.0) as conn:
                conn.send_command("host:devices")
                conn.check_okay()
                return parse_track_list(conn.read_string_block())
        except (adbutils.AdbError, OSError) as exc:
            raise AdbServerDown(self._server.port, str(exc)) from exc

    def _follow(self) -> None:
        retry_s = 0.2
        while not self._stop.is_set():
            try:
                conn = self._client.make_connection(timeout=None)
            except (AdbServerDown, adbutils.AdbError, OSError):
                self._stop.wait(retry_s)
                retry_s = min(retry_s * 2, 2.0)
                continue
            retry_s = 0.2
            self._sock = conn.conn
            try:
                conn.conn.settimeout(None)
                conn.send_command("host:track-devices")
                conn.check_okay()
                self.subscriptions += 1
                log.info("adb_tracking_subscribed", adb_port=self._server.port)
                while not self._stop.is_set():
                    self.observe(parse_track_list(conn.read_string_block()))
            except (adbutils.AdbError, OSError, ValueError, EOFError) as exc:
                if not self._stop.is_set():
                    log.warning("adb_tracking_lost", adb_port=self._server.port, reason=str(exc))
                    # The server died: every phone is gone until it is back.
                    self.observe({})
            finally:
                self._sock = None
                conn.close()

    def _tick(self) -> None:
        last_reconcile = self._monotonic()
        while not self._stop.wait(min(0.2, self._debounce_s / 2 or 0.2)):
            if self._monotonic() - last_reconcile >= self._reconcile_interval_s:
                last_reconcile = self._monotonic()
                with contextlib.suppress(AdbServerDown):
                    self.observe(self.read_list())
            self.settle()
