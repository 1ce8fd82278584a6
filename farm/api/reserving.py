"""Reservations as a caller sees them: a person's hold on a phone, with rights.

The half of :class:`farm.api.service.FarmService` that takes a phone out of
scheduling for a person (:mod:`farm.queue.reservations`).

Rights: any token reserves for its own owner; a reservation is ended by its
owner or an operator (another owner's: :class:`~farm.api.errors.Forbidden`,
403). The local CLI (no caller) reserves for the owner it names and may end
any reservation, as an operator.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from farm.api.errors import Forbidden, NotFound
from farm.clock import Clock
from farm.config import Settings
from farm.errors import UserFault
from farm.queue.reservations import ReservationView
from farm.queue.spec import DeviceSelection
from farm.queue.store import Store
from farm.queue.tokens import Caller

__all__ = ["ReservationMethods"]


class ReservationMethods:
    """The reservation methods of :class:`~farm.api.interface.Queue`, mixed into FarmService.

    FarmService sets these attributes.
    """

    store: Store
    settings: Settings
    clock: Clock
    caller: Caller | None

    def _where(self, view: ReservationView) -> ReservationView:
        """Fill in this host's tracker where the device's host row gave none."""
        if view.tracker_host is not None:
            return view
        tracker = self.settings.tracker
        return dataclasses.replace(view, tracker_host=tracker.advertised_host,
                                   tracker_port=tracker.port)

    def reserve(self, serial: str | None, for_s: float, *,
                selection: DeviceSelection | None = None,
                owner: str | None = None) -> ReservationView:
        """Reserve a phone in the store (:mod:`farm.queue.reservations`)."""
        limit_s = self.settings.reservations.max_for_s
        if not 0 < for_s <= limit_s:
            raise UserFault(f"a reservation lasts more than 0 and at most {limit_s:g} s "
                            f"(reservations.max_for_s), not {for_s:g} s")
        who = self.caller.owner if self.caller is not None else owner
        if not who:
            raise UserFault("a reservation needs an owner: pass --owner NAME")
        now = self.clock.now()
        until = now + timedelta(seconds=for_s)
        prefix = self.settings.tracker.key
        if serial is not None:
            return self._where(self.store.reserve(serial, who, until, now, key_prefix=prefix))
        if selection is None:
            raise UserFault("reserve needs a serial or a selection (--abi, --soc, --gpu...)")
        return self._where(self.store.reserve_matching(selection, who, until, now,
                                                       key_prefix=prefix))

    def unreserve(self, serial: str, *, owner: str | None = None) -> ReservationView:
        """End a reservation in the store (its owner or an operator)."""
        now = self.clock.now()
        if self.caller is not None:
            current = next((r for r in self.reservations() if r.serial == serial), None)
            if current is None:
                raise NotFound(f"{serial}: not reserved")
            if not self.caller.operator and current.owner != self.caller.owner:
                raise Forbidden(f"{serial} is reserved by {current.owner}: only its owner "
                                "or an operator may end it")
            owner = None if self.caller.operator else self.caller.owner
        if self.caller is not None:
            reason = f"unreserved by {self.caller.owner}"
        else:
            reason = "unreserved" if owner is not None else "unreserved by operator"
        return self._where(self.store.unreserve(serial, owner, now, reason,
                                                key_prefix=self.settings.tracker.key))

    def reservations(self, *, ended_too: bool = False) -> list[ReservationView]:
        """Reservations, from the store."""
        views = self.store.reservations(active=not ended_too,
                                        now=None if ended_too else self.clock.now(),
                                        key_prefix=self.settings.tracker.key)
        return [self._where(v) for v in views]
