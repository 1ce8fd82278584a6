"""Which state a phone moves to on an observation: pure decisions.

States are :class:`farm.queue.models.DeviceState`; health is a separate axis
(LAVA's scheduler keeps them apart, and so does farm). Every decision carries
the reason that goes into the device's event row, e.g.
``ready -> cooling (max_zone_temp_c 72.4 > 70)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from farm.health.verdict import Condition, Verdict
from farm.queue.models import DeviceHealth, DeviceState

ADB_DEVICE = "device"

# States in which the phone belongs to farm's health loop.
WATCHED = frozenset({DeviceState.READY, DeviceState.COOLING, DeviceState.UNHEALTHY})


@dataclass(frozen=True)
class Move:
    """Go to ``to_state`` for ``reason``."""

    to_state: DeviceState
    reason: str


def on_adb_state(current: DeviceState | None, adb_state: str) -> Move | None:
    """A settled adb state change (``device``, ``offline``, ``unauthorized``, ``absent``).

    A phone that is back as ``device`` is provisioned again from the start,
    since a reboot or replug may have lost the app, its tunnels and its prefs.
    A quarantined phone stays quarantined whatever adb says: only a person
    releases it.
    """
    if current is DeviceState.QUARANTINED:
        return None
    if adb_state == ADB_DEVICE:
        if current in (None, DeviceState.OFFLINE):
            return Move(DeviceState.DISCOVERED, "adb state device")
        return None
    if current is DeviceState.OFFLINE:
        return None
    hint = " (accept the RSA key prompt on the phone)" if adb_state == "unauthorized" else ""
    return Move(DeviceState.OFFLINE, f"adb state {adb_state}{hint}")


def on_verdict(current: DeviceState, verdict: Verdict, *, cool: bool = True) -> Move | None:
    """A health sweep's verdict on a phone in the health loop.

    ``cool`` is :func:`farm.health.verdict.cool_enough` for the same sample: a
    cooling phone returns to ready only when it is a margin below its limits,
    so a phone near the limit does not flap between ready and cooling.

    A busy phone's verdict moves nothing: the attempt on it fails by itself if
    the phone dies, and a hot phone finishes its current measurement (thermal
    gating happens before each run).
    """
    if current not in WATCHED:
        return None
    reason = "; ".join(verdict.reasons)
    if verdict.condition is Condition.GOOD:
        if current is DeviceState.READY:
            return None
        if current is DeviceState.COOLING and not cool:
            return None
        return Move(DeviceState.READY, reason or "healthy")
    if verdict.condition is Condition.COOLING:
        if current is DeviceState.COOLING:
            return None
        return Move(DeviceState.COOLING, reason or "too hot")
    if verdict.condition is Condition.UNHEALTHY:
        if current is DeviceState.UNHEALTHY:
            return None
        return Move(DeviceState.UNHEALTHY, reason or "unhealthy")
    return Move(DeviceState.OFFLINE, reason or "offline")


def health_of(verdict: Verdict) -> tuple[DeviceHealth, str] | None:
    """The phone's health (LAVA's ``good``/``bad``) as a verdict shows it, with the reason.

    ``cooling`` is good health: the phone works and only needs time. An
    ``offline`` verdict says nothing about the phone (None: keep its health).
    """
    if verdict.condition is Condition.OFFLINE:
        return None
    if verdict.condition is Condition.UNHEALTHY:
        return DeviceHealth.BAD, verdict.reason
    if verdict.condition is Condition.COOLING:
        return DeviceHealth.GOOD, f"cooling: {verdict.reason}"
    return DeviceHealth.GOOD, "healthy"
