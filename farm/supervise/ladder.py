"""The recovery ladder as pure policy: what to do next for one phone's app.

``next_step(history, now, policy)`` reads the phone's recovery history and a
``now``; it has no clock, no I/O and no memory between calls, so the daemon can
call it on every sweep and tests can move time by passing another ``now``
(STYLE.md, "Keep the scheduler pure"). An actuator in the daemon applies the
step, verifies the app (process and tracker registration) within a deadline,
and appends the outcome to the history.

The ladder, mildest first::

    restart_app -> force_stop_relaunch -> reinstall -> reboot -> quarantine

History events:

- :class:`Failure`: a health sweep found the app gone (no process, not
  registered, dead probe, ``FATAL EXCEPTION``). The first failure after a
  success opens an *incident*; further failures during an open incident are
  the same incident seen again and do not count twice.
- :class:`Recovery`: a step was applied and verified. ``ok=False`` means the app
  is still gone: after ``attempts_per_rung`` failed tries of a step the ladder
  climbs to the next one. ``ok=True`` closes the incident and resets the climb
  and the backoff.
- :class:`Released`: an operator released the phone (``farmctl``): everything
  before it is forgotten, quarantine included.

Two ways to quarantine: the ladder runs out of rungs (nothing helped), or
``quarantine_after`` incidents opened within ``window_s`` (the app keeps
crashing even though each restart works). A success does not clear the second
count, or a crash-looping app would never be quarantined; only the window
(or a release) forgets incidents. An incident does not count when it was an
isolated crash: the first rung healed it at its first try and the app then
stayed up ``crash_loop_s`` (a crash a few minutes apart, each healed by a
relaunch, is not a phone going bad); a crash loop's incidents follow each
heal within seconds, and an incident the first rung did not heal at once
always counts. The open incident counts.

A device whose hold asks it to serve a key (a tuning attempt waits for its
server at the tracker) is not quarantined by the count while held: the
ladder's rungs go on healing it, and the count quarantines it at its next
incident after the hold (``next_step(..., held=True)``). A quarantine would
leave the attempt waiting for a server that never comes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from farm.backoff import backoff_s
from farm.config import SuperviseSettings
from farm.errors import ConfigError

#: The config's ``[supervise]`` defaults: the one place they are written.
_DEFAULTS = SuperviseSettings.model_validate({})


class Step(str, Enum):
    """One rung of the recovery ladder, mildest first."""

    RESTART_APP = "restart_app"  # am start the RPC activity again
    FORCE_STOP_RELAUNCH = "force_stop_relaunch"  # am force-stop, then am start
    REINSTALL = "reinstall"  # pm install -r the farm's signed APK, then launch
    REBOOT = "reboot"  # adb reboot, wait for the phone, provision again
    QUARANTINE = "quarantine"  # stop trying; an operator must release the phone


@dataclass(frozen=True)
class Failure:
    """A health sweep found the app gone.

    Attributes:
        at: when the sweep saw it.
        reason: the verdict's reasons, e.g. ``"app_running false"``.
    """

    at: datetime
    reason: str = ""


@dataclass(frozen=True)
class Recovery:
    """A ladder step was applied and its outcome verified.

    Attributes:
        at: when the outcome was known.
        step: the step applied. The actuator records ``Recovery(at,
            Step.QUARANTINE, ok=True)`` once it has quarantined the phone.
        ok: whether the app was back (running and registered) afterwards.
    """

    at: datetime
    step: Step
    ok: bool


@dataclass(frozen=True)
class Released:
    """An operator released the phone; the history before it no longer counts."""

    at: datetime


Event = Failure | Recovery | Released


@dataclass(frozen=True)
class Wait:
    """Nothing to do before ``until``; then call :func:`next_step` again."""

    until: datetime


@dataclass(frozen=True)
class LadderPolicy:
    """How the ladder climbs, backs off and quarantines; validated at construction.

    Attributes:
        rungs: the steps tried in order before quarantine.
        attempts_per_rung: failed tries of a step before climbing to the next.
        backoff_base_s: the wait after the first failed step, in seconds
            (:func:`farm.backoff.backoff_s`).
        backoff_max_s: the cap on any wait, in seconds.
        quarantine_after: incidents within ``window_s`` that quarantine the phone.
        window_s: how long an incident counts towards quarantine, in seconds.
        crash_loop_s: an incident healed by the first rung at its first try
            counts only if the next one opened within this many seconds of
            the heal (a crash loop), in seconds.
    """

    rungs: tuple[Step, ...] = (
        Step.RESTART_APP,
        Step.FORCE_STOP_RELAUNCH,
        Step.REINSTALL,
        Step.REBOOT,
    )
    attempts_per_rung: int = 2
    backoff_base_s: float = _DEFAULTS.backoff_base_s
    backoff_max_s: float = _DEFAULTS.backoff_max_s
    quarantine_after: int = _DEFAULTS.quarantine_after
    window_s: float = _DEFAULTS.quarantine_window_s
    crash_loop_s: float = _DEFAULTS.crash_loop_s
    _window: timedelta = field(init=False, repr=False, compare=False)
    _crash_loop: timedelta = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Check the policy once so :func:`next_step` needs no checks.

        Raises:
            ConfigError: a value is out of range, or the rungs are empty, repeat a
                step, or contain ``quarantine`` (it is always the last resort).
        """
        if not self.rungs or len(set(self.rungs)) != len(self.rungs):
            raise ConfigError("supervise.rungs", "must name each step at most once")
        if Step.QUARANTINE in self.rungs:
            raise ConfigError("supervise.rungs", "quarantine always follows the last rung")
        if self.attempts_per_rung < 1:
            raise ConfigError("supervise.attempts_per_rung", "must be at least 1")
        if not 0 < self.backoff_base_s <= self.backoff_max_s:
            raise ConfigError("supervise.backoff_base_s", "must be > 0 and <= backoff_max_s")
        if self.quarantine_after < 1:
            raise ConfigError("supervise.quarantine_after", "must be at least 1")
        if self.window_s <= 0:
            raise ConfigError("supervise.quarantine_window_s", "must be > 0")
        if self.crash_loop_s < 0:
            raise ConfigError("supervise.crash_loop_s", "must be >= 0")
        object.__setattr__(self, "_window", timedelta(seconds=self.window_s))
        object.__setattr__(self, "_crash_loop", timedelta(seconds=self.crash_loop_s))

    @classmethod
    def from_settings(cls, settings: SuperviseSettings, **overrides: Any) -> LadderPolicy:
        """Build the policy from the ``[supervise]`` section of farm's config.

        Args:
            settings: ``Settings.supervise``.
            **overrides: fields the config does not carry (``rungs``,
                ``attempts_per_rung``), or tests' changes.

        Raises:
            ConfigError: a value is out of range.
        """
        fields = {
            "backoff_base_s": settings.backoff_base_s,
            "backoff_max_s": settings.backoff_max_s,
            "quarantine_after": settings.quarantine_after,
            "window_s": settings.quarantine_window_s,
            "crash_loop_s": settings.crash_loop_s,
        }
        return cls(**{**fields, **overrides})


