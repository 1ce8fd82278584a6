"""Parse the screen and stay-awake state from ``dumpsys power`` and ``settings``.

``dumpsys power`` (AOSP ``services/core/java/com/android/server/power/PowerManagerService.java``
``dumpInternal()``) prints ``  mWakefulness=Awake|Asleep|Dreaming|Dozing``,
``  mStayOn=true|false`` and ``  mStayOnWhilePluggedInSetting=N``. Android 9/10
era dumps also print ``Display Power: state=ON|OFF``; on Android 13 that line is
an object name without ``toString()`` (``PowerManagerService$1@dfdf384``), so
``mWakefulness`` is the primary source and ``Display Power`` only a fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from farm.device._text import as_text, excerpt

_WAKEFULNESS = re.compile(r"^\s*mWakefulness=(\w+)\s*$", re.MULTILINE)
_DISPLAY_POWER = re.compile(r"^Display Power: state=(\w+)\s*$", re.MULTILINE)
_STAY_ON = re.compile(r"^\s*mStayOn=(true|false)\s*$", re.MULTILINE)
_STAY_ON_SETTING = re.compile(r"^\s*mStayOnWhilePluggedInSetting=(\d+)\s*$", re.MULTILINE)

# Bits of Settings.Global.STAY_ON_WHILE_PLUGGED_IN: BatteryManager.BATTERY_PLUGGED_*.
STAY_ON_AC, STAY_ON_USB, STAY_ON_WIRELESS, STAY_ON_DOCK = 1, 2, 4, 8


@dataclass(frozen=True)
class PowerState:
    """Screen and stay-awake state.

    Attributes:
        wakefulness: ``Awake``, ``Asleep``, ``Dreaming`` or ``Dozing``; ``""``
            when only ``Display Power`` was printed.
        screen_on: the display is on (``Awake`` or ``Dreaming``, or
            ``Display Power: state=ON``).
        stay_on: the power manager currently keeps the screen on because of
            the stay-on-while-plugged-in setting (``mStayOn``).
        stay_on_while_plugged_in: the setting's bit mask (AC=1, USB=2,
            WIRELESS=4, DOCK=8; 0 = off).
    """

    wakefulness: str
    screen_on: bool
    stay_on: bool
    stay_on_while_plugged_in: int


def parse_dumpsys_power(output: str | bytes) -> PowerState:
    """Parse ``dumpsys power``.

    Args:
        output: stdout of ``dumpsys power``.

    Returns:
        The power state.

    Raises:
        ValueError: neither ``mWakefulness=`` nor ``Display Power: state=`` is printed.
    """
    text = as_text(output)
    wakefulness = _WAKEFULNESS.search(text)
    display = _DISPLAY_POWER.search(text)
    if wakefulness:
        name = wakefulness.group(1)
        screen_on = name in ("Awake", "Dreaming")
    elif display:
        name = ""
        screen_on = display.group(1) == "ON"
    else:
        raise ValueError(
            f"dumpsys power: no mWakefulness or Display Power state in {excerpt(text)!r}"
        )
    stay_on = _STAY_ON.search(text)
    setting = _STAY_ON_SETTING.search(text)
    return PowerState(
        wakefulness=name,
        screen_on=screen_on,
        stay_on=stay_on is not None and stay_on.group(1) == "true",
        stay_on_while_plugged_in=int(setting.group(1)) if setting else 0,
    )


def parse_stay_on_setting(output: str | bytes) -> int:
    """Parse ``settings get global stay_on_while_plugged_in``.

    Args:
        output: stdout: the value and a newline, ``null`` when never set.

    Returns:
        The bit mask (``svc power stayon true`` sets AC|USB|WIRELESS = 7); 0 for ``null``.

    Raises:
        ValueError: the value is not an integer or ``null``.
    """
    value = as_text(output).strip()
    if value == "null":
        return 0
    if not value.isdigit():
        raise ValueError(f"settings stay_on_while_plugged_in: {value!r} is not a number")
    return int(value)
