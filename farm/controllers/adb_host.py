"""The host's one adb server as farm runs it: owned, watched, tracked, its phones reached.

farmd starts the server (or adopts the one a killed farmd of its data folder
left running, :mod:`farm.adb.owner`), ends it at its stop only if it owns it,
restarts it when it dies, follows its device list (adb's device tracker, the
phones' discovery) and connects the phones that attach over TCP. ``farmctl
doctor`` asks it whether the server answers and what it lists. Nothing above
:mod:`farm.controllers` speaks to the server itself: the phones' controller
(:meth:`AdbHost.android`) shares this host's client.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from farm.errors import FarmError

if TYPE_CHECKING:
    from farm.adb import Adb, AdbServer, DeviceTracker
    from farm.aio import LoopThread
    from farm.config import Settings
    from farm.controllers.android import AndroidController
    from farm.controllers.options import FleetOptions

__all__ = ["CONNECT_TIMEOUT_S", "AdbHost"]

log = structlog.get_logger(__name__)

#: ``adb connect HOST:PORT`` of a phone attached over TCP.
CONNECT_TIMEOUT_S = 10.0


class AdbHost:
    """The host's adb server on ``port`` and one client of it.

    Args:
        port: the server's port (``adb.port``).
        binary: the adb executable; None means the one adbutils ships.
        data_dir: where farmd notes the server it started (``adb.pid``); None
            for a host that never starts or owns the server (tests, doctor).
        default_timeout_s: the client's deadline of a call that names none.
    """

    def __init__(self, port: int, binary: Path | None = None, *, data_dir: Path | None = None,
                 default_timeout_s: float | None = None) -> None:
        from farm.adb import Adb, AdbServer

        self.server: AdbServer = AdbServer(port=port, binary=binary)
        self.adb: Adb = (Adb(self.server) if default_timeout_s is None
                         else Adb(self.server, default_timeout_s=default_timeout_s))
        self._data_dir = data_dir
        self._owned = False  # it started the server, so it ends it (stop)
        self._tracker: DeviceTracker | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, data_dir: Path | None = None,
                      default_timeout_s: float | None = None) -> AdbHost:
        """The server ``[adb]`` names (its port and binary)."""
        return cls(settings.adb.port, settings.adb.binary, data_dir=data_dir,
                   default_timeout_s=default_timeout_s)

    @property
    def port(self) -> int:
        """The server's TCP port on loopback."""
        return self.server.port

    @property
    def owned(self) -> bool:
        """Whether this host started (or adopted) the server, and so ends it at :meth:`stop`."""
        return self._owned

    def android(self, options: FleetOptions, loop: LoopThread | None = None) -> AndroidController:
        """The phones' controller on this host's client (tunnels on ``loop``)."""
        from farm.controllers.android import AndroidController

        return AndroidController(options, self.adb, loop)

    # -- the server ----------------------------------------------------------------

    def start(self) -> None:
        """Make sure the server runs; own it if this call started it or a killed farmd had.

        Raises:
            AdbServerDown: it did not come up.
        """
        from farm.adb.owner import adopt_adb_server, record_adb_server

        adopted = self._data_dir is not None and adopt_adb_server(self._data_dir, self.server)
        self._owned = self.server.ensure_running() or adopted
        if self._owned and self._data_dir is not None:
            record_adb_server(self._data_dir, self.server)

    def alive(self) -> bool:
        """Whether something accepts connections on the server's port."""
        return self.server.alive()

    def version(self) -> int:
        """The server's protocol version (41 for platform-tools 1.0.41).

        Raises:
            AdbServerDown: the server does not answer.
        """
        return self.server.version()

    def transports(self) -> dict[str, str]:
        """``{serial: state}`` of what the server lists (``adb devices -l``), in adb's words.

        Raises:
            PhoneFault: the server did not answer within the client's deadline.
            ValueError: its answer is not a device list.
        """
        from farm.device.adb_devices import parse_devices_l

        return {e.serial: e.state for e in parse_devices_l(self.adb.devices_text())}

    def restart_if_down(self) -> None:
        """Start the server again if it died (someone killed it); a restarted one is owned.

        Raises:
            AdbServerDown: it did not come up.
        """
        if self.server.alive():
            return
        from farm.adb.owner import record_adb_server

        log.warning("adb_server_down", adb_port=self.port)
        if self.server.ensure_running():
            self._owned = True
            if self._data_dir is not None:
                record_adb_server(self._data_dir, self.server)
        log.info("adb_server_restarted", adb_port=self.port)

    def stop(self) -> None:
        """End the server if this host owns it (``adb start-server`` daemonizes it).

        A server that was already serving the port is someone else's (a
        person's ``adb``, another tool) and is left running, unless a killed
        farmd of this data folder had started it
        (:func:`farm.adb.owner.adopt_adb_server`).
        """
        if not self._owned:
            return
        from farm.adb.owner import forget_adb_server

        self.server.kill()
        if self._data_dir is not None:
            forget_adb_server(self._data_dir)
        log.info("adb_server_stopped", adb_port=self.port)

    # -- the phones ------------------------------------------------------------------

    def track(self, on_state: Callable[[str, str], None], *, debounce_s: float = 1.0,
              reconcile_interval_s: float = 30.0) -> None:
        """Follow the server's device list: ``on_state(serial, state)`` for each settled change.

        Called from the tracker's thread (:class:`farm.adb.DeviceTracker`);
        :meth:`stop_tracking` ends it.
        """
        from farm.adb import DeviceTracker

        self._tracker = DeviceTracker(self.server, on_state, debounce_s=debounce_s,
                                      reconcile_interval_s=reconcile_interval_s)
        self._tracker.start()

    def stop_tracking(self) -> None:
        """Stop following the device list (no-op if not following)."""
        if self._tracker is not None:
            self._tracker.stop()

    def connect_missing(self, addresses: Iterable[str]) -> None:
        """``adb connect`` each ``HOST:PORT`` the server does not list as ``device``.

        A phone that does not answer is tried again at the next call.

        Raises:
            AdbServerDown: the server does not answer its device list.
        """
        wanted = list(addresses)
        if not wanted:
            return
        listed = (self._tracker.read_list() if self._tracker is not None
                  else self.transports())
        for address in wanted:
            if listed.get(address) != "device":
                with contextlib.suppress(FarmError):
                    self.adb.connect(address, timeout_s=CONNECT_TIMEOUT_S)
