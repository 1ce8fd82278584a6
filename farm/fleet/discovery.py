"""Transport events: a device came, left or changed state; discovery of the untracked kinds.

A tracked kind's devices (phones: adb's device tracker) arrive as events; every
other kind is asked by each sweep (:meth:`Discovery.discover`). Each event
adopts the device for this host unless a live host runs it, moves it as
:func:`farm.fleet.lifecycle.on_adb_state` says, starts provisioning of a device
that came up and drops farmd's links (:class:`~farm.controllers.capabilities.Detachable`)
to one that left.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import structlog

from farm.controllers.capabilities import Detachable, TrackedKind
from farm.errors import FarmError
from farm.fleet import lifecycle
from farm.fleet.lifecycle import Move
from farm.fleet.ports import DeviceBook
from farm.queue.models import DeviceState

if TYPE_CHECKING:
    from farm.controllers.base import DeviceController
    from farm.queue.records import DeviceRecord

__all__ = ["DiscoveredFleet", "Discovery"]

log = structlog.get_logger(__name__)


class DiscoveredFleet(DeviceBook, Protocol):
    """What discovery reads and asks of the fleet beyond its bookkeeping."""

    controllers: dict[str, DeviceController]

    def own_devices(self) -> list[DeviceRecord]:
        """The devices this host runs."""
        ...

    def submit(self, serial: str, task: Callable[[str], None]) -> bool:
        """Run ``task(serial)`` on its own thread unless a slow task runs for the device."""
        ...


class Discovery:
    """Applies transport events to the fleet's devices.

    Args:
        fleet: the fleet's bookkeeping.
        provision: provisions a device that came up (run on its task thread).
        left: called with the serial of a device that went offline (ends its app watch).
        own_key: the key a device serves when no hold asks for another.
    """

    def __init__(self, fleet: DiscoveredFleet, provision: Callable[[str], None],
                 left: Callable[[str], None], own_key: Callable[[str], str]) -> None:
        self.m = fleet
        self._provision = provision
        self._left = left
        self._own_key = own_key

    def on_device_state(self, serial: str, state_seen: str, kind: str) -> None:
        """A device's transport state changed (``device``, ``offline``, ``absent``...).

        The device becomes this host's (a new one starts discovered) unless a
        live host runs it: then this host leaves it alone (:mod:`farm.queue.hosts`).

        Args:
            serial: the device.
            state_seen: its transport state in adb's words
                (:class:`~farm.controllers.base.Discovered`).
            kind: its device kind, stored with it.
        """
        m, o = self.m, self.m.options
        if m.store.adopt_device(serial, o.host_id, m.clock.now(),
                                dead_after_s=o.dead_after_s) is None:
            log.info("device_owned_elsewhere", serial=serial, state_seen=state_seen)
            return
        m.runtime(serial, kind)
        m.store.upsert_device(serial, m.clock.now(), kind=kind)
        record, move = m.settle(serial, lambda r: lifecycle.on_adb_state(r.state, state_seen))
        if record is None:
            return
        state = move.to_state if move is not None else record.state
        if state is DeviceState.OFFLINE:
            self._left(serial)
            self.detach(serial)
            # It serves nothing now: a job key left here would count it among the
            # servers its job's other devices wait for (Serving.registered).
            m.runtime(serial).key = self._own_key(serial)
        elif state is DeviceState.DISCOVERED and state_seen == lifecycle.ADB_DEVICE:
            m.submit(serial, self._provision)

    def discover(self) -> None:
        """Ask every controller but a tracked kind's (adb's tracker reports phones) what it sees.

        A device whose transport state changed since the last look is handled
        like an adb event; one no longer listed is ``absent``. A controller
        whose discovery fails is logged and asked again next sweep.
        """
        for kind, controller in self.m.controllers.items():
            if isinstance(controller, TrackedKind):
                continue
            try:
                seen = {d.serial: d.state for d in controller.discover()}
            except FarmError as exc:
                log.warning("discovery_failed", kind=kind, reason=str(exc))
                continue
            known = [d.serial for d in self.m.store.list_devices() if d.kind == kind]
            for serial in [*seen, *(s for s in known if s not in seen)]:
                state_seen = seen.get(serial, "absent")
                phone = self.m.runtime(serial, kind)
                if phone.transport_state != state_seen:
                    phone.transport_state = state_seen
                    self.on_device_state(serial, state_seen, kind)

    def forget_connections(self, reason: str) -> None:
        """Mark every phone of this host offline, keeping quarantine.

        At farmd start nothing of an earlier run (tunnels, relays, app launched
        toward an old tracker) can be trusted. The device tracker then
        rediscovers each phone. Other hosts' phones are theirs to judge.
        """
        def decide(record: DeviceRecord) -> Move | None:
            if record.state in (DeviceState.QUARANTINED, DeviceState.OFFLINE):
                return None
            return Move(DeviceState.OFFLINE, reason)

        for device in self.m.own_devices():
            self.m.settle(device.serial, decide)

    def detach(self, serial: str) -> None:
        """Drop farmd's own links to the device (a phone's tunnels), if its kind has any."""
        controller = self.m.controllers.get(self.m.runtime(serial).kind)
        if isinstance(controller, Detachable):
            controller.detach(serial)
