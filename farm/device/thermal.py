"""Parse ``dumpsys thermalservice`` and the kernel's thermal zones.

``dumpsys thermalservice`` is printed by AOSP
``services/core/java/com/android/server/power/ThermalManagerService.java``
``dumpInternal()``: ``Thermal Status: N``, ``Cached temperatures:``,
``HAL Ready:``, ``HAL connection:`` (``ThermalHAL 2.0 connected: yes`` or
``ThermalHAL AIDL 1  connected: yes`` with two spaces), ``Current temperatures
from HAL:``, ``Current cooling devices from HAL:`` and ``Temperature static
thresholds from HAL:``. Sub-items are indented with one TAB. Thresholds print
in the HIDL ``toString()`` style (``{.type = CPU, .name = CPU, ...}``) or the
Java one (``TemperatureThreshold{mType=2, mName=BAT, ...}``); both are read.

Codes: ``android.os.PowerManager.THERMAL_STATUS_*`` (0..6),
``android.hardware.thermal`` ``TemperatureType`` (-1..13) and ``CoolingType``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from farm.device._text import as_text, excerpt

# PowerManager.THERMAL_STATUS_NONE .. THERMAL_STATUS_SHUTDOWN; the HAL's
# ThrottlingSeverity uses the same numbers for a temperature's mStatus.
THERMAL_STATUS_NAMES = ("none", "light", "moderate", "severe", "critical", "emergency", "shutdown")

# android.hardware.thermal TemperatureType (HIDL 2.0 up to NPU, AIDL adds 10..13).
TEMPERATURE_TYPES = {
    -1: "UNKNOWN",
    0: "CPU",
    1: "GPU",
    2: "BATTERY",
    3: "SKIN",
    4: "USB_PORT",
    5: "POWER_AMPLIFIER",
    6: "BCL_VOLTAGE",
    7: "BCL_CURRENT",
    8: "BCL_PERCENTAGE",
    9: "NPU",
    10: "TPU",
    11: "DISPLAY",
    12: "MODEM",
    13: "SOC",
}
_TYPE_CODES = {name: code for code, name in TEMPERATURE_TYPES.items()}
# For these types mValue is mV, mA or % (HAL 2.0 Temperature.value doc), not °C.
NOT_TEMPERATURE_TYPES = frozenset({6, 7, 8})

_STATUS = re.compile(r"^Thermal Status: (-?\d+)$", re.MULTILINE)
_HAL = re.compile(r"^\t(.+?) +connected: (yes|no)$", re.MULTILINE)
_TEMPERATURE = re.compile(
    r"Temperature\{mValue=([^,]+), mType=(-?\d+), mName=(.*?), mStatus=(-?\d+)\}"
)
_COOLING = re.compile(r"CoolingDevice\{mValue=(-?\d+), mType=(-?\d+), mName=(.*?)\}")
_THRESHOLD_JAVA = re.compile(
    r"TemperatureThreshold\{mType=(-?\d+), mName=(.*?), "
    r"mHotThrottlingThresholds=\[(.*?)\], mColdThrottlingThresholds=\[(.*?)\]"
)
_THRESHOLD_HIDL = re.compile(
    r"\{\.type = (\w+), \.name = (.*?), \.hotThrottlingThresholds = \[(.*?)\], "
    r"\.coldThrottlingThresholds = \[(.*?)\]"
)


@dataclass(frozen=True)
class Temperature:
    """One sensor reading reported by the thermal HAL.

    Attributes:
        name: sensor name, e.g. ``"skin"``, ``"CPU0"``.
        type_code: ``TemperatureType`` code (0 CPU, 2 BATTERY, 3 SKIN, ...).
        type_name: name of ``type_code``, ``"TYPE_<n>"`` if unknown.
        value_c: the reading in °C; for BCL types (6, 7, 8) it is mV, mA or %.
        status: throttling severity 0..6 the HAL gives this sensor.
    """

    name: str
    type_code: int
    type_name: str
    value_c: float
    status: int

    @property
    def is_temperature(self) -> bool:
        """Whether ``value_c`` is a temperature (BCL sensors report mV, mA or %)."""
        return self.type_code not in NOT_TEMPERATURE_TYPES


@dataclass(frozen=True)
class CoolingDevice:
    """A cooling device and its current throttling step (0 = not throttling)."""

    name: str
    type_code: int
    value: int


@dataclass(frozen=True)
class Threshold:
    """Static throttling thresholds of one sensor, in °C, index = severity 0..6.

    ``None`` marks a severity the HAL has no threshold for (printed ``NaN``).
    """

    name: str
    type_code: int
    hot_c: tuple[float | None, ...]
    cold_c: tuple[float | None, ...]


@dataclass(frozen=True)
class ThermalState:
    """What ``dumpsys thermalservice`` reports.

    Attributes:
        thermal_status: overall status 0..6 (``PowerManager.THERMAL_STATUS_*``).
        thermal_status_name: e.g. ``"none"``, ``"moderate"``.
        hal_name: e.g. ``"ThermalHAL 2.0"`` or ``"ThermalHAL AIDL 1"``; ``""`` if
            the dump names none.
        hal_connected: whether the thermal HAL is connected.
        temperatures: ``Current temperatures from HAL`` (read at dump time).
        cached_temperatures: ``Cached temperatures`` (last HAL callbacks).
        cooling_devices: ``Current cooling devices from HAL``.
        thresholds: ``Temperature static thresholds from HAL``.
    """

    thermal_status: int
    thermal_status_name: str
    hal_name: str
    hal_connected: bool
    temperatures: tuple[Temperature, ...]
    cached_temperatures: tuple[Temperature, ...]
    cooling_devices: tuple[CoolingDevice, ...]
    thresholds: tuple[Threshold, ...]

    def max_temp_c(self, type_code: int) -> float | None:
        """Return the hottest current reading of a sensor type in °C, or None if none."""
        values = [t.value_c for t in self.temperatures if t.type_code == type_code]
        return max(values) if values else None


def _sections(text: str) -> dict[str, list[str]]:
    """Split the dump into ``Header:`` -> its TAB-indented lines."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.split("\n"):
        if line.startswith("\t"):
            if current is not None:
                current.append(line)
        elif line.endswith(":"):
            current = sections.setdefault(line[:-1], [])
        else:
            current = None
    return sections


