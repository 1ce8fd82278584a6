"""Heat and battery of a phone, advanced by a clock rather than by sleeping.

Each sensor follows a first-order lag toward its target::

    target_c = ambient_c + idle_offset_c + load * load_rise_c
    T(t + dt) = target_c + (T(t) - target_c) * exp(-dt / heat_time_constant_s)

``load`` (0..1) is set by the phone from what runs on it: the RPC process's CPU
use (psutil) while it serves a session. The battery drains at
``idle_drain_pct_per_h + load * load_drain_pct_per_h`` unless plugged, in
which case it charges. Thermal status is the number of the spec's hot
thresholds the hottest sensor has reached, i.e. AOSP ``Temperature.java``
THROTTLING_NONE (0) .. THROTTLING_SHUTDOWN (6). A hot phone runs slower:
:meth:`Physics.speed_factor` is the spec's ``thermal_speed`` at that status.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from farm.virtual.android.spec import PhoneSpec


class Physics:
    """Temperatures (°C) and battery charge (%) of one phone.

    Args:
        spec: the phone's constants.
        clock: monotonic seconds; injectable so tests move time by hand.
    """

    def __init__(self, spec: PhoneSpec, clock: Callable[[], float]) -> None:
        self.spec = spec
        self._clock = clock
        self._t = clock()
        self.load = 0.0
        self.plugged = spec.plugged
        self.battery_pct = spec.battery_pct
        self.temps_c = {s.name: spec.ambient_c + s.idle_offset_c for s in spec.sensors}

    def advance(self) -> None:
        """Integrate from the last update to now."""
        now = self._clock()
        dt = max(0.0, now - self._t)
        self._t = now
        if dt == 0:
            return
        decay = math.exp(-dt / self.spec.heat_time_constant_s)
        for sensor in self.spec.sensors:
            target = self.spec.ambient_c + sensor.idle_offset_c + self.load * sensor.load_rise_c
            self.temps_c[sensor.name] = target + (self.temps_c[sensor.name] - target) * decay
        hours = dt / 3600.0
        if self.plugged:
            self.battery_pct = min(100.0, self.battery_pct + self.spec.charge_pct_per_h * hours)
        else:
            rate = self.spec.idle_drain_pct_per_h + self.load * self.spec.load_drain_pct_per_h
            self.battery_pct = max(0.0, self.battery_pct - rate * hours)

    def set_load(self, load: float) -> None:
        """Set the CPU load (0..1) from now on."""
        self.advance()
        self.load = min(1.0, max(0.0, load))

    def heat(self, to_c: float) -> None:
        """Fault: the hottest sensor jumps to ``to_c``; the others rise in proportion."""
        self.advance()
        hottest = self.spec.hottest_sensor
        rise = to_c - self.temps_c[hottest.name]
        for sensor in self.spec.sensors:
            share = sensor.load_rise_c / hottest.load_rise_c if hottest.load_rise_c else 1.0
            self.temps_c[sensor.name] += rise * share

    def drain(self, to_pct: float) -> None:
        """Fault: the battery charge drops to ``to_pct``."""
        self.advance()
        self.battery_pct = min(100.0, max(0.0, to_pct))

    def set_plugged(self, plugged: bool) -> None:
        """Connect or remove USB power."""
        self.advance()
        self.plugged = plugged

    def temperatures(self) -> dict[str, float]:
        """Current temperature of every sensor, °C."""
        self.advance()
        return dict(self.temps_c)

    def status_of(self, temp_c: float) -> int:
        """Throttling status (0..6) of one temperature against the spec's thresholds."""
        return sum(1 for t in self.spec.throttling_thresholds_c if temp_c >= t)

    def thermal_status(self) -> int:
        """AOSP ``PowerManager.THERMAL_STATUS_*`` (0 none .. 6 shutdown)."""
        temps = self.temperatures()
        return self.status_of(temps[self.spec.hottest_sensor.name])

    def speed_factor(self) -> float:
        """Fraction of its speed the phone keeps at its thermal status, in (0, 1]."""
        speeds = self.spec.thermal_speed
        return speeds[min(self.thermal_status(), len(speeds) - 1)]

    def battery_celsius(self) -> float:
        """Battery temperature, °C (the BATTERY-type sensor, else skin)."""
        temps = self.temperatures()
        for sensor in self.spec.sensors:
            if sensor.hal_type == 2:
                return temps[sensor.name]
        return temps[self.spec.hottest_sensor.name]

    def level(self) -> int:
        """Battery level as ``dumpsys battery`` reports it, integer percent."""
        self.advance()
        return int(self.battery_pct)
