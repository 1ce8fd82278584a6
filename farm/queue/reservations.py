"""The reservation half of :class:`farm.queue.store.Store`: a person's hold on a device.

A reservation takes one device out of scheduling for one owner until it
expires; the owner reaches the phone through the tracker under the phone's own
key (:func:`farm.tvm.keys.phone_key`) with ``connect_tracker(host,
port).request(key)``. Its life::

    reserve ──> active (ended_at NULL, expires_at > now) ──unreserve──> ended ("unreserved")
                                                  └──expire_reservations──> ended ("expired")

The partial unique index ``ux_reservations_active_serial`` (``ended_at IS
NULL``) refuses a second open reservation of one device whatever two racing
writers read; a claim refuses a device with an active one
(:func:`farm.queue.lifecycle.claim_one`), and an open reservation whose
``expires_at`` has passed counts as free everywhere, before farmd's expiry job
ends it.

Reserving a busy phone is allowed: its running attempt finishes, and then it
takes no further job (the owner's ``request(key)`` waits in the tracker's
queue until farm's session ends). :meth:`ReservationOps.reserve_matching` picks
only idle phones. Reserving again as the same owner moves the end time (to
extend or shorten it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from farm.config import TrackerSettings
from farm.errors import ReservationError
from farm.queue import transitions
from farm.queue.models import Device, DeviceEvent, DeviceState, Host, Reservation
from farm.queue.ops import TransactionOps
from farm.queue.scheduler import DeviceView, matches
from farm.queue.spec import DeviceSelection
from farm.queue.waiting import selection_words, utc_text
from farm.tvm.keys import phone_key

__all__ = ["ReservationOps", "ReservationView", "active_reservations"]

UNRESERVED = "unreserved"
EXPIRED = "expired"


def _default_key_prefix() -> str:
    """The config's tracker key prefix (``tracker.key``) for callers that pass none."""
    return TrackerSettings().key


@dataclass(frozen=True)
class ReservationView:
    """One reservation, with where its owner reaches the phone.

    Attributes:
        id: the reservation's id.
        serial: the reserved device.
        owner: who holds it (login name or API token owner).
        created_at: when it was made (aware UTC).
        expires_at: when it ends by itself (aware UTC).
        ended_at: when it ended (None: open).
        end_reason: ``unreserved``, ``expired`` or an operator's reason; None while open.
        tracker_host: the tracker of the device's host as users reach it (the
            ``hosts`` row); None when that row is missing (callers fill in from
            ``tracker.host``/``tracker.port``).
        tracker_port: as ``tracker_host``.
        tracker_key: the key only this phone serves (``<tracker.key>-<serial>``).
    """

    id: int
    serial: str
    owner: str
    created_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str | None
    tracker_host: str | None
    tracker_port: int | None
    tracker_key: str

    def active(self, now: datetime) -> bool:
        """Whether it keeps jobs off the device at ``now``."""
        return self.ended_at is None and self.expires_at > now

    def describe(self) -> str:
        """``reserved by alice until 2026-11-24T07:00Z``: a wait reason and a device column."""
        return f"reserved by {self.owner} until {utc_text(self.expires_at)}"


def _views(session: Session, query: Select[Reservation], key_prefix: str
           ) -> list[ReservationView]:
    rows = session.execute(
        query.add_columns(Host.tracker_host, Host.tracker_port)
        .join(Device, Device.serial == Reservation.serial)
        .outerjoin(Host, Host.host_id == Device.host)
    ).all()
    return [
        ReservationView(
            r.id, r.serial, r.owner, r.created_at, r.expires_at, r.ended_at, r.end_reason,
            host, port, phone_key(key_prefix, r.serial),
        )
        for r, host, port in rows
    ]


def _view(session: Session, reservation: Reservation, key_prefix: str) -> ReservationView:
    session.flush()
    return _views(session, select(Reservation).where(Reservation.id == reservation.id),
                  key_prefix)[0]


