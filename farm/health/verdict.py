"""Judge a :class:`~farm.health.sample.HealthSample` against :class:`Limits`, purely.

A verdict names a :class:`Condition` and its reasons; the fleet turns it into a
state transition and a health (``good``/``bad``, LAVA's axis, kept apart from
the state) and logs the reason, e.g. ``ready -> cooling (battery_temp_c 41.2 > 35)``.

Conditions, worst first: ``offline`` (adb cannot reach the phone, nothing else is
meaningful), ``unhealthy`` (the app or the phone needs fixing), ``cooling`` (too
hot to give comparable benchmark figures; it only needs time), ``good``.
A reading that is ``None`` (the probe could not get it) is skipped, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from farm.config import HealthSettings
from farm.health.sample import ADB_STATE_DEVICE, HealthSample

#: The config's ``[health]`` defaults: the one place they are written.
_DEFAULTS = HealthSettings.model_validate({})

# AOSP frameworks/base/core/java/android/os/PowerManager.java, THERMAL_STATUS_*
# (API 29+), also in the NDK's include/android/thermal.h as ATHERMAL_STATUS_*.
THERMAL_STATUS_NONE = 0  # not under throttling
THERMAL_STATUS_LIGHT = 1  # light throttling, UX not impacted
THERMAL_STATUS_MODERATE = 2  # moderate throttling, UX not largely impacted
THERMAL_STATUS_SEVERE = 3  # severe throttling, UX largely impacted
THERMAL_STATUS_CRITICAL = 4  # platform has done everything to reduce power
THERMAL_STATUS_EMERGENCY = 5  # key components shutting down
THERMAL_STATUS_SHUTDOWN = 6  # needs shutdown immediately


class Condition(str, Enum):
    """What one sample says about a phone, worst last (the order :func:`verdict` ranks by).

    Not the phone's health: :class:`farm.queue.models.DeviceHealth` (``good``,
    ``bad``, ``unknown``, LAVA's axis) is stored per phone and derived from
    conditions by :func:`farm.fleet.lifecycle.health_of`; a condition decides the
    phone's next state (``cooling`` only needs time, ``unhealthy`` needs fixing).
    """

    GOOD = "good"
    COOLING = "cooling"
    UNHEALTHY = "unhealthy"
    OFFLINE = "offline"


@dataclass(frozen=True)
class Limits:
    """Thresholds a sample is judged against.

    The defaults and the range checks are the config's (``[health]`` in
    :class:`farm.config.HealthSettings`, which validates what users write);
    build limits with :meth:`from_settings`.

    Attributes:
        battery_temp_max_c: above this the phone cools. 35 °C is farm's choice for
            repeatable benchmarks (a phone warmer than that throttles soon under
            load), far below Android's own shutdown temperature
            (``config_shutdownBatteryTemperature`` = 680, i.e. 68.0 °C, in AOSP
            ``frameworks/base/core/res/res/values/config.xml``).
        thermal_status_max: the highest ``PowerManager`` thermal status that still
            counts as cool. 0 (``THERMAL_STATUS_NONE``): any platform throttling
            skews figures.
        zone_temp_max_c: above this hottest-zone temperature the phone cools;
            ``None`` disables the check. 70 °C (farm's choice, the config default)
            leaves headroom over idle: an idle MT8168 already reports CPU 45-50 °C
            (fixture ``dumpsys_thermalservice__mtk_tb8168_android13.txt``).
        cool_margin_c: hysteresis: a cooling phone returns only once it is this
            far below the temperature limits, so it does not flap at the edge.
        battery_min_pct: below this charge the phone is unhealthy. 20 matches AOSP
            ``config_lowBatteryWarningLevel`` in newer builds (older ones use 15;
            ``frameworks/base/core/res/res/values/config.xml``).
        storage_min_free_mb: below this free space on ``/data`` (MiB) the phone is
            unhealthy. 500 matches AOSP ``StorageManager.DEFAULT_THRESHOLD_MAX_BYTES``
            (500 MiB), the cap of Android's own "storage low" threshold.
        require_plugged: whether running on battery is unhealthy. Off by default:
            adb-over-TCP phones may be charged by other means; the battery floor
            still catches a draining phone.
        require_screen_on: whether a dark screen is unhealthy (a phone that dozes
            throttles and may drop its app); farm keeps screens awake while plugged.
    """

    battery_temp_max_c: float = _DEFAULTS.battery_temp_max_c
    thermal_status_max: int = _DEFAULTS.thermal_status_max
    zone_temp_max_c: float | None = _DEFAULTS.zone_temp_max_c
    cool_margin_c: float = _DEFAULTS.cool_margin_c
    battery_min_pct: float = _DEFAULTS.battery_min_pct
    storage_min_free_mb: float = _DEFAULTS.storage_min_free_mb
    require_plugged: bool = _DEFAULTS.require_plugged
    require_screen_on: bool = _DEFAULTS.require_screen_on

    @classmethod
    def from_settings(cls, settings: HealthSettings, **overrides: Any) -> Limits:
        """Build limits from the ``[health]`` section of farm's config.

        Args:
            settings: ``Settings.health``.
            **overrides: tests' changes (e.g. ``zone_temp_max_c=None`` to
                disable that check).
        """
        fields = {
            "battery_temp_max_c": settings.battery_temp_max_c,
            "thermal_status_max": settings.thermal_status_max,
            "zone_temp_max_c": settings.zone_temp_max_c,
            "cool_margin_c": settings.cool_margin_c,
            "battery_min_pct": settings.battery_min_pct,
            "storage_min_free_mb": settings.storage_min_free_mb,
            "require_plugged": settings.require_plugged,
            "require_screen_on": settings.require_screen_on,
        }
        return cls(**{**fields, **overrides})


@dataclass(frozen=True)
class Verdict:
    """The judgement on one sample.

    Attributes:
        condition: the worst category any reason falls in.
        reasons: every limit the sample broke, worst category first, each as
            ``"<field> <value> <op> <limit>"``, e.g. ``"battery_temp_c 41.2 > 35"``.
    """

    condition: Condition
    reasons: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """All reasons in one line, for a transition's log entry ("" when good)."""
        return "; ".join(self.reasons)


