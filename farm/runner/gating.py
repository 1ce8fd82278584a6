"""Thermal gating: wait until a phone is cool before every measured run.

A run starts only when no cooling limit the device's kind declares is broken
(:mod:`farm.health.kind_readings`): for a phone, its thermal status at most
``health.thermal_status_max`` (0, ``PowerManager.THERMAL_STATUS_NONE``) and its
battery at or under ``health.battery_temp_max_c`` (35 °C by default). The
check is :func:`farm.health.verdict.cool_enough` with no hysteresis margin: the
margin keeps the fleet's state machine from flapping, while the gate only asks
"may I measure now?". How long the gate waited is stored with the phone's
state at that moment (:class:`~farm.queue.records.SnapshotData`), so a figure
taken after a long cool-down can be told apart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from farm.clock import Clock
from farm.controllers import ANDROID, ControllerContext, DeviceController, controller_for
from farm.errors import PhoneFault
from farm.health.sample import HealthSample
from farm.health.verdict import Limits, cool_enough, verdict
from farm.queue.records import SnapshotData

if TYPE_CHECKING:
    from farm.config import Settings

__all__ = ["DEFAULT_POLL_S", "ControllerGate", "gate_limits", "snapshot_of", "wait_until_cool"]

log = structlog.get_logger(__name__)

DEFAULT_POLL_S = 5.0  # a phone cools over minutes; one adb round trip per poll


def gate_limits(limits: Limits) -> Limits:
    """The limits the gate applies: the health limits without hysteresis margin."""
    return replace(limits, cool_margin_c=0.0)


def snapshot_of(
    sample: HealthSample, facts: Mapping[str, Any], thermal_wait_s: float
) -> SnapshotData:
    """The device's state just before a measured run, as the store keeps it.

    ``battery`` holds the ``battery_*`` readings and ``plugged``; ``thermal``
    every other reading the device's kind declares (``thermal_status``,
    ``max_zone_temp_c``, a GPU's ``gpu_temp_c``, ...): results read both.
    """
    battery = {name: value for name, value in sample.readings.items()
               if name.startswith("battery_")}
    thermal = {name: value for name, value in sample.readings.items() if name not in battery}
    return SnapshotData(
        serial=sample.serial,
        at=sample.at,
        battery={**battery, "plugged": sample.plugged},
        thermal=thermal,
        facts=dict(facts),
        thermal_wait_s=thermal_wait_s,
    )


def wait_until_cool(
    read: Callable[[], HealthSample],
    limits: Limits,
    clock: Clock,
    *,
    deadline_s: float,
    poll_s: float = DEFAULT_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    facts: Mapping[str, Any] | None = None,
) -> SnapshotData:
    """Poll the phone's health until it is cool enough to measure.

    Args:
        read: takes one health sample of the phone (e.g. ``read_health`` bound
            to a serial); may raise PhoneFault.
        limits: the health limits (``Limits.of(settings)``);
            their hysteresis margin is ignored (see :func:`gate_limits`).
        clock: measures the wait (monotonic seconds).
        deadline_s: give up after this many seconds of waiting.
        poll_s: seconds between samples.
        sleep: waits ``poll_s``; tests pass a fake clock's ``advance``.
        facts: the phone's facts, stored with the snapshot.

    Returns:
        The snapshot of the sample that passed, with the wait in seconds.

    Raises:
        PhoneFault: still too hot after ``deadline_s`` (the job is retried on
            another phone), or the sample could not be read.
    """
    limits = gate_limits(limits)
    start_s = clock.monotonic()
    while True:
        waited_s = clock.monotonic() - start_s  # up to this reading, not through it
        sample = read()
        if cool_enough(sample, limits):
            if waited_s > 0:
                log.info("thermal_gate_passed", serial=sample.serial,
                         thermal_wait_s=round(waited_s, 1))
            return snapshot_of(sample, facts or {}, waited_s)
        reason = verdict(sample, limits).reason
        if waited_s >= deadline_s:
            raise PhoneFault(
                sample.serial, f"still too hot after {waited_s:.0f} s of thermal gating: {reason}"
            )
        log.info("thermal_gate_waiting", serial=sample.serial, reason=reason,
                 thermal_wait_s=round(waited_s, 1))
        sleep(min(poll_s, max(0.0, deadline_s - waited_s)) or poll_s)


class ControllerGate:
    """The attempt's gate: waits until each device is cool, read through its kind's controller.

    A controller is made once per kind, on first use (an Android one makes its
    own adb client of the configured server), so a gate never imports the
    code of a kind its devices are not.

    Args:
        settings: farm's settings (``jobs.thermal_wait_deadline_s``, the kinds' sections).
        limits: the health limits.
        clock: the clock.
        facts: each device's stored facts, by serial (kept with the snapshot).
        kinds: each device's kind, by serial; ``android`` where not given.
        sleep: waits between readings; tests pass a fake clock's ``advance``.
    """

    def __init__(self, settings: Settings, limits: Limits, clock: Clock,
                 facts: Mapping[str, Mapping[str, Any]], kinds: Mapping[str, str],
                 *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._sleep = sleep
        self._settings = settings
        self._limits = limits
        self._clock = clock
        self._facts = facts
        self._kinds = kinds
        self._lock = threading.Lock()
        self._controllers: dict[str, DeviceController] = {}

    def controller(self, serial: str) -> DeviceController:
        """The controller of the device's kind, made on first use.

        Raises:
            ConfigError: the kind is not registered in this farm.
        """
        kind = self._kinds.get(serial, ANDROID)
        with self._lock:
            if kind not in self._controllers:
                self._controllers[kind] = controller_for(kind, ControllerContext(self._settings))
            return self._controllers[kind]

    def __call__(self, serial: str) -> SnapshotData:
        """Wait until ``serial`` is cool; see :func:`wait_until_cool` (raises PhoneFault)."""
        controller = self.controller(serial)
        return wait_until_cool(
            lambda: controller.gating_reading(serial, self._clock.now()), self._limits,
            self._clock, deadline_s=self._settings.jobs.thermal_wait_deadline_s,
            facts=self._facts.get(serial, {}), sleep=self._sleep,
        )
