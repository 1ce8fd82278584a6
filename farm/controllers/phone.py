"""What farmd keeps in memory about one device between sweeps.

Everything durable (state, health, facts, samples, events, the recovery
history) is in the database; this is what a restart rebuilds anyway: the
tunnels (they die with farmd), how the app is configured, and the crash count
logcat showed.
"""

from __future__ import annotations

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
        probing: a session probe is running for it (one at a time).
        served_generation: the generation of farmd's tracker
            (:attr:`farm.fleet.manager.FleetManager.tracker_generation`) its
            server was last started toward; an older one means a tracker that
            died since, and the fleet serves it again (:mod:`farm.fleet.serving`).
        registered_generation: the tracker generation its server last registered with.
        moving_key: a serve task is moving its server to ``key`` now
            (:meth:`farm.fleet.serving.Serving.serve`).
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
    probing: bool = False
    served_generation: int = 0
    registered_generation: int = 0
    moving_key: bool = False