@dataclass
class _Incident:
    """The open incident, as read from the history."""

    opened_at: datetime
    last_at: datetime
    failed_by_step: dict[Step, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        """Failed steps since the incident opened."""
        return sum(self.failed_by_step.values())


def _since_release(history: Sequence[Event], now: datetime) -> list[Event]:
    """Events up to ``now`` in time order, after the last release."""
    events = sorted((e for e in history if e.at <= now), key=lambda e: e.at)
    for index in range(len(events) - 1, -1, -1):
        if isinstance(events[index], Released):
            return events[index + 1 :]
    return events


def quarantined(history: Sequence[Event]) -> bool:
    """Whether the ladder quarantined the phone since its last release; pure.

    The fleet manager uses it to tell an operator's release (the database says
    ``discovered`` while the ladder said quarantine) from a replug or a reboot,
    which must keep the history so a phone failing across them is quarantined.
    """
    for event in sorted(history, key=lambda e: e.at, reverse=True):
        if isinstance(event, Released):
            return False
        if isinstance(event, Recovery) and event.step is Step.QUARANTINE:
            return True
    return False


def incident_open(history: Sequence[Event], now: datetime) -> bool:
    """Whether a failure now would only be the open incident seen again; pure.

    True while the latest event since the last release is a failure or a
    failed step, or the phone is quarantined: the fleet then records no new
    failure (the ladder would not count it) and only asks :func:`next_step`.
    """
    events = _since_release(history, now)
    if any(isinstance(e, Recovery) and e.step is Step.QUARANTINE for e in events):
        return True
    return bool(events) and not (isinstance(events[-1], Recovery) and events[-1].ok)


def next_step(history: Sequence[Event], now: datetime, policy: LadderPolicy, *,
              held: bool = False) -> Step | Wait | None:
    """Decide the phone's next recovery action; pure.

    Args:
        history: the phone's events in any order; events after ``now`` are ignored.
        now: the decision time (timezone-aware like the events).
        policy: the ladder policy.
        held: a hold asks the device to serve a key: the incident count does
            not quarantine it now (the module docstring says why); running
            out of rungs still does.

    Returns:
        ``None`` when there is nothing to do (no open incident, or the phone is
        quarantined), a :class:`Wait` while backing off, else the :class:`Step` to
        apply now (``Step.QUARANTINE`` included).
    """
    incident: _Incident | None = None
    opened: list[datetime] = []  # the incidents that count toward quarantine
    healed: tuple[datetime, datetime] | None = None  # (opened, healed) of one healed at once
    for event in _since_release(history, now):
        if isinstance(event, Recovery) and event.step is Step.QUARANTINE:
            return None
        if isinstance(event, Recovery) and event.ok:
            if incident is not None:
                if not incident.failed_by_step and event.step is policy.rungs[0]:
                    healed = (incident.opened_at, event.at)
                else:
                    opened.append(incident.opened_at)
            incident = None
            continue
        if incident is None:
            # A failure, or a failed step with no failure recorded before it.
            incident = _Incident(opened_at=event.at, last_at=event.at)
            if healed is not None and event.at - healed[1] < policy._crash_loop:
                opened.append(healed[0])  # it crashed again soon after the heal: a loop
            healed = None
        if isinstance(event, Recovery):
            incident.failed_by_step[event.step] = incident.failed_by_step.get(event.step, 0) + 1
            incident.last_at = event.at
    if incident is None:
        return None
    opened.append(incident.opened_at)
    recent = [at for at in opened if now - at < policy._window]
    if len(recent) >= policy.quarantine_after and not held:
        return Step.QUARANTINE
    step = next(
        (s for s in policy.rungs if incident.failed_by_step.get(s, 0) < policy.attempts_per_rung),
        Step.QUARANTINE,
    )
    if step is Step.QUARANTINE:
        return step
    wait_s = backoff_s(incident.failed, policy.backoff_base_s, policy.backoff_max_s)
    until = incident.last_at + timedelta(seconds=wait_s)
    return Wait(until) if now < until else step
