"""adb tunnels for phones that reach the host only over USB.

Office networks often block the tracker port, and the stock app reports the
address the tracker sees, so usb-only phones work like this (see
:mod:`farm.tvm.relay` for the whole mechanism)::

    adb forward tcp:F tcp:5001                  host F  -> phone's RPC port
    Relay(tracker, advertise=127.0.0.1:F)       rewrites the phone's registration
    adb reverse tcp:9190 tcp:<relay port>       phone's 127.0.0.1:9190 -> relay

The app is then pointed at ``127.0.0.1:9190`` on the phone. The forward is
made first, because the relay must know what to advertise.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import structlog

from farm.adb import Adb
from farm.aio import LoopThread
from farm.errors import FarmError
from farm.tvm.relay import Relay

log = structlog.get_logger(__name__)

RPC_DEVICE_PORT = 5001  # the stock app binds the first free port from 5001


@dataclass
class UsbTunnel:
    """The tunnels of one usb-only phone.

    Attributes:
        forward_port: host port of ``adb forward`` to the app's RPC port.
        relay: the phone's tracker relay.
        device_tracker_port: the port the app connects to on the phone.
    """

    serial: str
    forward_port: int
    relay: Relay
    device_tracker_port: int


def open_usb_tunnel(
    adb: Adb, loop: LoopThread, serial: str, tracker: tuple[str, int],
    device_tracker_port: int,
) -> UsbTunnel:
    """Make the forward, start the relay, make the reverse.

    Raises:
        PhoneFault: adb refused a tunnel.
    """
    forward_port = adb.forward(serial, "tcp:0", f"tcp:{RPC_DEVICE_PORT}", timeout_s=15)
    relay = Relay(tracker=tracker, advertise=("127.0.0.1", forward_port))
    loop.run(relay.start(), timeout_s=10)
    try:
        adb.reverse(serial, f"tcp:{device_tracker_port}", f"tcp:{relay.port}", timeout_s=15)
    except FarmError:
        loop.run(relay.close(), timeout_s=10)
        raise
    log.info("usb_tunnel_open", serial=serial, forward_port=forward_port, relay_port=relay.port,
             device_tracker_port=device_tracker_port)
    return UsbTunnel(serial, forward_port, relay, device_tracker_port)


def close_usb_tunnel(adb: Adb, loop: LoopThread, tunnel: UsbTunnel) -> None:
    """Stop the relay and remove the host's forward; never raises.

    The reverse tunnel lives on the phone and dies with its adb transport, so a
    phone that is gone needs nothing more.
    """
    with contextlib.suppress(Exception):
        loop.run(tunnel.relay.close(), timeout_s=10)
    with contextlib.suppress(FarmError):
        adb.forward_remove(tunnel.serial, f"tcp:{tunnel.forward_port}", timeout_s=5)
