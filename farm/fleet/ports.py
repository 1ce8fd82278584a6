"""The narrow face the fleet's parts are handed instead of the manager.

Each part (the app watch, the prober, the recoverer, serving, provisioning, discovery, the
sweep) declares the few members it uses as a :class:`~typing.Protocol` that
extends :class:`DeviceBook`, the bookkeeping they all share; the
:class:`~farm.fleet.manager.FleetManager` satisfies each of them. So no part
imports the manager, and a test can hand a part a small stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from farm.clock import Clock
    from farm.controllers.base import DeviceController
    from farm.controllers.options import FleetOptions
    from farm.controllers.phone import PhoneRuntime
    from farm.fleet.lifecycle import Move
    from farm.queue.records import DeviceRecord
    from farm.queue.store import Store
    from farm.supervise.ladder import Event

__all__ = ["Decide", "DeviceBook"]

#: A decision on one device's stored record: the move to make, or None.
Decide = Callable[["DeviceRecord"], "Move | None"]


class DeviceBook(Protocol):
    """The fleet's bookkeeping of its devices: options, store, clock, state writes, history."""

    options: FleetOptions
    store: Store
    clock: Clock

    def runtime(self, serial: str, kind: str | None = None) -> PhoneRuntime:
        """The device's in-memory state, created on first use."""
        ...

    def controller(self, serial: str) -> DeviceController:
        """The controller of the device's kind.

        Raises:
            PhoneFault: this farmd has no controller for the device's kind.
        """
        ...

    def settle(self, serial: str, decide: Decide) -> tuple[DeviceRecord | None, Move | None]:
        """Apply ``decide(record)`` as a compare-and-set; returns the record read and the move."""
        ...

    def history(self, serial: str) -> list[Event]:
        """The device's recovery history, oldest first."""
        ...

    def record(self, serial: str, event: Event) -> None:
        """Append a recovery event to the device's durable history."""
        ...
