"""Idempotent device transitions, applied inside a caller's transaction.

Each returns the names of the fields it changed, ``[]`` when the device was
already there (LAVA's ``go_state_*`` do the same), and writes a
:class:`~farm.queue.models.DeviceEvent` with the reason for every real change,
e.g. ``ready -> cooling (max_zone_temp_c 72.4 > 70)``.

Log lines are not written here but noted on the session (:func:`note`); the
store writes them after the transaction commits, so a rolled-back change is
never reported as done (rq fires its callbacks only after the failure is
persisted for the same reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from farm.queue.models import (
    Attempt,
    Device,
    DeviceEvent,
    DeviceHealth,
    DeviceState,
    PhoneHold,
)

__all__ = [
    "get_or_create",
    "hold",
    "note",
    "noted",
    "release",
    "set_drained",
    "set_health",
    "set_state",
    "start_holding",
]

_NOTES = "farm_log_notes"


def note(session: Session, event: str, **fields: object) -> None:
    """Remember a log event to write once ``session``'s transaction commits."""
    session.info.setdefault(_NOTES, []).append((event, fields))


def noted(session: Session) -> list[tuple[str, dict[str, object]]]:
    """Take the events noted on ``session`` (each is returned once)."""
    notes: list[tuple[str, dict[str, object]]] = session.info.pop(_NOTES, [])
    return notes


def get_or_create(session: Session, serial: str, now: datetime) -> Device:
    """The device row, locked for update; a new ``discovered`` one if unknown."""
    device = session.scalars(
        select(Device).where(Device.serial == serial).with_for_update()
    ).one_or_none()
    if device is None:
        device = Device(
            serial=serial,
            state=DeviceState.DISCOVERED,
            health=DeviceHealth.UNKNOWN,
            facts={},
            drained=False,
            last_seen=now,
            state_changed_at=now,
        )
        session.add(device)
        session.add(
            DeviceEvent(
                serial=serial,
                at=now,
                from_state=None,
                to_state=DeviceState.DISCOVERED.value,
                reason="first seen",
            )
        )
        session.flush()
    return device


def set_state(
    session: Session, device: Device, to_state: DeviceState, reason: str, now: datetime
) -> list[str]:
    """Move a device to ``to_state``; ``[]`` if it is there already."""
    if device.state is to_state:
        return []
    session.add(
        DeviceEvent(
            serial=device.serial,
            at=now,
            from_state=device.state.value,
            to_state=to_state.value,
            reason=reason,
        )
    )
    note(
        session,
        "device_transition",
        serial=device.serial,
        from_state=device.state.value,
        to_state=to_state.value,
        reason=reason,
    )
    device.state = to_state
    device.state_changed_at = now
    changed = ["state", "state_changed_at"]
    if to_state is not DeviceState.BUSY and device.attempt_id is not None:
        device.attempt_id = None
        changed.append("attempt_id")
    if to_state is not DeviceState.BUSY and device.serve_key is not None:
        device.serve_key = None  # the hold ended: the device serves its own key again
        changed.append("serve_key")
    return changed


def set_health(
    session: Session, device: Device, health: DeviceHealth, reason: str, now: datetime
) -> list[str]:
    """Set a device's health and its reason; the event row names the health change.

    A new reason for the same health (``bad`` for another cause) is stored
    without an event row: the health did not change. ``[]`` if both are as given.
    """
    if device.health is health:
        if device.health_reason == reason:
            return []
        device.health_reason = reason
        return ["health_reason"]
    session.add(
        DeviceEvent(
            serial=device.serial,
            at=now,
            from_state=device.state.value,
            to_state=device.state.value,
            reason=f"health {device.health.value} -> {health.value} ({reason})",
        )
    )
    note(
        session,
        "device_health_changed",
        serial=device.serial,
        from_health=device.health.value,
        to_health=health.value,
        reason=reason,
    )
    device.health = health
    device.health_reason = reason
    return ["health", "health_reason"]


def set_drained(
    session: Session, device: Device, drained: bool, reason: str, now: datetime
) -> list[str]:
    """Drain a device (it finishes its attempt, then takes no work) or undrain it."""
    if device.drained is drained:
        return []
    word = "drained" if drained else "undrained"
    session.add(
        DeviceEvent(
            serial=device.serial,
            at=now,
            from_state=device.state.value,
            to_state=device.state.value,
            reason=f"{word} ({reason})",
        )
    )
    note(session, f"device_{word}", serial=device.serial, reason=reason)
    device.drained = drained
    return ["drained"]


def hold(session: Session, attempt_id: int, serials: Iterable[str], now: datetime) -> None:
    """Write a :class:`PhoneHold` per phone for ``attempt_id`` and flush them.

    Raises:
        sqlalchemy.exc.IntegrityError: a phone is held already (by another
            attempt, whatever its state says); the caller rolls back its savepoint.
    """
    session.add_all(PhoneHold(serial=s, attempt_id=attempt_id, at=now) for s in serials)
    session.flush()


def start_holding(session: Session, attempt: Attempt, devices: Sequence[Device],
                  what: str, now: datetime) -> bool:
    """Add a new running ``attempt`` holding ``devices``: their holds, busy, theirs.

    The attempt and its holds are written under a savepoint: a phone still
    held by another attempt makes the hold's primary key refuse, and only
    this attempt is rolled back (noted ``claim_refused``).

    Args:
        session: the open transaction.
        attempt: the new attempt row (its ``serials`` are ``devices``').
        devices: the phones, locked by the caller.
        what: each phone's busy transition reason but the attempt's id, e.g.
            ``"job 3 attempt"`` (the reason then reads ``"job 3 attempt 7"``).
        now: the time.

    Returns:
        False (nothing written) when a phone is held already.
    """
    serials = [d.serial for d in devices]
    try:
        with session.begin_nested():
            session.add(attempt)
            session.flush()
            hold(session, attempt.id, serials, now)
    except IntegrityError:
        note(session, "claim_refused", job_id=attempt.job_id, serials=serials,
             reason="a phone is still held by another attempt")
        return False
    for device in devices:
        set_state(session, device, DeviceState.BUSY, f"{what} {attempt.id}", now)
        device.attempt_id = attempt.id
    session.flush()
    return True


def release(
    session: Session,
    attempt_id: int,
    serials: Iterable[str],
    to_state: DeviceState,
    reason: str,
    now: datetime,
) -> list[str]:
    """Free the phones of ``attempt_id``: delete their holds; move the still busy ones.

    A phone that meanwhile went elsewhere (unplugged: ``offline``) keeps its
    state but loses its hold all the same: the attempt no longer runs on it.

    Returns:
        The serials moved to ``to_state``.
    """
    serials = list(serials)
    moved = []
    rows = session.scalars(
        select(Device)
        .where(Device.serial.in_(serials))
        .order_by(Device.serial)
        .with_for_update()
    )
    for device in rows:
        if device.state is DeviceState.BUSY and device.attempt_id == attempt_id:
            set_state(session, device, to_state, reason, now)
            moved.append(device.serial)
    session.execute(
        delete(PhoneHold).where(PhoneHold.attempt_id == attempt_id, PhoneHold.serial.in_(serials))
    )
    return moved