def _open(session: Session, serial: str) -> Reservation | None:
    """The device's open reservation (``ended_at`` NULL), locked; None if none."""
    return session.scalars(
        select(Reservation)
        .where(Reservation.serial == serial, Reservation.ended_at.is_(None))
        .with_for_update()
    ).one_or_none()


def _end(session: Session, reservation: Reservation, reason: str, now: datetime) -> None:
    """End an open reservation and write the device's event row."""
    reservation.ended_at = now
    reservation.end_reason = reason
    device = session.get(Device, reservation.serial)
    state = device.state.value if device is not None else DeviceState.OFFLINE.value
    session.add(DeviceEvent(
        serial=reservation.serial, at=now, from_state=state, to_state=state,
        reason=f"reservation of {reservation.owner} ended: {reason}",
    ))
    transitions.note(session, "reservation_ended", serial=reservation.serial,
                     owner=reservation.owner, reason=reason)


def active_reservations(session: Session) -> dict[str, tuple[str, datetime]]:
    """Open reservations by serial: (owner, expires_at); the scheduler compares with its now."""
    rows = session.execute(
        select(Reservation.serial, Reservation.owner, Reservation.expires_at)
        .where(Reservation.ended_at.is_(None))
    )
    return {serial: (owner, expires_at) for serial, owner, expires_at in rows}


class ReservationOps(TransactionOps):
    """Reservation operations; mixed into Store, which provides ``_tx()``.

    ``key_prefix`` is the config's ``tracker.key`` (the prefix of phone keys);
    callers holding settings pass it, others get the config's default.
    """

    def reserve(
        self, serial: str, owner: str, until: datetime, now: datetime, *,
        key_prefix: str | None = None,
    ) -> ReservationView:
        """Reserve one device for ``owner`` until ``until``.

        Reserving a device ``owner`` already holds moves its end time. A busy
        device may be reserved: it finishes its attempt and takes no more.

        Args:
            serial: the device.
            owner: who reserves it.
            until: when it ends by itself (aware UTC, after ``now``).
            now: the time of the reservation.
            key_prefix: ``tracker.key``; None: the config's default.

        Returns:
            The open reservation.

        Raises:
            ReservationError: the serial is unknown, ``until`` is not after
                ``now``, or another owner holds the device.
            StoreError: the database refused the write.
        """
        prefix = key_prefix or _default_key_prefix()
        if until <= now:
            raise ReservationError(serial, "the reservation must end after it starts")
        with self._tx() as session:
            device = session.scalars(
                select(Device).where(Device.serial == serial).with_for_update()
            ).one_or_none()
            if device is None:
                raise ReservationError(serial, "unknown serial")
            return _view(session, _take(session, device, owner, until, now), prefix)

    def reserve_matching(
        self, selection: DeviceSelection, owner: str, until: datetime, now: datetime, *,
        key_prefix: str | None = None,
    ) -> ReservationView:
        """Reserve one free device matching ``selection`` for ``owner`` until ``until``.

        Free: ``ready`` (idle), not drained, not held outside farm, not
        reserved. Devices locked by another transaction (a claim) are skipped.
        ``selection.count`` is ignored: one device is reserved.

        Raises:
            ReservationError: no free device matches (the message names the
                selection), or ``until`` is not after ``now``.
            StoreError: the database refused the write.
        """
        prefix = key_prefix or _default_key_prefix()
        if until <= now:
            raise ReservationError(None, "the reservation must end after it starts")
        with self._tx() as session:
            taken = active_reservations(session)
            candidates = session.scalars(
                select(Device)
                .where(Device.state == DeviceState.READY, Device.drained.is_(False),
                       Device.held_outside.is_(None))
                .order_by(Device.serial)
                .with_for_update(skip_locked=True)
            )
            for device in candidates:
                view = DeviceView(device.serial, device.state, device.drained,
                                  dict(device.facts or {}))
                held = taken.get(device.serial)
                if (held is not None and held[1] > now) or not matches(selection, view):
                    continue
                try:
                    with session.begin_nested():
                        reservation = _take(session, device, owner, until, now)
                except ReservationError:
                    continue  # reserved by another owner since the read above
                return _view(session, reservation, prefix)
            words = ", ".join(selection_words(selection)) or "any device"
            raise ReservationError(None, f"no free device matches {words}")

    def unreserve(
        self, serial: str, owner: str | None, now: datetime, reason: str = UNRESERVED, *,
        key_prefix: str | None = None,
    ) -> ReservationView:
        """End the open reservation of ``serial``.

        Args:
            serial: the device.
            owner: who asks; None: an operator, who may end anyone's.
            now: when it ends.
            reason: stored as ``end_reason``.
            key_prefix: ``tracker.key``; None: the config's default.

        Returns:
            The ended reservation.

        Raises:
            ReservationError: the device is not reserved (or its reservation
                expired), or another owner holds it.
            StoreError: the database refused the write.
        """
        prefix = key_prefix or _default_key_prefix()
        with self._tx() as session:
            reservation = _open(session, serial)
            if reservation is None or reservation.expires_at <= now:
                raise ReservationError(serial, "not reserved")
            if owner is not None and reservation.owner != owner:
                raise ReservationError(serial, f"reserved by another owner ({reservation.owner})")
            _end(session, reservation, reason, now)
            return _view(session, reservation, prefix)

    def reservations(
        self, *, active: bool = True, now: datetime | None = None, key_prefix: str | None = None
    ) -> list[ReservationView]:
        """Reservations by serial then id.

        Args:
            active: only open ones (``ended_at`` NULL); False: every one ever made.
            now: with ``active``, also leave out those expired at ``now`` but
                not yet ended by :meth:`expire_reservations`.
            key_prefix: ``tracker.key``; None: the config's default.
        """
        query = select(Reservation).order_by(Reservation.serial, Reservation.id)
        if active:
            query = query.where(Reservation.ended_at.is_(None))
            if now is not None:
                query = query.where(Reservation.expires_at > now)
        with self._tx() as session:
            return _views(session, query, key_prefix or _default_key_prefix())

    def expire_reservations(
        self, now: datetime, *, key_prefix: str | None = None
    ) -> list[ReservationView]:
        """End the open reservations whose ``expires_at`` is at or before ``now``.

        farmd calls this periodically; until it does, claims already treat
        those devices as free.

        Returns:
            The reservations ended now (``end_reason`` ``expired``).
        """
        with self._tx() as session:
            due = list(session.scalars(
                select(Reservation)
                .where(Reservation.ended_at.is_(None), Reservation.expires_at <= now)
                .order_by(Reservation.id)
                .with_for_update(skip_locked=True)
            ))
            for reservation in due:
                _end(session, reservation, EXPIRED, now)
            prefix = key_prefix or _default_key_prefix()
            return [_view(session, r, prefix) for r in due]


