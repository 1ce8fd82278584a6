"""``VirtualPhone``: adbd + network + Android userland, plus the fault API.

Construct and drive it on one asyncio event loop (:class:`farm.virtual.fleet.Fleet`
does that in a background thread for synchronous callers)::

    phone = VirtualPhone(spec, data_dir)        # binds 127.0.0.1:PORT
    await phone.start()                         # boots, listens for the adb server
    await phone.unplug(); await phone.replug()
    await phone.stop()
"""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import structlog

from farm.netaddr import bind_listener
from farm.virtual.adbd import Adbd
from farm.virtual.adbd.stream import Stream
from farm.virtual.android.phone import AndroidPhone
from farm.virtual.android.spec import PhoneSpec
from farm.virtual.net import Net

log = structlog.get_logger(__name__)


class VirtualPhone:
    """One virtual Android phone reachable as ``127.0.0.1:PORT`` over adb.

    Args:
        spec: the model and behaviour; its ``serial_port`` is replaced by the bound port.
        data_dir: host folder for this phone's storage and state.
        port: adbd's TCP port; 0 picks a free one (bound at construction).
        host: adbd's listen address.
        reboot_away_s: how long a reboot keeps the phone away; defaults to
            ``spec.boot_time_s``.

    Raises:
        OSError: ``port`` is taken.
    """

    def __init__(
        self,
        spec: PhoneSpec,
        data_dir: Path,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        reboot_away_s: float | None = None,
    ) -> None:
        self._listener: socket.socket | None = bind_listener(host, port, backlog=16)
        self._listener.setblocking(False)
        port = self._listener.getsockname()[1]
        self.spec = dataclasses.replace(spec, serial_port=port)
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.net = Net(self.spec.network, self._open_host)
        self.android = AndroidPhone(self.spec, self.data_dir, self.net)
        away_s = self.spec.boot_time_s if reboot_away_s is None else reboot_away_s
        self.adbd = Adbd(self.android, self.net, port=port, host=host, reboot_away_s=away_s)
        self.android.on_reboot = lambda _mode: self.adbd.request_reboot()

    @property
    def serial(self) -> str:
        """The adb serial, ``127.0.0.1:PORT``."""
        return self.adbd.serial

    @property
    def port(self) -> int:
        """adbd's TCP port."""
        return self.adbd.port

    async def _open_host(self, host_spec: str) -> tuple[Stream, Stream]:
        return await self.adbd.open_to_host(host_spec)

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Boot the userland and start listening for the adb server."""
        await self.android.on_boot()
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await self.adbd.start(sock=listener)
        else:
            await self.adbd.start()
        log.info("phone_started", serial=self.serial, model=self.spec.model)

    async def stop(self) -> None:
        """Power off: close adbd, end every process the phone started, close its network."""
        await self.adbd.stop()
        await self.android.on_shutdown()
        await self.net.close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    # --- faults ------------------------------------------------------------------------

    async def crash_app(self) -> None:
        """The TVM RPC app crashes (its process dies, logcat gets a FATAL EXCEPTION)."""
        await self.android.crash_app()

    async def unplug(self) -> None:
        """Pull the cable: the transport drops and reconnects are refused until replugged."""
        await self.adbd.unplug()

    async def replug(self) -> None:
        """Plug the cable back: adbd listens again and the adb server reconnects."""
        await self.adbd.replug()

    def hang_shell(self, on: bool = True) -> None:
        """New shell commands never return while ``on`` (the host's call times out)."""
        self.android.hang_shell(on)

    def heat(self, to_c: float) -> None:
        """Heat the phone's hottest sensor to ``to_c`` °C."""
        self.android.heat(to_c)

    def throttle(self, factor: float) -> None:
        """Run the phone (its RPC process group) at ``factor`` of its speed; 1.0 removes it.

        Raises:
            ValueError: ``factor`` is not in (0, 1].
        """
        self.android.throttle(factor)

    def drain_battery(self, to_pct: float) -> None:
        """Drop the battery to ``to_pct`` percent."""
        self.android.drain_battery(to_pct)

    def fill_storage(self) -> None:
        """Fill /data: pushes and installs fail for lack of space."""
        self.android.fill_storage()

    def set_unauthorized(self, on: bool = True) -> None:
        """Demand an authorized host key (revoking all); ``False`` accepts the host again."""
        self.adbd.set_auth_required(on)

    def authorize(self, public_key: str) -> None:
        """Trust an ``adbkey.pub`` line, as "Always allow from this computer" does."""
        self.adbd.authorize(public_key)

    async def reboot(self) -> None:
        """Reboot: away from the adb server for ``reboot_away_s``, then back."""
        await self.adbd.reboot()
