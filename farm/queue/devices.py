"""The devices of :class:`farm.queue.store.Store`: states, health, drain, serving keys, events.

Written by the fleet, health and supervise layers; read by the scheduler and
``farmctl devices``. Every change is idempotent and leaves an event row.
The health probes' samples are :mod:`farm.queue.health_samples`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, or_, select

from farm.queue import transitions
from farm.queue.models import (
    Device,
    DeviceEvent,
    DeviceHealth,
    DeviceState,
    HealthSample,
)
from farm.queue.ops import TransactionOps
from farm.queue.records import DeviceRecord, EventRecord

__all__ = ["DeviceOps", "of_host"]


def of_host(host: str) -> ColumnElement[bool]:
    """The devices ``host`` runs: its own, and those no host owns yet.

    A device with no host is a row from before several hosts shared the
    database (or one written by a tool): every host may look at it until one
    adopts it (:meth:`farm.queue.hosts.HostOps.adopt_device`).
    """
    return or_(Device.host == host, Device.host.is_(None))


def _with_latest_sample() -> Select[Device, HealthSample | None]:
    """Devices outer-joined to their latest health sample (by ``at``, then id)."""
    latest = (
        select(HealthSample.id)
        .where(HealthSample.serial == Device.serial)
        .order_by(HealthSample.at.desc(), HealthSample.id.desc())
        .limit(1)
        .correlate(Device)
        .scalar_subquery()
    )
    return select(Device, HealthSample).outerjoin(HealthSample, HealthSample.id == latest)


class DeviceOps(TransactionOps):
    """Device operations; mixed into Store, which provides ``_tx()``."""

    def upsert_device(
        self, serial: str, now: datetime, facts: Mapping[str, Any] | None = None,
        *, kind: str | None = None,
    ) -> DeviceRecord:
        """Note that a phone was seen (a new one starts ``discovered``), updating its facts.

        Args:
            serial: the adb serial.
            now: when it was seen.
            facts: replaces the stored facts if given; keys the scheduler matches:
                ``abi``, ``abis``, ``soc``, ``sdk`` (int), ``gpu``.
            kind: sets the device kind (:mod:`farm.controllers`) if given; a
                new device is ``android`` otherwise.
        """
        with self._tx() as session:
            device = transitions.get_or_create(session, serial, now)
            device.last_seen = now
            if kind is not None:
                device.kind = kind
            if facts is not None:
                device.facts = dict(facts)
            session.flush()
            return DeviceRecord.of(device)

    def move_device(
        self,
        serial: str,
        to_state: DeviceState,
        reason: str,
        now: datetime,
        *,
        expect_state: DeviceState,
        expect_attempt: int | None = None,
    ) -> bool:
        """Compare-and-set a phone's state: move it only if it is as the caller read it.

        The row is locked, and moved only while its state is ``expect_state``
        and its ``attempt_id`` is ``expect_attempt``; otherwise someone (a
        claim, a release, another sweep) moved it since the caller's read, and
        nothing is written: the caller re-reads and judges again. This is the
        only way the fleet writes a phone's state (``transitions.release`` is
        the same rule for the queue).

        Args:
            serial: the phone.
            to_state: where it goes.
            reason: the event row's reason.
            now: when.
            expect_state: the state the caller read.
            expect_attempt: the attempt id the caller read (None: not busy).

        Moving a busy phone elsewhere (unplugged: ``offline``) keeps its
        attempt's hold: no other attempt can claim it until that attempt ends.

        Returns:
            True if the phone was as expected (it is now in ``to_state``);
            False if it was not, or is unknown: nothing changed.

        Raises:
            ValueError: ``to_state`` is ``busy``: only a claim makes a phone busy,
                with the hold that goes with it (a bug in the caller).
        """
        to_state, expect_state = DeviceState(to_state), DeviceState(expect_state)
        if to_state is DeviceState.BUSY:
            raise ValueError("only a claim makes a phone busy")
        with self._tx() as session:
            device = session.scalars(
                select(Device).where(Device.serial == serial).with_for_update()
            ).one_or_none()
            if device is None:
                return False
            if device.state is not expect_state or device.attempt_id != expect_attempt:
                transitions.note(
                    session, "device_move_lost", serial=serial,
                    expected_state=expect_state.value, expected_attempt=expect_attempt,
                    found_state=device.state.value, found_attempt=device.attempt_id,
                    to_state=to_state.value, reason=reason,
                )
                return False
            transitions.set_state(session, device, to_state, reason, now)
            return True

    def mark_held_outside(
        self,
        serial: str,
        reason: str | None,
        now: datetime,
        *,
        expect_held: str | None,
        expect_attempt: int | None = None,
    ) -> bool:
        """Compare-and-set ``held_outside``: a session farm did not open holds the phone, or not.

        Set only while no farm attempt holds the phone (``attempt_id`` is
        ``expect_attempt``, None: the fleet saw it not busy) and
        ``held_outside`` is still what the caller read: a claim in between
        means the session seen was farm's own, and the caller judges again.
        A claim in turn skips a phone held outside (``lifecycle.claim_one``).
        A change writes an event row (the state is unchanged).

        Args:
            serial: the phone.
            reason: e.g. ``"held outside farm by a session from 127.0.0.1:40112"``;
                None clears it (the session ended).
            now: when.
            expect_held: the ``held_outside`` the caller read.
            expect_attempt: the attempt id the caller read.

        Returns:
            True if the phone now has ``reason`` (set now or already);
            False if it is unknown or not as the caller read it (nothing changed).
        """
        with self._tx() as session:
            device = session.scalars(
                select(Device).where(Device.serial == serial).with_for_update()
            ).one_or_none()
            if device is None:
                return False
            if device.held_outside == reason:
                return True
            if device.held_outside != expect_held or device.attempt_id != expect_attempt:
                transitions.note(
                    session, "held_outside_lost", serial=serial, expected=expect_held,
                    found=device.held_outside, found_attempt=device.attempt_id, reason=reason,
                )
                return False
            device.held_outside = reason
            state = device.state.value
            session.add(DeviceEvent(
                serial=serial, at=now, from_state=state, to_state=state,
                reason=reason or f"no longer {expect_held}",
            ))
            transitions.note(session, "held_outside_changed", serial=serial,
                             held_outside=reason, was=expect_held)
            return True

    def set_serve_key(self, serial: str, key: str | None, now: datetime, *,
                      expect_attempt: int) -> bool:
        """Compare-and-set the key the device must serve (desired state) for its hold.

        Set only while attempt ``expect_attempt`` holds the device (busy with
        that ``attempt_id``): an attempt that lost its phones (released,
        reclaimed) changes nothing. farmd's fleet serves the key
        (:meth:`farm.fleet.manager.FleetManager.reconcile`); the key returns to
        None (the device's own) when the device leaves ``busy``.

        Args:
            serial: the device.
            key: the tracker key, e.g. ``android-job-42``; None: its own key.
            now: when (the event row's time).
            expect_attempt: the attempt that holds the device.

        Returns:
            True if the device is to serve ``key`` now (set now or already).
        """
        with self._tx() as session:
            device = session.scalars(
                select(Device).where(Device.serial == serial).with_for_update()
            ).one_or_none()
            if device is None or device.attempt_id != expect_attempt:
                return False
            if device.state is not DeviceState.BUSY:
                return False
            if device.serve_key == key:
                return True
            state = device.state.value
            session.add(DeviceEvent(
                serial=serial, at=now, from_state=state, to_state=state,
                reason=f"serve {key or 'own key'} (attempt {expect_attempt})",
            ))
            transitions.note(session, "serve_key_changed", serial=serial, serve_key=key,
                             was=device.serve_key, attempt=expect_attempt)
            device.serve_key = key
            return True

    def set_serving_key(self, serial: str, key: str | None) -> None:
        """Record the key farmd (re)started the device's RPC server under (observed state)."""
        with self._tx() as session:
            device = session.get(Device, serial)
            if device is not None and device.serving_key != key:
                device.serving_key = key

    def add_device_event(self, serial: str, reason: str, now: datetime) -> bool:
        """Write an event row that changes nothing, e.g. a recovery step (fleet's history).

        Returns:
            False if no such phone is known (nothing written).
        """
        with self._tx() as session:
            device = session.get(Device, serial)
            if device is None:
                return False
            state = device.state.value
            session.add(DeviceEvent(serial=serial, at=now, from_state=state, to_state=state,
                                    reason=reason))
            return True

    def set_device_health(
        self, serial: str, health: DeviceHealth, reason: str, now: datetime
    ) -> list[str]:
        """Set a phone's health (apart from its state) and why (``health_reason``).

        A change of health writes an event row ``health good -> bad (reason)``;
        a new reason for the same health is stored without one.

        Returns:
            The fields changed (``health``, ``health_reason``); ``[]`` if both were so.
        """
        with self._tx() as session:
            device = transitions.get_or_create(session, serial, now)
            return transitions.set_health(session, device, DeviceHealth(health), reason, now)

    def set_drained(self, serial: str, drained: bool, reason: str, now: datetime) -> list[str]:
        """Drain a phone (it finishes its attempt, then gets no work) or undrain it."""
        with self._tx() as session:
            device = transitions.get_or_create(session, serial, now)
            return transitions.set_drained(session, device, drained, reason, now)

    def release_quarantined(self, serial: str, reason: str, now: datetime) -> DeviceState | None:
        """Move a quarantined phone to ``discovered`` with ``unknown`` health, under one row lock.

        It is then set up and health-checked afresh before it takes work. A
        phone in any other state is left as it is.

        Returns:
            The state the phone was in (``QUARANTINED``: released now), or None
            if no such phone is known.
        """
        with self._tx() as session:
            device = session.scalars(
                select(Device).where(Device.serial == serial).with_for_update()
            ).one_or_none()
            if device is None:
                return None
            was = device.state
            if was is DeviceState.QUARANTINED:
                transitions.set_health(session, device, DeviceHealth.UNKNOWN, reason, now)
                transitions.set_state(session, device, DeviceState.DISCOVERED, reason, now)
            return was

    def get_device(self, serial: str) -> DeviceRecord | None:
        """One phone with its latest health sample, or None if never seen."""
        with self._tx() as session:
            row = session.execute(_with_latest_sample().where(Device.serial == serial)).first()
            return None if row is None else DeviceRecord.of(row[0], row[1])

    def list_devices(self, *, host: str | None = None) -> list[DeviceRecord]:
        """All phones ever seen, by serial, each with its latest health sample.

        One query: the latest sample of each phone is found through the
        ``(serial, at)`` index, so the cost grows with the phones, not the samples.

        Args:
            host: only the devices of this farmd host, and those no host owns
                (:func:`of_host`); None: every host's.
        """
        query = _with_latest_sample().order_by(Device.serial)
        if host is not None:
            query = query.where(of_host(host))
        with self._tx() as session:
            rows = session.execute(query)
            return [DeviceRecord.of(device, sample) for device, sample in rows]

    def device_events(self, serial: str | None = None, limit: int = 100) -> list[EventRecord]:
        """State changes, newest first; one phone's if ``serial`` is given."""
        query = select(DeviceEvent).order_by(DeviceEvent.id.desc()).limit(limit)
        if serial is not None:
            query = query.where(DeviceEvent.serial == serial)
        with self._tx() as session:
            return [EventRecord.of(e) for e in session.scalars(query)]
