"""Judge a :class:`~farm.health.sample.HealthSample` against :class:`Limits`, purely.

Every reading the sample's kind declares with a :class:`~farm.health.readings.Limit`
is judged against its threshold; the verdict names no reading itself.

A verdict names a :class:`Condition` and its reasons; the fleet turns it into a
state transition and a health (``good``/``bad``, LAVA's axis, kept apart from
the state) and logs the reason, e.g. ``ready -> cooling (max_zone_temp_c 72.4 > 70)``.

Conditions, worst first: ``offline`` (adb cannot reach the phone, nothing else is
meaningful), ``unhealthy`` (the app or the phone needs fixing), ``cooling`` (too
hot to give comparable benchmark figures; it only needs time), ``good``.
A reading that is ``None`` (the probe could not get it) is skipped, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from farm.config import HealthSettings
from farm.health.readings import Condition, Limit, declared, resolve_setting
from farm.health.sample import ADB_STATE_DEVICE, HealthSample

__all__ = ["Condition", "Limits", "Verdict", "app_down", "app_failure_reasons",
           "cool_enough", "verdict"]

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
        farm_settings: where other declared limits' thresholds are read: farm's
            settings (:meth:`of`), or ``{"health": <[health]>}``.
    """

    battery_temp_max_c: float = _DEFAULTS.battery_temp_max_c
    thermal_status_max: int = _DEFAULTS.thermal_status_max
    zone_temp_max_c: float | None = _DEFAULTS.zone_temp_max_c
    cool_margin_c: float = _DEFAULTS.cool_margin_c
    battery_min_pct: float = _DEFAULTS.battery_min_pct
    storage_min_free_mb: float = _DEFAULTS.storage_min_free_mb
    require_plugged: bool = _DEFAULTS.require_plugged
    require_screen_on: bool = _DEFAULTS.require_screen_on
    farm_settings: Any = field(default=None, compare=False)

    def threshold(self, limit: Limit) -> float | None:
        """The threshold of a declared limit; None disables it.

        A ``health.<field>`` setting that is a field here is read here (tests
        set those by hand); any other setting path is read from farm's settings
        (:meth:`of`), or, without them, from the ``[health]`` defaults.
        """
        if limit.setting is None:
            return limit.value
        section, _, name = limit.setting.partition(".")
        if section == "health" and name in _FIELDS:
            value = getattr(self, name)
            return None if value is None else float(value)
        root = self.farm_settings if self.farm_settings is not None else _DEFAULT_ROOT
        return resolve_setting(root, limit.setting)

    @classmethod
    def of(cls, settings: Any, **overrides: Any) -> Limits:
        """Limits from all of farm's settings: ``[health]`` and every kind's own section.

        Args:
            settings: farm's :class:`~farm.config.Settings` (a declared limit may
                name ``gpu.temp_max_c`` or ``health.reading_limits.<name>``).
            **overrides: as :meth:`from_settings`.
        """
        return cls.from_settings(settings.health, farm_settings=settings, **overrides)

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
            "farm_settings": {"health": settings},
        }
        return cls(**{**fields, **overrides})


_FIELDS = frozenset(name for name in Limits.__dataclass_fields__ if name != "farm_settings")
_DEFAULT_ROOT: Mapping[str, Any] = {"health": _DEFAULTS}


@dataclass(frozen=True)
class Verdict:
    """The judgement on one sample.

    Attributes:
        condition: the worst category any reason falls in.
        reasons: every limit the sample broke, worst category first, each as
            ``"<field> <value> <op> <limit>"``, e.g. ``"max_zone_temp_c 72.4 > 70"``.
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


def _limit_reasons(sample: HealthSample, limits: Limits, condition: Condition,
                   margin_c: float = 0.0) -> list[str]:
    """The declared limits of ``condition`` the sample breaks, in declaration order.

    Temperature limits (``Limit.margin``) are lowered by ``margin_c``.
    """
    reasons = []
    for reading in declared(sample.kind).readings:
        limit = reading.limit
        value = sample.value(reading.name)
        if limit is None or limit.condition is not condition or value is None:
            continue
        threshold = limits.threshold(limit)
        if threshold is None:
            continue
        if limit.margin:
            threshold -= margin_c
        if limit.broken(value, threshold):
            reasons.append(f"{reading.name} {_num(value)} {limit.op} {_num(threshold)}")
    return reasons


def _heat_reasons(sample: HealthSample, limits: Limits, margin_c: float) -> list[str]:
    """Cooling limits broken, with temperature limits lowered by ``margin_c``."""
    return _limit_reasons(sample, limits, Condition.COOLING, margin_c)


def _phone_reasons(sample: HealthSample, limits: Limits) -> list[str]:
    """Limits broken by the device itself (its unhealthy readings, power, screen)."""
    reasons = _limit_reasons(sample, limits, Condition.UNHEALTHY)
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
