"""The typed seams between the virtual phone's parts.

``adbd`` (the transport) talks to the Android model only through
:class:`ShellIO`, :class:`Userland` and :class:`PhoneNet`; the Android model
talks to the network only through :class:`PhoneNet`. Keeping these small lets
each part be tested alone and keeps adb framing out of the shell commands.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Literal, Protocol

from farm.aio import StreamReaderLike, StreamWriterLike

NetworkMode = Literal["lan", "usb-only"]

# Opens a stream from the phone to the host through the adb transport, the way
# adbd does for ``adb reverse`` (it sends OPEN("tcp:PORT") to the adb server).
# Returns (reader, writer) of an asyncio stream pair; raises ConnectionRefusedError
# if the host side refuses (CLSE without OKAY).
HostOpener = Callable[[str], Awaitable[tuple[StreamReaderLike, StreamWriterLike]]]


class ShellIO(Protocol):
    """What a shell command sees of its adb stream.

    stdout and stderr are separate in shell v2; in shell v1 and ``exec:`` the
    transport merges them into one stream, as adbd does (AOSP
    ``daemon/shell_service.cpp`` points stderr at the same socket).
    """

    async def read_stdin(self) -> bytes:
        """Next chunk of stdin; ``b""`` at end of input (stream closed or v2 CLOSE_STDIN)."""
        ...

    def write_stdout(self, data: bytes) -> None:
        """Send ``data`` as the command's stdout."""
        ...

    def write_stderr(self, data: bytes) -> None:
        """Send ``data`` as the command's stderr (merged into stdout before shell v2)."""
        ...

    async def drain(self) -> None:
        """Wait until written output was accepted by the host (flow control)."""
        ...


class Userland(Protocol):
    """The Android side of a phone, as the transport needs it."""

    def banner_props(self) -> Mapping[str, str]:
        """``ro.product.name``, ``ro.product.model``, ``ro.product.device`` for CNXN."""
        ...

    def get_property(self, key: str) -> str:
        """A system property's value, ``""`` if unset (adbd's ``android::base::GetProperty``)."""
        ...

    async def shell(self, command: str, io: ShellIO) -> int:
        """Run one ``sh -c`` command line; returns its exit status (0..255).

        ``command == ""`` is an interactive shell: read lines from stdin and
        run each until EOF or ``exit``.
        """
        ...

    def host_path(self, device_path: str, *, write: bool) -> Path:
        """Map a device path (``/data/local/tmp/x``) to the host file backing it.

        Raises:
            PermissionError: the shell user may not read (or write) there.
            FileNotFoundError: the device path is outside the emulated storage.
        """
        ...

    def storage_free_bytes(self) -> int:
        """Free bytes on /data; sync SEND fails with ENOSPC past it."""
        ...

    async def on_boot(self) -> None:
        """Called when the phone (re)boots: start boot-time state, clear processes."""
        ...

    async def on_shutdown(self) -> None:
        """Called before reboot or teardown: end every process the phone started."""
        ...


class PhoneNet(Protocol):
    """A phone's network namespace, as seen by the phone's own processes.

    Device-side ports are the ports an app binds *on the phone*. In ``lan`` mode
    they are real host ports (the phone is reachable directly); in ``usb-only``
    mode every phone has its own port space, reachable from the host only
    through ``adb forward``, and the phone reaches the host only through
    ``adb reverse``.
    """

    mode: NetworkMode

    def publish(self, device_port: int, real_host: str, real_port: int) -> None:
        """Declare that device port ``device_port`` is served by a real listener."""
        ...

    def unpublish(self, device_port: int) -> None:
        """Forget a device port; unknown ports are ignored (idempotent)."""
        ...

    def device_port_in_use(self, device_port: int) -> bool:
        """Whether an app or an adbd reverse listener holds ``device_port``."""
        ...

    async def outbound(self, host: str, port: int) -> tuple[str, int]:
        """A real (host, port) that reaches ``host:port`` *as the phone would*.

        A host process connects to it on the phone's behalf.
        Loopback addresses (127.0.0.0/8, localhost) are the phone's own: they
        reach published device ports, or the host through an ``adb reverse``
        tunnel whose bytes cross the adb transport. ``10.0.2.2`` is the host's
        loopback, as on the Android emulator, in ``lan`` mode only. Other
        addresses are reached directly in ``lan`` mode and are unreachable in
        ``usb-only`` mode. An unreachable target still gets an endpoint: one
        that refuses (closes) every connection, as a firewall would.
        """
        ...
