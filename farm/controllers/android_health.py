"""The Android controller's health sweep: one adb shell call into a :class:`HealthSample`.

The readings are those :data:`~farm.health.kind_readings.ANDROID_READINGS`
declares, read from the parsed sections.

One shell call per sweep: a constant script prints each reading after a marker
line, so a sweep costs one adb round trip per phone however many readings it
takes. Each section is parsed by ``farm.device``; a section that fails to
parse, or is missing from the output, becomes ``None`` in the sample (the
verdict skips what it does not know) and is logged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import structlog

from farm.adb import Adb
from farm.device.batch import batch_script, split_batch
from farm.device.battery import Plugged, parse_dumpsys_battery
from farm.device.logcat import find_fatal_exceptions
from farm.device.power import parse_dumpsys_power
from farm.device.processes import parse_pidof
from farm.device.storage import parse_df_k
from farm.device.thermal import parse_dumpsys_thermalservice
from farm.health.kind_readings import AndroidRaw
from farm.health.readings import declared
from farm.health.sample import ANDROID, HealthSample
from farm.provision.launch import PACKAGE, RPC_PROCESS

log = structlog.get_logger(__name__)

PROBE_TIMEOUT_S = 20.0
_SECTIONS = {
    "battery": ["dumpsys", "battery"],
    "thermal": ["dumpsys", "thermalservice"],
    "df": ["df", "-k", "/data"],
    "power": ["dumpsys", "power"],
    "app": ["pidof", RPC_PROCESS],
    # AndroidRuntime is the tag of FATAL EXCEPTION entries (AOSP RuntimeInit.java).
    "crash": ["logcat", "-d", "-s", "AndroidRuntime"],
}

_Parsed = TypeVar("_Parsed")


def probe_script() -> str:
    """The shell script of one sweep: each section's command after its marker."""
    return batch_script(_SECTIONS)


def sample_from_sections(
    serial: str, at: datetime, sections: dict[str, str], *, crashes_seen: int | None = None,
    registered: bool | None = None,
) -> tuple[HealthSample, int | None]:
    """Build a sample from parsed sections (pure); returns it and the crash count.

    ``crashes_seen`` is the number of app crashes in logcat already reported; a
    higher count in this logcat means a new ``FATAL EXCEPTION``. None means no
    count yet (farmd just started): this logcat's crashes are the baseline, not
    news, or every restart would report the crashes of the last run again. A
    missing or unreadable crash section keeps the count as it was, so the next
    readable logcat does not report old crashes as new ones.
    """
    values: dict[str, object] = {}

    def parse(name: str, fn: Callable[[str], _Parsed]) -> _Parsed | None:
        if name not in sections:
            log.warning("health_section_missing", serial=serial, section=name)
            return None
        try:
            return fn(sections[name])
        except ValueError as exc:
            log.warning("health_section_unreadable", serial=serial, section=name, reason=str(exc))
            return None

    battery = parse("battery", parse_dumpsys_battery)
    if battery is not None:
        values["plugged"] = battery.plugged is not Plugged.NONE
    raw = AndroidRaw(battery, parse("thermal", parse_dumpsys_thermalservice),
                     parse("df", parse_df_k))
    power = parse("power", parse_dumpsys_power)
    if power is not None:
        values["screen_on"] = power.screen_on
    pids = parse("app", parse_pidof)  # [] (app down) differs from None (unknown)
    if pids is not None:
        values["app_running"] = bool(pids)
    crashes = parse("crash", lambda text: find_fatal_exceptions(text, PACKAGE))
    count = crashes_seen if crashes is None else len(crashes)
    new_crash = crashes_seen is not None and count is not None and count > crashes_seen
    sample = HealthSample(
        serial, at, registered=registered, readings=declared(ANDROID).read(raw),
        fatal_exception_seen=new_crash, **values,  # type: ignore[arg-type]
    )
    return sample, count


def read_health(
    adb: Adb, serial: str, at: datetime, *, crashes_seen: int | None = None,
    registered: bool | None = None,
) -> tuple[HealthSample, int | None]:
    """Take one health sample of ``serial`` (one adb round trip).

    Raises:
        PhoneFault: adb failed or timed out (the caller marks the phone).
    """
    result = adb.shell(serial, ["sh", "-c", probe_script()], timeout_s=PROBE_TIMEOUT_S)
    return sample_from_sections(serial, at, split_batch(result.out), crashes_seen=crashes_seen,
                                registered=registered)
