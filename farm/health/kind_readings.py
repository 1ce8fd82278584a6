"""The readings each built-in device kind declares: the one place each kind's readings live.

Each kind's probe parses its output into a raw value (:class:`AndroidRaw`,
:class:`BoardRaw`, NVML's :class:`~farm.gpu.nvml.GpuReading`) and asks its
declaration for the readings (:meth:`~farm.health.readings.Declared.read`).
A new reading of a kind is one :class:`~farm.health.readings.Reading` below
(its name with its unit, the unit as shown, a label for people, where it comes from):
the store, the verdict, the thermal gate, the CLI, the API and the dashboard
take it from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from farm.device.battery import BatteryState
from farm.device.storage import Filesystem, free_bytes_for
from farm.device.thermal import THERMAL_STATUS_NAMES, ThermalState
from farm.gpu.nvml import GpuReading
from farm.health.readings import Condition, Declared, Limit, Reading

__all__ = [
    "ANDROID_READINGS", "BOARD_READINGS", "BUILT_IN", "GPU_READINGS", "AndroidRaw", "BoardRaw",
]

_MIB = 2**20
_KIB_PER_MIB = 1024

# AOSP hardware/interfaces/thermal/2.0/types.hal, TemperatureType: CPU = 0, SKIN = 3.
_TYPE_CPU = 0
_TYPE_SKIN = 3


def _cool_below(setting: str, *, margin: bool = True) -> Limit:
    return Limit("max", Condition.COOLING, setting, margin=margin)


# -- Android ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AndroidRaw:
    """One sweep's parsed ``dumpsys`` and ``df`` sections of a phone; None where unreadable."""

    battery: BatteryState | None = None
    thermal: ThermalState | None = None
    filesystems: Sequence[Filesystem] | None = None


def _zone_max_c(raw: AndroidRaw) -> float | None:
    if raw.thermal is None:
        return None
    return max((t.value_c for t in raw.thermal.temperatures if t.is_temperature), default=None)


ANDROID_READINGS: Declared[AndroidRaw] = Declared("android", (
    Reading("battery_pct", "%", "charge level (dumpsys battery level/scale)",
            lambda raw: None if raw.battery is None else round(raw.battery.level_pct),
            Limit("min", Condition.UNHEALTHY, "health.battery_min_pct"), label="battery",
            own_key=True),
    Reading("battery_temp_c", "°C", "battery temperature (dumpsys battery, tenths of °C)",
            lambda raw: None if raw.battery is None else raw.battery.temp_c,
            _cool_below("health.battery_temp_max_c"), label="battery temp",
            with_results=True, own_key=True, series="farm_phone_battery_temp_celsius"),
    Reading("thermal_status", "", "Android thermal status (PowerManager.THERMAL_STATUS_*, "
            "0 none .. 6 shutdown; dumpsys thermalservice)",
            lambda raw: None if raw.thermal is None else raw.thermal.thermal_status,
            _cool_below("health.thermal_status_max", margin=False), label="thermal status",
            with_results=True, own_key=True, series="farm_phone_thermal_status",
            levels=THERMAL_STATUS_NAMES),
    Reading("max_zone_temp_c", "°C", "hottest temperature sensor of the thermal HAL",
            _zone_max_c, _cool_below("health.zone_temp_max_c"), label="hottest zone"),
    Reading("cpu_temp_c", "°C", "hottest CPU sensor (thermal HAL type CPU)",
            lambda raw: None if raw.thermal is None else raw.thermal.max_temp_c(_TYPE_CPU),
            label="CPU temp"),
    Reading("skin_temp_c", "°C", "hottest skin sensor (thermal HAL type SKIN)",
            lambda raw: None if raw.thermal is None else raw.thermal.max_temp_c(_TYPE_SKIN),
            label="skin temp"),
    Reading("free_storage_mb", "MiB", "free space on /data (df -k)",
            lambda raw: (None if not raw.filesystems
                         else free_bytes_for(raw.filesystems, "/data") / _MIB),
            Limit("min", Condition.UNHEALTHY, "health.storage_min_free_mb"), label="free storage"),
))


# -- Linux boards -----------------------------------------------------------------------


@dataclass(frozen=True)
class BoardRaw:
    """One board health read, parsed (:func:`farm.controllers.board.reading_from_output`).

    Attributes:
        zone_temps_c: every ``/sys/class/thermal`` zone's temperature, °C.
        load: ``/proc/loadavg``'s 1, 5 and 15 minute load averages.
        meminfo_kb: ``/proc/meminfo`` in KiB by key (``MemAvailable``).
        filesystems: ``df -k`` of the work folder.
    """

    zone_temps_c: Sequence[float] = ()
    load: Sequence[float] = ()
    meminfo_kb: Mapping[str, int] = field(default_factory=dict)
    filesystems: Sequence[Filesystem] = ()


BOARD_READINGS: Declared[BoardRaw] = Declared("board", (
    Reading("max_zone_temp_c", "°C", "hottest /sys/class/thermal zone (the CPU's on most boards)",
            lambda raw: max(raw.zone_temps_c, default=None), _cool_below("health.zone_temp_max_c"),
            label="hottest zone"),
    Reading("load_1m", "", "1-minute load average (/proc/loadavg)",
            lambda raw: raw.load[0] if raw.load else None, label="load (1 min)"),
    Reading("mem_available_mb", "MiB", "memory available without swapping (/proc/meminfo)",
            lambda raw: (raw.meminfo_kb["MemAvailable"] / _KIB_PER_MIB
                         if "MemAvailable" in raw.meminfo_kb else None),
            label="memory available"),
    Reading("free_storage_mb", "MiB", "free space in the board's work folder (df -k)",
            lambda raw: raw.filesystems[-1].available_kb / _KIB_PER_MIB
            if raw.filesystems else None,
            Limit("min", Condition.UNHEALTHY, "health.storage_min_free_mb"), label="free storage"),
))


# -- NVIDIA GPUs ------------------------------------------------------------------------


GPU_READINGS: Declared[GpuReading] = Declared("gpu", (
    Reading("gpu_temp_c", "°C", "GPU core temperature (NVML)",
            lambda gpu: gpu.temp_c, _cool_below("gpu.temp_max_c"), label="GPU temp"),
    # A maximum of 0 by definition: any heat or power-brake clock event skews a run.
    Reading("heat_reasons", "", "clock event reasons in force from heat or power "
            "(NVML; farm.gpu.nvml.HEAT_REASONS)",
            lambda gpu: len(gpu.heat_reasons), Limit("max", Condition.COOLING, value=0),
            label="heat reasons"),
    Reading("sm_clock_mhz", "MHz", "current SM clock (NVML)", lambda gpu: gpu.sm_clock_mhz,
            label="SM clock"),
    Reading("memory_used_mb", "MiB", "device memory in use (NVML)",
            lambda gpu: gpu.memory_used_mb, label="memory used"),
    Reading("power_w", "W", "board power draw (NVML)", lambda gpu: gpu.power_w, label="power"),
    Reading("utilization_pct", "%", "GPU busy over NVML's last sample period",
            lambda gpu: gpu.utilization_pct, label="utilization"),
))


#: Every built-in kind's declaration; :func:`farm.composition.install` declares them.
BUILT_IN: tuple[Declared[Any], ...] = (ANDROID_READINGS, BOARD_READINGS, GPU_READINGS)
