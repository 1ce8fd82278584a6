"""The recovery ladder's history, kept in the database as device event rows.

The ladder (:mod:`farm.supervise.ladder`) decides from a phone's history of
failures, recovery steps and releases. farmd keeps none of it in memory: each
ladder event is written as a device event row whose reason has one fixed shape,
and the history is read back from those rows before each decision. So a farmd
restart (systemd ``Restart=``) keeps the incident count, and a phone whose app
keeps crashing across restarts still reaches quarantine.

Reason shapes (``farmctl`` shows them among the phone's events)::

    recovery: failure (app_running false; registered false)
    recovery: restart_app ok
    recovery: reinstall failed
    recovery: released
    ready -> quarantined (...)        the quarantine itself, a state change

State changes carry two of them: into ``quarantined`` is the ladder's
quarantine, and out of it is a release (``farmctl release`` writes only that,
also while farmd is down).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from farm.queue.models import DeviceState
from farm.queue.records import EventRecord
from farm.supervise.ladder import Event, Failure, Recovery, Released, Step

__all__ = ["HISTORY_EVENTS", "events_to_history", "reason_of"]

#: How many of a phone's newest event rows are read to rebuild its history: an
#: incident writes about six (failure, two state and two health changes, the
#: step), so this covers far more incidents than a quarantine needs.
HISTORY_EVENTS = 500

_PREFIX = "recovery: "
_RE = re.compile(r"^recovery: (?:failure \((?P<why>.*)\)|(?P<step>[a-z_]+) (?P<ok>ok|failed)"
                 r"|(?P<released>released))$", re.DOTALL)


def reason_of(event: Event) -> str:
    """The device event reason that stores ``event``."""
    if isinstance(event, Failure):
        return f"{_PREFIX}failure ({event.reason})"
    if isinstance(event, Recovery):
        return f"{_PREFIX}{event.step.value} {'ok' if event.ok else 'failed'}"
    return f"{_PREFIX}released"


def _event_of(row: EventRecord) -> Event | None:
    quarantined = DeviceState.QUARANTINED.value
    if row.from_state == quarantined != row.to_state:
        return Released(row.at)
    if row.to_state == quarantined != row.from_state:
        return Recovery(row.at, Step.QUARANTINE, True)
    match = _RE.match(row.reason)
    if match is None:
        return None
    if match["released"]:
        return Released(row.at)
    if match["step"]:
        try:
            step = Step(match["step"])
        except ValueError:  # a step a newer farmd wrote: not this ladder's
            return None
        return Recovery(row.at, step, match["ok"] == "ok")
    return Failure(row.at, match["why"])


def events_to_history(rows: Iterable[EventRecord]) -> list[Event]:
    """The ladder history held by a phone's event rows, oldest first; pure.

    Args:
        rows: newest first, as :meth:`farm.queue.store.Store.device_events`
            returns them; rows of the same instant keep that order (reversed).
    """
    events = [e for e in map(_event_of, rows) if e is not None]
    events.reverse()
    return sorted(events, key=lambda e: e.at)
