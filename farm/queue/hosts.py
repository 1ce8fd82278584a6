"""The host half of :class:`farm.queue.store.Store`: farmd hosts sharing one database.

Each farmd names itself by ``Settings.host_id``. At start it upserts its
``hosts`` row (:meth:`HostOps.register_host`) and stamps it every
``hosts.heartbeat_s`` (:meth:`HostOps.host_heartbeat`); a host whose stamp is
older than ``hosts.dead_after_s`` is dead (:meth:`HostRecord.alive`).

A device belongs to the host whose adb server sees it (``devices.host``)::

    adb server of host A sees serial S ──adopt_device(S, A)──> S owned by A
        new S                           -> created, owned by A
        S owned by A (or by no host)    -> A's (unchanged)
        S owned by B, B alive, S in use -> left to B: A ignores S
        S owned by B, S offline/discovered, or B dead (or gone)
                                        -> taken over by A (an event row says so)

Only the owner sweeps, provisions, forgets and dispatches a device
(``Store.list_devices(host=...)``, ``Store.head(host=...)``). Another host never
moves a dead host's phones offline: they are *shown* as ``unreachable``
(:func:`dead_hosts`), while the global reap requeues their attempts' jobs once
the leases run out.

A device no host owns (a row from a database older than several hosts, or one
written by a tool) counts as every host's: the first adb server that sees it
adopts it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import farm
from farm.errors import StoreError
from farm.queue import transitions
from farm.queue.db import head_revision
from farm.queue.models import Device, DeviceEvent, DeviceState, Host
from farm.queue.ops import TransactionOps
from farm.queue.records import DeviceRecord

__all__ = ["UNREACHABLE", "HostOps", "HostRecord", "dead_hosts", "readings_stale", "shown_state",
           "stale_health_reason"]

#: What ``farmctl devices`` and the metrics show for a device of a dead host.
UNREACHABLE = "unreachable"

#: States of a device that another live host may take over: its adb server
#: no longer sees it (offline), or nobody set it up yet (discovered).
_FREE_TO_TAKE = frozenset({DeviceState.OFFLINE, DeviceState.DISCOVERED})


@dataclass(frozen=True)
class HostRecord:
    """A ``hosts`` row.

    Attributes:
        host_id: the farmd's ``Settings.host_id``.
        started_at: when that farmd last started.
        heartbeat_at: its latest heartbeat.
        tracker_host: its tracker's address as users reach it
            (``tracker.advertise_host``, else ``tracker.host``).
        tracker_port: its tracker's port.
        info: what else the farmd said of itself (``pid``, ``adb_port``...).
        schema_revision: the newest migration its farm knows (None: a farm
            older than revision 0005).
        code_version: its ``farm.__version__`` (None likewise).
    """

    host_id: str
    started_at: datetime
    heartbeat_at: datetime
    tracker_host: str
    tracker_port: int
    info: Mapping[str, Any] = field(default_factory=dict)
    schema_revision: str | None = None
    code_version: str | None = None

    @classmethod
    def of(cls, host: Host) -> HostRecord:
        """Copy a row."""
        return cls(host.host_id, host.started_at, host.heartbeat_at, host.tracker_host,
                   host.tracker_port, dict(host.info or {}), host.schema_revision,
                   host.code_version)

    def alive(self, now: datetime, dead_after_s: float) -> bool:
        """Whether the host heartbeat within ``dead_after_s`` seconds before ``now``."""
        return now - self.heartbeat_at <= timedelta(seconds=dead_after_s)


def dead_hosts(hosts: Iterable[HostRecord], now: datetime, dead_after_s: float) -> frozenset[str]:
    """The ids of the hosts not alive at ``now``: their devices show as ``unreachable``."""
    return frozenset(h.host_id for h in hosts if not h.alive(now, dead_after_s))


def shown_state(device: DeviceRecord, dead: Collection[str]) -> str:
    """The state to show for ``device``: ``unreachable`` if its host is in ``dead``.

    Derived, never stored: the dead host's last word (``ready``, ``busy``...)
    stays in the row, and comes back into view when the host beats again.
    """
    return UNREACHABLE if device.host is not None and device.host in dead else device.state.value


def readings_stale(device: DeviceRecord, dead: Collection[str]) -> bool:
    """Whether ``device``'s health and latest readings are out of date, not current.

    True when it is ``offline`` (gone from adb: nobody probes it) or its host is
    in ``dead`` (nobody that could probe it is alive): its health is then shown
    as ``unknown`` and its battery and thermal readings as stale with their age,
    never as the last "good" and battery % of hours ago (issue 25).
    """
    return device.state is DeviceState.OFFLINE or shown_state(device, dead) == UNREACHABLE


def stale_health_reason(record: DeviceRecord) -> str:
    """Why a stale phone's health is unknown, keeping what was last judged."""
    why = "offline" if record.state is DeviceState.OFFLINE else "its host is unreachable"
    last = record.health.value + (f": {record.health_reason}" if record.health_reason else "")
    return f"not probed: {why}; last {last}"


