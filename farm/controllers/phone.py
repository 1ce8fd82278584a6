"""What farmd keeps in memory about one device between sweeps.

Everything durable (state, health, facts, samples, events, the recovery
history) is in the database; this is what a restart rebuilds anyway: the
tunnels (they die with farmd), how the app is configured, and the crash count
logcat showed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from farm.provision.launch import Method
from farm.provision.tunnels import UsbTunnel


@dataclass
class PhoneRuntime:
    """One phone's in-memory state.

    Attributes:
        serial: the adb serial.
        key: the tracker key its RPC server registers under (its controller's
            :meth:`~farm.controllers.base.DeviceController.tracker_key`).
        kind: its device kind (:mod:`farm.controllers`).
        transport_state: the state its controller's last discovery reported
            (kinds other than phones, whose adb tracker reports changes itself).
        method: how its app is configured (run-as, root, ui), once known.
        tunnel: its usb-only tunnels, while open.
        crashes_seen: ``FATAL EXCEPTION`` entries of the app already counted
            (None until the first sweep reads logcat).
        blocked: why provisioning cannot succeed until a person acts (a corrupt
            APK, a signature clash); the ladder leaves such a phone alone.
        busy_task: a provisioning or recovery task is running for it.
        after_task: a task to run on the same thread once the running one ends
            (a relaunch for a new tracker that found the phone busy with one).
        probing: a session probe is running for it (one at a time).
    """

    serial: str
    key: str
    kind: str = "android"
    transport_state: str | None = None
    method: Method | None = None
    tunnel: UsbTunnel | None = None
    crashes_seen: int | None = None
    blocked: str | None = None
    busy_task: bool = False
    after_task: Callable[[str], None] | None = None
    probing: bool = False
