"""One health sample of one device, as plain data.

A kind's probe fills a :class:`HealthSample`: the device's status (reachable,
its RPC server up and registered) and the readings its kind declares
(:mod:`farm.health.readings`); :func:`farm.health.verdict.verdict` judges it
without any I/O. A reading the probe could not get is ``None`` (or absent):
the verdict skips it rather than guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from farm.health.readings import ReadingValues

#: The adb state a phone must be in to take work (``adb devices`` column two;
#: AOSP ``adb/adb.cpp`` ``to_string(ConnectionState)``).
ADB_STATE_DEVICE = "device"

#: The kind of a sample no kind was named for: a phone's (``devices.kind``'s default).
ANDROID = "android"


@dataclass(frozen=True, init=False)
class HealthSample:
    """What one health sweep saw on one device at one instant.

    Build it as ``HealthSample(serial, at, kind="board", readings={...})``; a
    reading may also be given by keyword (``max_zone_temp_c=41.2``).

    Attributes:
        serial: the device's serial.
        at: when the sample was taken (timezone-aware).
        adb_state: the transport state: adb's ``device``, ``offline``,
            ``unauthorized``, ``recovery``, ... or ``absent`` when not listed.
        kind: the device kind, whose declaration (:func:`farm.health.readings.declared`)
            says what each reading means and what gates a job on it.
        readings: the kind's readings by name (``max_zone_temp_c``: 31.2); None or
            absent where the probe could not read one.
        plugged: whether any charger (AC, USB, wireless, dock) powers the phone.
        screen_on: whether the display is on (benchmarks want it awake).
        app_running: whether the RPC server's process exists (``pidof``).
        registered: whether the tracker lists the device's key.
        probe_ok: whether a tiny real RPC session to the device succeeded;
            ``None`` when no probe ran this sweep.
        fatal_exception_seen: whether logcat showed ``FATAL EXCEPTION`` for the app
            since the previous sample.
    """

    serial: str
    at: datetime
    adb_state: str
    kind: str
    readings: Mapping[str, float | None]
    plugged: bool | None
    screen_on: bool | None
    app_running: bool | None
    registered: bool | None
    probe_ok: bool | None
    fatal_exception_seen: bool

    def __init__(
        self, serial: str, at: datetime, adb_state: str = ADB_STATE_DEVICE, *,
        kind: str = ANDROID, readings: ReadingValues | None = None, plugged: bool | None = None,
        screen_on: bool | None = None, app_running: bool | None = None,
        registered: bool | None = None, probe_ok: bool | None = None,
        fatal_exception_seen: bool = False, **values: float | None,
    ) -> None:
        fields = {
            "serial": serial, "at": at, "adb_state": adb_state, "kind": kind,
            "readings": {**(readings or {}), **values}, "plugged": plugged,
            "screen_on": screen_on, "app_running": app_running, "registered": registered,
            "probe_ok": probe_ok, "fatal_exception_seen": fatal_exception_seen,
        }
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    __hash__ = None  # type: ignore[assignment]  # readings is a dict

    def value(self, name: str) -> float | None:
        """The reading called ``name``; None when not read."""
        return self.readings.get(name)
