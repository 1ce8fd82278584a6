"""Session probes: a tiny real RPC session to an idle ready phone, on its own thread.

The tracker keeps listing a server that froze or vanished without closing its
socket, so every Nth sweep (``health.probe_every_sweeps``) opens a session to
each ready phone whose app looks up. A frozen app holds its probe for the whole
timeout; the probe therefore runs on a thread of its own, one per phone at a
time, and the sweep does not wait for it.

Each probe is a child process that imports TVM (about 1 s of CPU) and makes the
phone's server fork a session, so at most one probe per CPU core runs at once;
the others wait their turn before their deadline starts. 64 probes started
together on a 2-core host starved every process: 20 of them failed a healthy
phone, and the sweep beside them took 46 s instead of 2.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import structlog

from farm.errors import FarmError, InfraFault, NoFreeServer
from farm.health.sample import HealthSample
from farm.queue.models import DeviceState
from farm.tvm.probe import probe_session

if TYPE_CHECKING:
    from farm.clock import Clock
    from farm.controllers.options import FleetOptions
    from farm.controllers.phone import PhoneRuntime

__all__ = ["ProbedFleet", "Prober"]

log = structlog.get_logger(__name__)


class ProbedFleet(Protocol):
    """What the prober reads and asks of the fleet (the manager is one)."""

    options: FleetOptions
    clock: Clock

    @property
    def closing(self) -> bool:
        """Whether farmd stops (a probe's verdict is then dropped)."""
        ...

    def runtime(self, serial: str, kind: str | None = None) -> PhoneRuntime:
        """The device's in-memory state."""
        ...

    def state(self, serial: str) -> DeviceState | None:
        """The device's stored state."""
        ...

    def start_task(self, label: str, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a thread of its own."""
        ...

    def judge(self, serial: str, sample: HealthSample) -> None:
        """Move the device as the sample's verdict says."""
        ...


class Prober:
    """Probes the fleet's ready phones and judges those that fail."""

    def __init__(self, fleet: ProbedFleet) -> None:
        self.m = fleet
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(os.cpu_count() or 1)

    def start(self, serial: str, sample: HealthSample) -> None:
        """Start a session probe of a ready phone unless one already runs for it."""
        phone = self.m.runtime(serial)
        if self.m.state(serial) is not DeviceState.READY:
            return
        with self._lock:
            if phone.probing or self.m.closing:
                return
            phone.probing = True

        def run() -> None:
            try:
                # Judge only a phone still ready: one claimed, unplugged or being
                # recovered while the probe ran failed it for that reason.
                with self._slots:
                    served = None if self.m.closing else self.probe(serial)
                if (served is False and not self.m.closing
                        and self.m.state(serial) is DeviceState.READY):
                    self.m.judge(serial, replace(sample, at=self.m.clock.now(), probe_ok=False))
            except Exception:  # a bug: keep the manager alive, say where
                log.exception("fleet_task_crashed", serial=serial, task="probe")
            finally:
                phone.probing = False

        self.m.start_task(f"probe-{serial}", run)

    def probe(self, serial: str) -> bool | None:
        """A tiny real session to the phone through the tracker.

        Returns:
            True when the session served, False when the phone failed it, None
            when that says nothing about the phone: the tracker is unreachable,
            or it gave no ticket (a job holds the session).
        """
        o = self.m.options
        try:
            probe_session(*o.tracker, self.m.runtime(serial).key, timeout_s=o.probe_timeout_s,
                          serial=serial)
            return True
        except (InfraFault, NoFreeServer) as exc:
            log.warning("session_probe_skipped", serial=serial, reason=str(exc))
            return None
        except FarmError as exc:
            log.warning("session_probe_failed", serial=serial, reason=str(exc))
            return False
