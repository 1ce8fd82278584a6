"""The devices' tables: hosts, devices, their events and health samples, reservations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from farm.queue.model_base import Base, enum_column
from farm.queue.states import DeviceHealth, DeviceState
from farm.queue.tolerant import TolerantEnum


class Host(Base):
    """One farmd host sharing the database (``Settings.host_id``).

    A host whose ``heartbeat_at`` is older than ``hosts.dead_after_s`` is dead:
    its devices show as unreachable and its attempts' leases run out.
    """

    __tablename__ = "hosts"

    host_id: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    started_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    # The tracker its devices register with, as users reach it.
    tracker_host: Mapped[str] = mapped_column(sa.String(255))
    tracker_port: Mapped[int]
    info: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The newest migration its farm knows, and its farm.__version__ (rolling upgrades).
    schema_revision: Mapped[str | None] = mapped_column(sa.String(32), default=None)
    code_version: Mapped[str | None] = mapped_column(sa.String(64), default=None)


class Device(Base):
    """One device, by serial (adb serial for phones, a configured name for boards)."""

    __tablename__ = "devices"

    serial: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    # The host whose farmd sees this device; only it sweeps, provisions and runs it.
    host: Mapped[str | None] = mapped_column(sa.String(128), default=None, index=True)
    # The device kind (farm.controllers registry): "android", "board", "gpu".
    kind: Mapped[str] = mapped_column(sa.String(16), default="android",
                                      server_default="android")
    state: Mapped[DeviceState] = mapped_column(TolerantEnum(DeviceState, DeviceState.UNKNOWN),
                                               default=DeviceState.DISCOVERED)
    health: Mapped[DeviceHealth] = mapped_column(enum_column(DeviceHealth),
                                                 default=DeviceHealth.UNKNOWN)
    health_reason: Mapped[str] = mapped_column(sa.Text, default="", server_default="")
    # abi, abis, soc, sdk, gpu, model...: what DeviceSelection matches against.
    facts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    drained: Mapped[bool] = mapped_column(default=False)
    attempt_id: Mapped[int | None] = mapped_column(default=None)  # set while busy
    last_seen: Mapped[datetime | None] = mapped_column(default=None)
    state_changed_at: Mapped[datetime | None] = mapped_column(default=None)
    # Why a session farm did not open holds this phone (a person's own
    # ``request(key)`` seen in the tracker's summary), or None; jobs wait.
    held_outside: Mapped[str | None] = mapped_column(sa.Text, default=None)
    # Desired state: the tracker key the device's hold asks it to serve (a
    # tuning job's key); None: its own key. Cleared when it leaves busy.
    serve_key: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    # Observed state: the key farmd last started the device's RPC server under.
    serving_key: Mapped[str | None] = mapped_column(sa.String(128), default=None)


class DeviceEvent(Base):
    """One state change of a phone, e.g. ``ready -> cooling (max_zone_temp_c 72.4 > 70)``."""

    __tablename__ = "device_events"
    __table_args__ = (sa.Index("ix_device_events_serial_at", "serial", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(sa.String(128))
    at: Mapped[datetime]
    from_state: Mapped[str | None] = mapped_column(sa.String(16))
    to_state: Mapped[str] = mapped_column(sa.String(16))
    reason: Mapped[str] = mapped_column(sa.Text, default="")


class HealthSample(Base):
    """One health probe of a device; None where the probe could not read a value.

    ``readings`` holds the readings the device's kind declares, by name
    (:mod:`farm.health.readings`). The per-reading columns before it are a
    phone's readings, still written for hosts before migration 0009 and read
    where ``readings`` is NULL (a row such a host wrote).
    """

    __tablename__ = "health_samples"
    __table_args__ = (sa.Index("ix_health_samples_serial_at", "serial", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(sa.String(128))
    at: Mapped[datetime]
    battery_pct: Mapped[float | None]
    battery_temp_c: Mapped[float | None]
    thermal_status: Mapped[int | None]  # PowerManager THERMAL_STATUS_*: 0 none .. 6 shutdown
    max_zone_temp_c: Mapped[float | None]
    free_storage_mb: Mapped[float | None]
    screen_on: Mapped[bool | None]
    app_running: Mapped[bool | None]
    registered: Mapped[bool | None]  # the RPC app is registered with the tracker
    readings: Mapped[dict[str, Any] | None]  # {name: value} as the kind declares them


#: A phone's readings that still have a column each (migration 0009 keeps them
#: for hosts that predate ``health_samples.readings``): written beside the JSON,
#: read where a row has no JSON.
LEGACY_READINGS = ("battery_pct", "battery_temp_c", "thermal_status", "max_zone_temp_c",
                   "free_storage_mb")


def readings_of(sample: HealthSample) -> dict[str, float]:
    """A stored sample's readings: its JSON, or a pre-0009 host's per-reading columns."""
    if sample.readings is not None:
        return {name: value for name, value in sample.readings.items() if value is not None}
    return {name: value for name in LEGACY_READINGS
            if (value := getattr(sample, name)) is not None}


class Reservation(Base):
    """A device taken out of scheduling for a person until ``expires_at``.

    Active while ``ended_at`` is NULL; the partial unique index allows one
    active reservation per device whatever two racing writers read.
    """

    __tablename__ = "reservations"
    __table_args__ = (
        sa.Index("ux_reservations_active_serial", "serial", unique=True,
                 sqlite_where=sa.text("ended_at IS NULL"),
                 postgresql_where=sa.text("ended_at IS NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(sa.ForeignKey("devices.serial"))
    owner: Mapped[str] = mapped_column(sa.String(128))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    end_reason: Mapped[str | None] = mapped_column(sa.Text, default=None)
