r"""Routing an OPEN's service name to its handler, and the small services.

Names and replies follow AOSP ``adb/SERVICES.TXT`` and
``adb/daemon/services.cpp`` ``daemon_service_to_fd``. ``reverse:`` replies are
adbd's ``handle_forward_request`` (``adb/adb.cpp``) with its device-side framing:
one ``OKAY`` on success (the host adds the connect OKAY itself), ``OKAY`` +
``%04x``-length string for ``list-forward``, ``FAIL`` + ``%04x``-length message
otherwise. ``list-forward`` lines are ``<transport> <device-spec> <host-spec>\n``
(``adb/adb_listeners.cpp`` ``format_listeners``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from farm.aio import splice
from farm.virtual.adbd.shell import parse_shell_service, serve_exec, serve_shell
from farm.virtual.adbd.stream import Stream
from farm.virtual.adbd.sync import serve_sync
from farm.virtual.adbd.transport import ServiceHandler, Transport
from farm.virtual.contracts import Userland


class AdbdNet(Protocol):
    """What adbd needs of the phone's network (``farm.virtual.net.Net``)."""

    async def connect_device_port(
        self, device_port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Open a stream to a listener on the phone (``tcp:PORT``).

        Raises:
            ConnectionRefusedError: nothing listens on ``device_port``.
        """
        ...

    def add_reverse(self, device_spec: str, host_spec: str, *, norebind: bool = False) -> None:
        """Tunnel the phone's ``device_spec`` to the host's ``host_spec`` (``reverse:forward``).

        Raises:
            ReverseError: bad spec; ``norebind`` and the spec is taken; the port is in use.
        """
        ...

    def remove_reverse(self, device_spec: str) -> None:
        """Remove one tunnel (``reverse:killforward``).

        Raises:
            ReverseError: no tunnel on ``device_spec``.
        """
        ...

    def remove_all_reverse(self) -> None:
        """Remove every tunnel (``reverse:killforward-all``)."""
        ...

    def list_reverse(self) -> list[tuple[str, str]]:
        """``(device_spec, host_spec)`` pairs in creation order."""
        ...


def protocol_string(text: str) -> bytes:
    """adb's length-prefixed string: 4 lowercase hex digits, then the bytes."""
    data = text.encode()
    return f"{len(data):04x}".encode() + data


def reverse_reply(command: str, net: AdbdNet, transport: Transport) -> bytes:
    """adbd's exact reply bytes to ``reverse:<command>``; updates the tunnel table.

    ``transport.reverse_host_specs`` mirrors what the adb server allows the
    phone to open (``transport.cpp`` ``UpdateReverseConfig``).
    """
    if command == "list-forward":
        lines = "".join(f"{transport.name} {dev} {host}\n" for dev, host in net.list_reverse())
        return protocol_string(lines)
    if command == "killforward-all":
        net.remove_all_reverse()
        transport.reverse_host_specs.clear()
        return b"OKAY"
    kill = command.startswith("killforward:")
    if not kill and not command.startswith("forward:"):
        return b"FAIL" + protocol_string("not a reverse forwarding command")
    rest = command[len("killforward:") :] if kill else command[len("forward:") :]
    norebind = False
    if not kill and rest.startswith("norebind:"):
        norebind = True
        rest = rest[len("norebind:") :]
    pieces = rest.split(";")
    if kill and (len(pieces) != 1 or not pieces[0]):
        return b"FAIL" + protocol_string(f"bad killforward: {rest}")
    if not kill and (len(pieces) != 2 or not pieces[0] or not pieces[1] or pieces[1][0] == "*"):
        return b"FAIL" + protocol_string(f"bad forward: {rest}")
    try:
        if kill:
            net.remove_reverse(pieces[0])
        else:
            net.add_reverse(pieces[0], pieces[1], norebind=norebind)
    except Exception as exc:  # noqa: BLE001 - net.ReverseError's text is adbd's FAIL text
        return b"FAIL" + protocol_string(str(exc))
    transport.reverse_host_specs.clear()
    transport.reverse_host_specs.update(host for _dev, host in net.list_reverse())
    return b"OKAY"


async def _serve_reply(reply: bytes, stream: Stream) -> None:
    stream.write(reply)


def root_reply(userland: Userland, service: str) -> bytes | None:
    """adbd's answer to ``root:`` or ``unroot:`` (AOSP ``daemon/restart_service.cpp``).

    adbd runs as the shell user here. A user build (``ro.debuggable`` not 1)
    refuses ``root:`` with the text the host ``adb root`` prints (and exits 0
    on). Restarting adbd as root on a userdebug build is not modelled: None
    (the host sees the service closed).
    """
    if service == "unroot:":
        return b"adbd not running as root\n"
    if userland.get_property("ro.debuggable") != "1":
        return b"adbd cannot run as root in production builds\n"
    return None


class ServiceRouter:
    """Maps service names to handlers for one phone.

    Args:
        userland: the Android side (shell, files).
        net: the phone's network (device ports, reverse table).
        request_reboot: called (once the reply is sent) for ``reboot:``.
    """

    def __init__(
        self, userland: Userland, net: AdbdNet, request_reboot: Callable[[], None]
    ) -> None:
        self._userland = userland
        self._net = net
        self._request_reboot = request_reboot

    async def resolve(self, name: str, transport: Transport) -> ServiceHandler | None:
        """The handler for ``name``, or None (the transport then answers CLSE).

        ``tcp:PORT`` connects first, so a port nobody listens on is refused with
        CLSE as adbd's ``socket_spec_connect`` failure is.
        """
        userland = self._userland
        if name.startswith("shell"):
            request = parse_shell_service(name[len("shell") :])
            if request is None:
                return None
            return lambda stream: serve_shell(userland, request, stream)
        if name.startswith("exec:"):
            command = name[len("exec:") :]
            return lambda stream: serve_exec(userland, command, stream)
        if name.startswith("sync:"):
            return lambda stream: serve_sync(userland, stream)
        if name.startswith("reverse:"):
            command = name[len("reverse:") :]
            net = self._net
            return lambda stream: _serve_reply(reverse_reply(command, net, transport), stream)
        if name.startswith("tcp:"):
            return await self._resolve_tcp(name[len("tcp:") :])
        if name.startswith("reboot:"):
            return self._serve_reboot
        if name in ("root:", "unroot:"):
            reply = root_reply(userland, name)
            return None if reply is None else (lambda stream: _serve_reply(reply, stream))
        return None

    async def _resolve_tcp(self, target: str) -> ServiceHandler | None:
        host, _, port_text = target.rpartition(":")
        if host not in ("", "localhost", "127.0.0.1") or not port_text.isdigit():
            return None
        try:
            reader, writer = await self._net.connect_device_port(int(port_text))
        except OSError:
            return None

        async def handler(stream: Stream) -> None:
            try:
                await splice(stream, stream, reader, writer)
            finally:
                writer.close()

        return handler

    async def _serve_reboot(self, _stream: Stream) -> None:
        # adbd sets sys.powerctl and the kernel takes the transport down; the
        # client's `adb reboot` just sees the stream end.
        asyncio.get_running_loop().call_soon(self._request_reboot)