class HostOps(TransactionOps):
    """Host operations; mixed into Store, which provides ``_tx()``."""

    def register_host(
        self, host_id: str, tracker_host: str, tracker_port: int, now: datetime,
        info: Mapping[str, Any] | None = None,
    ) -> HostRecord:
        """Upsert this farmd's ``hosts`` row: started and heartbeat now, versions recorded.

        The row gets the newest schema revision and the code version this farm
        has, for ``farmctl hosts`` and for migrations older hosts cannot read.

        Args:
            host_id: ``Settings.host_id``.
            tracker_host: the tracker's address as users and other hosts reach it.
            tracker_port: the tracker's port.
            now: the start time.
            info: stored as is (JSON), e.g. ``{"pid": 4242, "adb_port": 5037}``.

        Raises:
            StoreError: the database refused the write, or another farmd
                registered the same ``host_id`` at the same moment.
        """
        try:
            with self._tx() as session:
                host = session.get(Host, host_id, with_for_update=True)
                if host is None:
                    host = Host(host_id=host_id)
                    session.add(host)
                host.started_at = host.heartbeat_at = now
                host.tracker_host, host.tracker_port = tracker_host, tracker_port
                host.info = dict(info or {})
                host.schema_revision, host.code_version = head_revision(), farm.__version__
                session.flush()
                transitions.note(session, "host_registered", host=host_id,
                                 tracker_host=tracker_host, tracker_port=tracker_port)
                return HostRecord.of(host)
        except IntegrityError as exc:  # only a second insert of the same id at once
            raise StoreError(f"host {host_id!r} registered twice at once: do two farmd "
                             "share one host_id?") from exc

    def host_heartbeat(self, host_id: str, now: datetime) -> bool:
        """Stamp the host's ``heartbeat_at`` with ``now``.

        Returns:
            False if the host has no row (someone deleted it): register again.
        """
        with self._tx() as session:
            host = session.get(Host, host_id, with_for_update=True)
            if host is None:
                return False
            host.heartbeat_at = max(host.heartbeat_at, now)
            return True

    def list_hosts(self) -> list[HostRecord]:
        """Every host that ever registered, by id."""
        with self._tx() as session:
            return [HostRecord.of(h) for h in session.scalars(select(Host).order_by(Host.host_id))]

    def dead_host_ids(self, now: datetime, dead_after_s: float) -> frozenset[str]:
        """The hosts not alive at ``now`` (:func:`dead_hosts` over :meth:`list_hosts`)."""
        return dead_hosts(self.list_hosts(), now, dead_after_s)

    def adopt_device(
        self, serial: str, host_id: str, now: datetime, *, dead_after_s: float
    ) -> DeviceRecord | None:
        """Note that ``host_id``'s adb server sees ``serial``; own it if it is free to take.

        A new device starts ``discovered``, owned by ``host_id``. A device of
        another host is taken over only while it is ``offline`` or
        ``discovered``, or its host is dead (no heartbeat within
        ``dead_after_s``, or no ``hosts`` row). A device taken over that was
        set up by its old host goes back to ``discovered`` (its app registered
        at the old host's tracker), unless it is busy (its attempt's lease
        runs out first) or quarantined (a person releases it).

        Args:
            serial: the adb serial.
            host_id: the host whose adb server sees it.
            now: when.
            dead_after_s: ``hosts.dead_after_s``.

        Returns:
            The device, now ``host_id``'s (``last_seen`` is ``now``); None if
            another live host owns it and uses it: nothing changed.

        Raises:
            StoreError: the database refused the write.
        """
        try:
            with self._tx() as session:
                return _adopt(session, serial, host_id, now, dead_after_s)
        except IntegrityError:  # another host created the row just now: judge the row
            with self._tx() as session:
                return _adopt(session, serial, host_id, now, dead_after_s)


def _adopt(
    session: Session, serial: str, host_id: str, now: datetime, dead_after_s: float
) -> DeviceRecord | None:
    """:meth:`HostOps.adopt_device` in ``session``."""
    device = transitions.get_or_create(session, serial, now)
    owner = device.host
    if owner is not None and owner != host_id:
        why = _why_free(session, device, owner, now, dead_after_s)
        if why is None:
            transitions.note(session, "device_owned_elsewhere", serial=serial, host=owner)
            return None
        reason = f"taken over by host {host_id} from {owner} ({why})"
        state = device.state
        session.add(DeviceEvent(serial=serial, at=now, from_state=state.value,
                                to_state=state.value, reason=reason))
        if state not in (DeviceState.BUSY, DeviceState.QUARANTINED, *_FREE_TO_TAKE):
            transitions.set_state(session, device, DeviceState.DISCOVERED, reason, now)
        transitions.note(session, "device_taken_over", serial=serial, host=host_id,
                         from_host=owner, reason=why)
    device.host = host_id
    device.last_seen = now
    session.flush()
    return DeviceRecord.of(device)


def _why_free(
    session: Session, device: Device, owner: str, now: datetime, dead_after_s: float
) -> str | None:
    """Why ``owner``'s device may be taken over now, or None if it may not."""
    if device.state in _FREE_TO_TAKE:
        return f"{device.state.value} there"
    host = session.get(Host, owner)
    if host is None:
        return "that host never registered"
    if not HostRecord.of(host).alive(now, dead_after_s):
        return f"no heartbeat since {host.heartbeat_at.isoformat(timespec='seconds')}"
    return None
