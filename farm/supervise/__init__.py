"""Supervision: the pure recovery ladder and the systemd notifier.

``ladder.py`` decides (``next_step(history, now, policy)``); the daemon applies.
``systemd.py`` tells systemd the daemon is ready, alive and stopping.
``outage.py`` holds the dispatcher's claims while farmd's tracker is down or rejoined.
"""

from farm.supervise.ladder import (
    Event,
    Failure,
    LadderPolicy,
    Recovery,
    Released,
    Step,
    Wait,
    incident_open,
    next_step,
    quarantined,
)
from farm.supervise.systemd import SystemdNotifier

__all__ = [
    "Event",
    "Failure",
    "LadderPolicy",
    "Recovery",
    "Released",
    "Step",
    "SystemdNotifier",
    "Wait",
    "incident_open",
    "next_step",
    "quarantined",
]
