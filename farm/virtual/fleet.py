"""``Fleet``: N virtual phones on one event loop, attached to one adb server.

One asyncio loop in a background thread serves every phone (an idle phone is a
listening socket and some Python objects, no thread or process). The sync API
is thread-safe, for tests and for ``farm-phones serve``::

    with Fleet(4, network="usb-only", adb_port=5037, data_dir=tmp) as fleet:
        fleet.serials            # ["127.0.0.1:40123", ...]
        fleet.unplug(fleet.serials[0])

Phones are attached with ``adb -P ADBPORT connect 127.0.0.1:PORT``. On
:meth:`Fleet.unplug` the fleet also runs ``adb disconnect`` so the phone
vanishes from ``adb devices`` the way a USB phone does when its cable is
pulled (a TCP device would otherwise sit ``offline`` while the server retries);
:meth:`Fleet.replug` connects it again.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import structlog

from farm.adb.server import DEFAULT_ADB_PORT, AdbServer, bundled_adb
from farm.aio import LoopThread
from farm.errors import InfraFault
from farm.virtual.android.spec import PhoneSpec, profiles
from farm.virtual.contracts import NetworkMode
from farm.virtual.phone import VirtualPhone

log = structlog.get_logger(__name__)

T = TypeVar("T")

ADB_CALL_TIMEOUT_S = 20.0
LOOP_CALL_TIMEOUT_S = 60.0


class FleetError(InfraFault):
    """The fleet could not start, attach or drive its phones."""


def adb_argv(adb_port: int, *args: str) -> list[str]:
    """``adb -P ADBPORT ARGS...`` with the adb binary adbutils ships."""
    return [str(bundled_adb()), "-P", str(adb_port), *args]


def run_adb(adb_port: int, *args: str, timeout_s: float = ADB_CALL_TIMEOUT_S) -> str:
    """Run one adb command line against the server on ``adb_port``; returns stdout.

    Raises:
        FleetError: adb timed out or exited non-zero.
    """
    argv = adb_argv(adb_port, *args)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise FleetError(f"{' '.join(args)} did not finish in {timeout_s:g} s") from exc
    if proc.returncode != 0:
        raise FleetError(f"adb {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


class Fleet:
    """N virtual phones served on one event loop in a background thread.

    Args:
        count: number of phones.
        network: every phone's network mode.
        adb_port: port of the adb server to attach the phones to.
        data_dir: host folder; phone i keeps its storage in ``phone-<ii>/``.
        base_port: first adbd port (phones get consecutive ports); None picks free ports.
        specs: explicit phone specs (overrides ``count`` and ``network``).
        reboot_away_s: how long a reboot keeps a phone away (default: each spec's
            ``boot_time_s``).
        attach: run ``adb connect`` for every phone at start.
        same_model: every phone of one model (:func:`profiles`); ignored with ``specs``.
    """

    def __init__(
        self,
        count: int,
        *,
        network: NetworkMode = "lan",
        adb_port: int = DEFAULT_ADB_PORT,
        data_dir: Path,
        base_port: int | None = None,
        specs: Sequence[PhoneSpec] | None = None,
        reboot_away_s: float | None = None,
        attach: bool = True,
        same_model: bool = False,
    ) -> None:
        self.specs = (list(specs) if specs is not None
                      else profiles(count, network, same_model=same_model))
        self.adb_port = adb_port
        self.data_dir = Path(data_dir)
        self.base_port = base_port
        self.reboot_away_s = reboot_away_s
        self.attach = attach
        self.phones: list[VirtualPhone] = []
        self._aio: LoopThread | None = None  # between start() and stop()

    # --- the loop thread -------------------------------------------------------------

    def _loop(self) -> LoopThread:
        if self._aio is None:
            raise FleetError("the fleet is not started")
        return self._aio

    def run(self, factory: Callable[[], Awaitable[T]], timeout_s: float = LOOP_CALL_TIMEOUT_S) -> T:
        """Run ``factory()`` on the fleet's loop and wait for its result (thread-safe).

        Raises:
            FleetError: the fleet is not started.
            TimeoutError: no result within ``timeout_s`` (the call is cancelled).
        """

        async def call() -> T:
            return await factory()

        return self._loop().run(call(), timeout_s)

    def call(self, fn: Callable[[], T], timeout_s: float = LOOP_CALL_TIMEOUT_S) -> T:
        """Run the plain function ``fn()`` on the fleet's loop (thread-safe).

        Raises:
            FleetError: the fleet is not started.
            TimeoutError: the loop did not get to it within ``timeout_s``.
        """
        return self._loop().call(fn, timeout_s)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> Fleet:
        """Start every phone and attach it to the adb server.

        On any failure the phones started so far are stopped and the loop thread
        ends before the error propagates.

        Raises:
            FleetError: a port is taken, or ``adb connect`` failed.
            TimeoutError: the phones did not start within the loop-call deadline.
        """
        if self._aio is not None:
            return self
        self.phones = []
        self._aio = LoopThread(name="virtual-phones")
        try:
            try:
                self.run(self._start_phones, timeout_s=LOOP_CALL_TIMEOUT_S + 10 * len(self.specs))
            except OSError as exc:
                raise FleetError(f"cannot start phones: {exc}") from exc
            if self.attach:
                for phone in self.phones:
                    self.connect(phone.serial)
        except BaseException:
            # The caller registers stop() only once start() returns: clean up here.
            self.stop()
            raise
        return self

    async def _start_phones(self) -> None:
        for index, spec in enumerate(self.specs):
            port = 0 if self.base_port is None else self.base_port + index
            phone = VirtualPhone(
                spec,
                self.data_dir / f"phone-{index:02d}",
                port=port,
                reboot_away_s=self.reboot_away_s,
            )
            self.phones.append(phone)
            await phone.start()

    def stop(self) -> None:
        """Detach every phone, power them off (ending their processes), stop the loop."""
        if self._aio is None:
            return
        if self.attach:
            for phone in self.phones:
                self.disconnect(phone.serial)
        try:
            self.run(self._stop_phones)
        finally:
            self._aio.close()
            self._aio = None

    async def _stop_phones(self) -> None:
        await asyncio.gather(*(phone.stop() for phone in self.phones), return_exceptions=True)

    def __enter__(self) -> Fleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- lookup ---------------------------------------------------------------------------

    @property
    def serials(self) -> list[str]:
        """Every phone's adb serial, ``127.0.0.1:PORT``, in start order."""
        return [phone.serial for phone in self.phones]

    def phone(self, serial: str) -> VirtualPhone:
        """The phone with ``serial``.

        Raises:
            KeyError: no phone of this fleet has that serial.
        """
        for phone in self.phones:
            if phone.serial == serial:
                return phone
        raise KeyError(serial)

    # --- adb server attachment ----------------------------------------------------------

    def connect(self, serial: str) -> None:
        """``adb connect SERIAL``.

        Raises:
            FleetError: adb did not report the connection.
        """
        out = run_adb(self.adb_port, "connect", serial)
        if "connected to" not in out:
            raise FleetError(f"adb connect {serial}: {out.strip()}")

    def disconnect(self, serial: str) -> None:
        """``adb disconnect SERIAL``; a phone the server does not know is fine.

        Skipped when no server listens: the adb client would start one just to
        disconnect, and leave it running.
        """
        if not AdbServer(port=self.adb_port).alive():
            return
        try:
            run_adb(self.adb_port, "disconnect", serial)
        except FleetError as exc:
            log.debug("adb_disconnect_failed", serial=serial, reason=str(exc))

    # --- faults (thread-safe) ----------------------------------------------------------

    def crash_app(self, serial: str) -> None:
        """Crash the TVM RPC app on ``serial``."""
        self.run(self.phone(serial).crash_app)

    def unplug(self, serial: str) -> None:
        """Pull the cable: the transport drops, the phone refuses reconnects.

        The phone leaves ``adb devices`` until :meth:`replug`.
        """
        phone = self.phone(serial)
        self.run(phone.unplug)
        if self.attach:
            self.disconnect(serial)

    def replug(self, serial: str) -> None:
        """Plug the cable back: the phone listens again and is attached."""
        phone = self.phone(serial)
        self.run(phone.replug)
        if self.attach:
            self.connect(serial)

    def hang_shell(self, serial: str, on: bool = True) -> None:
        """Make new shell commands on ``serial`` never return while ``on``."""
        phone = self.phone(serial)
        self.call(lambda: phone.hang_shell(on))

    def heat(self, serial: str, to_c: float) -> None:
        """Heat ``serial`` to ``to_c`` °C."""
        phone = self.phone(serial)
        self.call(lambda: phone.heat(to_c))

    def throttle(self, serial: str, factor: float) -> None:
        """Run ``serial`` at ``factor`` of its speed (1.0: full speed again).

        Raises:
            ValueError: ``factor`` is not in (0, 1].
        """
        phone = self.phone(serial)
        self.call(lambda: phone.throttle(factor))

    def drain_battery(self, serial: str, to_pct: float) -> None:
        """Drop ``serial``'s battery to ``to_pct`` percent."""
        phone = self.phone(serial)
        self.call(lambda: phone.drain_battery(to_pct))

    def fill_storage(self, serial: str) -> None:
        """Fill ``serial``'s /data."""
        self.call(self.phone(serial).fill_storage)

    def set_unauthorized(self, serial: str, on: bool = True) -> None:
        """Make ``serial`` demand an authorized host key (``False``: accept the host)."""
        phone = self.phone(serial)
        self.call(lambda: phone.set_unauthorized(on))

    def authorize(self, serial: str, public_key: str) -> None:
        """Trust the host key ``public_key`` (``adbkey.pub`` line) on ``serial``."""
        phone = self.phone(serial)
        self.call(lambda: phone.authorize(public_key))

    def reboot(self, serial: str) -> None:
        """Start a reboot of ``serial``; returns at once (the phone comes back by itself)."""
        phone = self.phone(serial)
        self.call(phone.adbd.request_reboot)