def _num(value: float) -> str:
    """Format a reading without float noise: 41.2 -> "41.2", 35.0 -> "35"."""
    return f"{value:g}"


def app_failure_reasons(sample: HealthSample) -> list[str]:
    """Why the TVM RPC app counts as gone: the triggers of the recovery ladder.

    Args:
        sample: the reading to judge.

    Returns:
        The reasons (empty when the app is fine or unknown, or the phone is offline:
        an offline phone's app cannot be judged, and restarting it is pointless).
    """
    if sample.adb_state != ADB_STATE_DEVICE:
        return []
    reasons = []
    if sample.app_running is False:
        reasons.append("app_running false")
    if sample.registered is False:
        reasons.append("registered false")
    if sample.probe_ok is False:
        reasons.append("probe_ok false")
    if sample.fatal_exception_seen:
        reasons.append("fatal_exception_seen true")
    return reasons


def app_down(sample: HealthSample) -> bool:
    """Whether the supervisor should climb the recovery ladder for this phone."""
    return bool(app_failure_reasons(sample))


def _heat_reasons(sample: HealthSample, limits: Limits, margin_c: float) -> list[str]:
    """Temperature limits broken, with temperature limits lowered by ``margin_c``."""
    reasons = []
    battery_max_c = limits.battery_temp_max_c - margin_c
    if sample.battery_temp_c is not None and sample.battery_temp_c > battery_max_c:
        reasons.append(f"battery_temp_c {_num(sample.battery_temp_c)} > {_num(battery_max_c)}")
    if sample.thermal_status is not None and sample.thermal_status > limits.thermal_status_max:
        reasons.append(f"thermal_status {sample.thermal_status} > {limits.thermal_status_max}")
    if limits.zone_temp_max_c is not None and sample.max_zone_temp_c is not None:
        zone_max_c = limits.zone_temp_max_c - margin_c
        if sample.max_zone_temp_c > zone_max_c:
            reasons.append(f"max_zone_temp_c {_num(sample.max_zone_temp_c)} > {_num(zone_max_c)}")
    return reasons


def _phone_reasons(sample: HealthSample, limits: Limits) -> list[str]:
    """Limits broken by the phone itself (power, storage, screen)."""
    reasons = []
    if sample.battery_pct is not None and sample.battery_pct < limits.battery_min_pct:
        reasons.append(f"battery_pct {sample.battery_pct} < {_num(limits.battery_min_pct)}")
    if sample.free_storage_mb is not None and sample.free_storage_mb < limits.storage_min_free_mb:
        reasons.append(
            f"free_storage_mb {_num(sample.free_storage_mb)} < {_num(limits.storage_min_free_mb)}"
        )
    if limits.require_plugged and sample.plugged is False:
        reasons.append("plugged false")
    if limits.require_screen_on and sample.screen_on is False:
        reasons.append("screen_on false")
    return reasons


def verdict(sample: HealthSample, limits: Limits) -> Verdict:
    """Judge one sample: pure, no clock, no I/O.

    Args:
        sample: the reading to judge.
        limits: the thresholds (from the config).

    Returns:
        The worst health any broken limit implies, with every reason, worst first.
    """
    if sample.adb_state != ADB_STATE_DEVICE:
        return Verdict(Condition.OFFLINE, (f"adb_state {sample.adb_state} != {ADB_STATE_DEVICE}",))
    unhealthy = app_failure_reasons(sample) + _phone_reasons(sample, limits)
    cooling = _heat_reasons(sample, limits, margin_c=0.0)
    if unhealthy:
        return Verdict(Condition.UNHEALTHY, tuple(unhealthy + cooling))
    if cooling:
        return Verdict(Condition.COOLING, tuple(cooling))
    return Verdict(Condition.GOOD)


def cool_enough(sample: HealthSample, limits: Limits) -> bool:
    """Whether a cooling phone may take work again (thermal gating with hysteresis).

    Stricter than :func:`verdict`: temperatures must be ``limits.cool_margin_c``
    below their limits, so a phone at 34.9 °C after cooling from 41 °C waits until
    33 °C instead of flapping between ``ready`` and ``cooling``. Unknown readings
    do not hold a phone back (a probe that cannot read a sensor would otherwise
    park the phone forever); the verdict of the next sweep still applies.

    Args:
        sample: the latest reading of a phone in ``cooling``.
        limits: the thresholds (from the config).

    Returns:
        True when no temperature limit, lowered by the margin, is broken.
    """
    return not _heat_reasons(sample, limits, margin_c=limits.cool_margin_c)
