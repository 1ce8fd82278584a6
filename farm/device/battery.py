"""Parse ``dumpsys battery`` into a :class:`BatteryState`.

The dump is ``Current Battery Service state:`` followed by ``  label: value``
lines, printed by AOSP ``services/core/java/com/android/server/BatteryService.java``
``dumpInternal()``. Formats seen in ``tests/fixtures/android``:

- Android 7 and 13: no ``Dock powered`` line;
- Android 14+: ``Dock powered``, often ``Charging state`` / ``Charging policy``;
- Android 16 (Pixel) and HyperOS: ``Time when the latest updated value ...``
  and ``The last voltage value sent ...`` lines with **one** leading space,
  and ``Capacity level`` last;
- OEM trailers (``MiuiBatteryService first usage time:``) after the block;
- ``(UPDATES STOPPED -- use 'reset' to restart)`` as the second line while
  values are forced with ``dumpsys battery set|unplug``.

Codes are AOSP ``android.os.BatteryManager`` constants.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from farm.device._text import as_text, excerpt

_HEADER = "Current Battery Service state:"
_UPDATES_STOPPED = "(UPDATES STOPPED"

# BatteryManager.BATTERY_STATUS_* (1..5).
STATUS_NAMES = {1: "unknown", 2: "charging", 3: "discharging", 4: "not_charging", 5: "full"}
# BatteryManager.BATTERY_HEALTH_* (1..7).
HEALTH_NAMES = {
    1: "unknown",
    2: "good",
    3: "overheat",
    4: "dead",
    5: "over_voltage",
    6: "unspecified_failure",
    7: "cold",
}


class Plugged(str, enum.Enum):
    """The power source a phone draws from (``BatteryManager.BATTERY_PLUGGED_*``)."""

    AC = "ac"
    USB = "usb"
    WIRELESS = "wireless"
    DOCK = "dock"
    NONE = "none"


# Dump label -> plug type, in the order dumpInternal() prints them.
_PLUG_LABELS = (
    ("AC powered", Plugged.AC),
    ("USB powered", Plugged.USB),
    ("Wireless powered", Plugged.WIRELESS),
    ("Dock powered", Plugged.DOCK),
)


@dataclass(frozen=True)
class BatteryState:
    """One reading of the battery service.

    Attributes:
        level_pct: charge as a percentage of ``scale`` (``level * 100 / scale``).
        level: the raw ``level`` value.
        scale: the raw ``scale`` value (100 on every phone seen).
        plugged: the first power source that reports true, or ``none``.
        status_code: ``BATTERY_STATUS_*`` (2 charging, 5 full, ...).
        status: name of ``status_code``, e.g. ``"charging"``.
        health_code: ``BATTERY_HEALTH_*`` (2 good, 3 overheat, ...).
        health: name of ``health_code``, e.g. ``"good"``.
        temp_c: battery temperature in °C (the dump prints tenths of °C).
        voltage_mv: battery voltage in mV.
        present: whether a battery is present.
        technology: e.g. ``"Li-ion"``, as printed.
        updates_stopped: values are forced by ``dumpsys battery set``, not read
            from the hardware.
    """

    level_pct: float
    level: int
    scale: int
    plugged: Plugged
    status_code: int
    status: str
    health_code: int
    health: str
    temp_c: float
    voltage_mv: int
    present: bool
    technology: str
    updates_stopped: bool


def _fields(lines: list[str]) -> dict[str, str]:
    """Return the ``label: value`` pairs of the battery block (indented lines)."""
    fields: dict[str, str] = {}
    for line in lines:
        if not line.startswith(" "):
            break  # an OEM trailer such as "MiuiBatteryService first usage time:"
        label, sep, value = line.strip().partition(": ")
        if sep:
            fields.setdefault(label, value.strip())
    return fields


def _int(fields: dict[str, str], label: str) -> int:
    try:
        return int(fields[label])
    except KeyError:
        raise ValueError(f"dumpsys battery: no {label!r} line") from None
    except ValueError:
        raise ValueError(
            f"dumpsys battery: {label!r} is not an integer: {fields[label]!r}"
        ) from None


def _bool(fields: dict[str, str], label: str, *, required: bool = True) -> bool:
    value = fields.get(label)
    if value is None and not required:
        return False
    if value not in ("true", "false"):
        raise ValueError(f"dumpsys battery: {label!r} is not true/false: {value!r}")
    return value == "true"


def parse_dumpsys_battery(output: str | bytes) -> BatteryState:
    """Parse ``dumpsys battery`` output.

    Args:
        output: what ``dumpsys battery`` printed (stdout).

    Returns:
        The battery state.

    Raises:
        ValueError: the header is missing, or a required line (level, scale,
            status, health, temperature, voltage, present, AC/USB/Wireless
            powered) is missing or unreadable.
    """
    text = as_text(output)
    lines = text.split("\n")
    try:
        start = lines.index(_HEADER)
    except ValueError:
        raise ValueError(f"dumpsys battery: no {_HEADER!r} header in {excerpt(text)!r}") from None
    body = lines[start + 1 :]
    updates_stopped = bool(body) and body[0].strip().startswith(_UPDATES_STOPPED)
    fields = _fields(body)
    level, scale = _int(fields, "level"), _int(fields, "scale")
    if scale <= 0:
        raise ValueError(f"dumpsys battery: scale must be positive, got {scale}")
    plugged = Plugged.NONE
    for label, kind in _PLUG_LABELS:
        # "Dock powered" exists only on Android 14+.
        if _bool(fields, label, required=kind is not Plugged.DOCK):
            plugged = kind
            break
    status_code, health_code = _int(fields, "status"), _int(fields, "health")
    return BatteryState(
        level_pct=level * 100 / scale,
        level=level,
        scale=scale,
        plugged=plugged,
        status_code=status_code,
        status=STATUS_NAMES.get(status_code, f"code_{status_code}"),
        health_code=health_code,
        health=HEALTH_NAMES.get(health_code, f"code_{health_code}"),
        temp_c=_int(fields, "temperature") / 10,
        voltage_mv=_int(fields, "voltage"),
        present=_bool(fields, "present"),
        technology=fields.get("technology", ""),
        updates_stopped=updates_stopped,
    )
