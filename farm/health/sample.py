"""One health reading of one phone, as plain data.

The probes (``adb`` calls parsed by ``farm/device``) fill a :class:`HealthSample`;
:func:`farm.health.verdict.verdict` judges it without any I/O. A reading the probe
could not get is ``None``: the verdict skips it rather than guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

#: The adb state a phone must be in to take work (``adb devices`` column two;
#: AOSP ``adb/adb.cpp`` ``to_string(ConnectionState)``).
ADB_STATE_DEVICE = "device"


@dataclass(frozen=True)
class HealthSample:
    """What one health sweep saw on one phone at one instant.

    Attributes:
        serial: the phone's adb serial.
        at: when the sample was taken (timezone-aware).
        adb_state: the adb server's state for the phone: ``device``, ``offline``,
            ``unauthorized``, ``recovery``, ... or ``absent`` when not listed.
        battery_pct: charge level, 0..100 (``dumpsys battery`` ``level``).
        battery_temp_c: battery temperature in °C (``dumpsys battery``
            ``temperature`` is in tenths of a degree; the parser divides).
        plugged: whether any charger (AC, USB, wireless, dock) powers the phone.
        thermal_status: Android's overall thermal status, 0..6
            (``dumpsys thermalservice`` ``Thermal Status:``; AOSP
            ``PowerManager.THERMAL_STATUS_NONE`` = 0 ... ``SHUTDOWN`` = 6).
        max_zone_temp_c: the hottest temperature-type sensor in °C, from the
            thermal HAL or ``/sys/class/thermal``.
        free_storage_mb: free space on ``/data`` in MiB.
        screen_on: whether the display is on (benchmarks want it awake).
        app_running: whether the TVM RPC app's process exists (``pidof``).
        registered: whether the tracker lists the phone's key.
        probe_ok: whether a tiny real RPC session to the phone succeeded; ``None``
            when no probe ran this sweep.
        fatal_exception_seen: whether logcat showed ``FATAL EXCEPTION`` for the app
            since the previous sample.
    """

    serial: str
    at: datetime
    adb_state: str = ADB_STATE_DEVICE
    battery_pct: int | None = None
    battery_temp_c: float | None = None
    plugged: bool | None = None
    thermal_status: int | None = None
    max_zone_temp_c: float | None = None
    free_storage_mb: float | None = None
    screen_on: bool | None = None
    app_running: bool | None = None
    registered: bool | None = None
    probe_ok: bool | None = None
    fatal_exception_seen: bool = False