def _float(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"dumpsys thermalservice: {what} is not a number: {text!r}") from None


def _temperatures(lines: list[str]) -> tuple[Temperature, ...]:
    result = []
    for line in lines:
        match = _TEMPERATURE.search(line)
        if match is None:
            raise ValueError(f"dumpsys thermalservice: cannot read temperature {line.strip()!r}")
        value, type_code, name, status = match.groups()
        code = int(type_code)
        result.append(
            Temperature(
                name=name,
                type_code=code,
                type_name=TEMPERATURE_TYPES.get(code, f"TYPE_{code}"),
                value_c=_float(value, f"temperature {name}"),
                status=int(status),
            )
        )
    return tuple(result)


def _cooling(lines: list[str]) -> tuple[CoolingDevice, ...]:
    result = []
    for line in lines:
        match = _COOLING.search(line)
        if match is None:
            raise ValueError(f"dumpsys thermalservice: cannot read cooling device {line.strip()!r}")
        value, type_code, name = match.groups()
        result.append(CoolingDevice(name=name, type_code=int(type_code), value=int(value)))
    return tuple(result)


def _levels(text: str, what: str) -> tuple[float | None, ...]:
    values = [_float(item.strip(), what) for item in text.split(",") if item.strip()]
    return tuple(None if math.isnan(v) else v for v in values)


def _thresholds(lines: list[str]) -> tuple[Threshold, ...]:
    result = []
    for line in lines:
        if match := _THRESHOLD_JAVA.search(line):
            type_code, name, hot, cold = match.groups()
            code = int(type_code)
        elif match := _THRESHOLD_HIDL.search(line):
            type_name, name, hot, cold = match.groups()
            if type_name not in _TYPE_CODES:
                raise ValueError(f"dumpsys thermalservice: unknown threshold type {type_name!r}")
            code = _TYPE_CODES[type_name]
        else:
            raise ValueError(f"dumpsys thermalservice: cannot read threshold {line.strip()!r}")
        result.append(
            Threshold(
                name=name,
                type_code=code,
                hot_c=_levels(hot, f"threshold {name}"),
                cold_c=_levels(cold, f"threshold {name}"),
            )
        )
    return tuple(result)


