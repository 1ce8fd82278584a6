"""adb tunnels for phones that reach the host only over USB.

Office networks often block the tracker port, and the stock app reports the
address the tracker sees, so usb-only phones work like this (see
:mod:`farm.tvm.relay` for the whole mechanism)::

    Relay(tracker)                      rewrites the phone's registration
    adb reverse tcp:9190 tcp:<relay>    phone's 127.0.0.1:9190 -> relay
    adb forward tcp:0 tcp:P             made by the relay once the app's
                                        registration names its port P

The app is then pointed at ``127.0.0.1:9190`` on the phone. The forward waits
for the registration because only the app knows the port it bound: the stock
app takes the first free port from 5001, so 5002 when another app holds 5001
(apache/tvm ``ConnectTrackerServerProcessor.java``).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import structlog

from farm.adb import Adb
from farm.aio import LoopThread
from farm.errors import FarmError
from farm.tvm.relay import Relay

log = structlog.get_logger(__name__)

FORWARD_TIMEOUT_S = 15.0


@dataclass
class UsbTunnel:
    """The tunnels of one usb-only phone.

    Attributes:
        serial: the phone.
        relay: the phone's tracker relay; ``relay.forwards`` maps each device
            port the app registered to its host forward port.
        device_tracker_port: the port the app connects to on the phone.
    """

    serial: str
    relay: Relay
    device_tracker_port: int

    @property
    def forward_ports(self) -> dict[int, int]:
        """``{device port: host port}`` of the forwards made for the app so far."""
        return dict(self.relay.forwards)


def open_usb_tunnel(
    adb: Adb, loop: LoopThread, serial: str, tracker: tuple[str, int],
    device_tracker_port: int,
) -> UsbTunnel:
    """Start the relay and make the reverse; the relay makes the forward later.

    Raises:
        PhoneFault: adb refused the reverse tunnel.
    """

    async def forward(device_port: int) -> int:
        host_port = await asyncio.to_thread(
            adb.forward, serial, "tcp:0", f"tcp:{device_port}", timeout_s=FORWARD_TIMEOUT_S)
        log.info("usb_forward_open", serial=serial, device_port=device_port,
                 forward_port=host_port)
        return host_port

    relay = Relay(tracker=tracker, forward=forward)
    loop.run(relay.start(), timeout_s=10)
    try:
        adb.reverse(serial, f"tcp:{device_tracker_port}", f"tcp:{relay.port}",
                    timeout_s=FORWARD_TIMEOUT_S)
    except FarmError:
        loop.run(relay.close(), timeout_s=10)
        raise
    log.info("usb_tunnel_open", serial=serial, relay_port=relay.port,
             device_tracker_port=device_tracker_port)
    return UsbTunnel(serial, relay, device_tracker_port)


def close_usb_tunnel(adb: Adb, loop: LoopThread, tunnel: UsbTunnel) -> None:
    """Stop the relay and remove the host's forwards; never raises.

    The reverse tunnel lives on the phone and dies with its adb transport, so a
    phone that is gone needs nothing more.
    """
    with contextlib.suppress(Exception):
        loop.run(tunnel.relay.close(), timeout_s=10)
    for host_port in tunnel.forward_ports.values():
        with contextlib.suppress(FarmError):
            adb.forward_remove(tunnel.serial, f"tcp:{host_port}", timeout_s=5)