def _take(
    session: Session, device: Device, owner: str, until: datetime, now: datetime
) -> Reservation:
    """Open (or, for its owner, move) the reservation of a locked device row.

    Raises:
        ReservationError: another owner holds it.
    """
    serial = device.serial
    current = _open(session, serial)
    if current is not None and current.expires_at <= now:
        _end(session, current, EXPIRED, now)
        current = None
    if current is not None:
        if current.owner != owner:
            raise ReservationError(
                serial, f"reserved by {current.owner} until {utc_text(current.expires_at)}"
            )
        current.expires_at = until
        transitions.note(session, "reservation_moved", serial=serial, owner=owner,
                         expires_at=until.isoformat())
        return current
    reservation = Reservation(serial=serial, owner=owner, created_at=now, expires_at=until)
    try:
        with session.begin_nested():
            session.add(reservation)
            session.flush()
    except IntegrityError as exc:  # a racing reserve opened one since our read
        raise ReservationError(serial, "already reserved") from exc
    state = device.state.value
    session.add(DeviceEvent(serial=serial, at=now, from_state=state, to_state=state,
                            reason=f"reserved by {owner} until {utc_text(until)}"))
    transitions.note(session, "reservation_opened", serial=serial, owner=owner,
                     expires_at=until.isoformat(), device_state=state)
    return reservation