def parse_dumpsys_thermalservice(output: str | bytes) -> ThermalState:
    """Parse ``dumpsys thermalservice`` output.

    Args:
        output: what ``dumpsys thermalservice`` printed (stdout).

    Returns:
        The thermal state.

    Raises:
        ValueError: there is no ``Thermal Status:`` line, the status is outside
            0..6, or a temperature, cooling device or threshold line is unreadable.
    """
    text = as_text(output)
    status_match = _STATUS.search(text)
    if status_match is None:
        raise ValueError(f"dumpsys thermalservice: no 'Thermal Status:' in {excerpt(text)!r}")
    status = int(status_match.group(1))
    if not 0 <= status < len(THERMAL_STATUS_NAMES):
        raise ValueError(f"dumpsys thermalservice: thermal status {status} is outside 0..6")
    sections = _sections(text)
    hal_lines = "\n".join(sections.get("HAL connection", []))
    hal_match = _HAL.search(hal_lines)
    return ThermalState(
        thermal_status=status,
        thermal_status_name=THERMAL_STATUS_NAMES[status],
        hal_name=hal_match.group(1) if hal_match else "",
        hal_connected=hal_match is not None and hal_match.group(2) == "yes",
        temperatures=_temperatures(sections.get("Current temperatures from HAL", [])),
        cached_temperatures=_temperatures(sections.get("Cached temperatures", [])),
        cooling_devices=_cooling(sections.get("Current cooling devices from HAL", [])),
        thresholds=_thresholds(sections.get("Temperature static thresholds from HAL", [])),
    )


# --- /sys/class/thermal -----------------------------------------------------------

# A thermal zone whose ``type`` matches one of these is not a temperature sensor,
# although the kernel still reports it under /sys/class/thermal (Qualcomm PMIC
# drivers, seen in the Retroid Pocket 5 / SM8250 fixture):
#   soc   battery state of charge in % (e.g. 72), from the fuel gauge;
#   vbat  battery voltage in mV (pm8150b-vbat-lvl0 = 3986);
#   ibat  battery current in mA (pm8150b-ibat-lvl0 = 546);
#   bcl   battery current limiter levels (pm8150l-bcl-lvl0 = -274000, impossible);
#   vph   the VPH_PWR rail's voltage level (pm8150l-vph-lvl0).
_NON_TEMPERATURE_ZONE = re.compile(r"(^soc$|vbat|ibat|bcl|vph)")
# Qualcomm ADC thermistor channels with no thermistor fitted read the bottom of
# their lookup table, -40 °C exactly (camera-therm-usr, skin-msm-therm-usr and
# mmw-pa2-usr in the fixture); a real phone on a desk is never at -40.000 °C.
ABSENT_SENSOR_MILLI_C = -40000
# Nothing physical is colder than absolute zero (-273.15 °C).
_ABSOLUTE_ZERO_MILLI_C = -273150


@dataclass(frozen=True)
class ThermalZone:
    """One kernel thermal zone that reads a real temperature.

    Attributes:
        type: the zone's ``type`` file, e.g. ``"cpu-1-4-usr"``, ``"battery"``.
        temp_c: its ``temp`` file in °C (the kernel prints millidegrees).
    """

    type: str
    temp_c: float


def parse_thermal_zones(types_output: str | bytes, temps_output: str | bytes) -> list[ThermalZone]:
    """Pair ``cat .../thermal_zone*/type`` with ``cat .../thermal_zone*/temp``.

    Both commands expand the same shell glob, so line N of each belongs to the
    same zone (glob order: ``thermal_zone0, thermal_zone1, thermal_zone10, ...``).
    Zones that are not temperatures (see ``_NON_TEMPERATURE_ZONE``), absent
    thermistors (exactly -40000 m°C) and impossible values (below absolute
    zero) are left out, so callers can take ``max()`` of what remains.

    Args:
        types_output: stdout of ``cat /sys/class/thermal/thermal_zone*/type``.
        temps_output: stdout of ``cat /sys/class/thermal/thermal_zone*/temp``.

    Returns:
        The temperature zones, in glob order.

    Raises:
        ValueError: the two outputs have a different number of lines (a zone
            failed to read, e.g. ``Invalid argument`` on stderr) or a temperature
            is not an integer.
    """
    types = as_text(types_output).split()
    temps = as_text(temps_output).split()
    if len(types) != len(temps):
        raise ValueError(
            f"thermal zones: {len(types)} types but {len(temps)} temperatures;"
            " a zone failed to read"
        )
    zones = []
    for zone_type, temp in zip(types, temps, strict=True):
        try:
            milli_c = int(temp)
        except ValueError:
            raise ValueError(
                f"thermal zone {zone_type}: temperature {temp!r} is not an integer"
            ) from None
        if _NON_TEMPERATURE_ZONE.search(zone_type):
            continue
        if milli_c == ABSENT_SENSOR_MILLI_C or milli_c < _ABSOLUTE_ZERO_MILLI_C:
            continue
        zones.append(ThermalZone(type=zone_type, temp_c=milli_c / 1000))
    return zones
