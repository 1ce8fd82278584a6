"""Provisioning: a discovered device's facts, one-time setup and first serve, until ready.

``discovered -> provisioning -> ready`` (or ``unhealthy`` with the reason): the
device's controller reads its facts and prepares it, its server is started
under its desired key (:class:`~farm.fleet.serving.Serving`) and the device is
ready once the tracker lists it. Every move is a compare-and-set
(:meth:`~farm.fleet.ports.DeviceBook.settle`): a device unplugged meanwhile is
left offline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from farm.errors import FarmError, PhoneFault, UserFault
from farm.fleet.lifecycle import Move
from farm.fleet.ports import DeviceBook
from farm.fleet.workers import Closing
from farm.queue.models import DeviceHealth, DeviceState
from farm.supervise.ladder import Failure
from farm.tvm.probe import read_gpu_limits

if TYPE_CHECKING:
    from farm.fleet.serving import Serving
    from farm.queue.records import DeviceRecord
    from farm.tvm.tracker import TrackerSummary

__all__ = ["REGISTRATION_POLL_S", "ProvisionedFleet", "Provisioner"]

log = structlog.get_logger(__name__)

#: How often a device waiting for its server's registration looks at the tracker.
REGISTRATION_POLL_S = 0.5


class ProvisionedFleet(DeviceBook, Protocol):
    """What provisioning reads and asks of the fleet beyond its bookkeeping."""

    tracker_generation: int

    def set_health(self, record: DeviceRecord, health: DeviceHealth, reason: str) -> None:
        """Set the device's health with its reason, if it changes."""
        ...

    def tracker_summary(self, max_age_s: float = 0.0,
                        quiet: bool = False) -> TrackerSummary | None:
        """The tracker's summary (an answer at most ``max_age_s`` old), or None."""
        ...

    def wait_closing(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; True as soon as the fleet closes."""
        ...


class Provisioner:
    """Provisions the fleet's devices and (re)starts their servers.

    Args:
        fleet: the fleet's bookkeeping.
        serving: which key each device must serve, and whether it is listed.
        on_ready: called with the serial of each device that became ready (the app watch).
    """

    def __init__(self, fleet: ProvisionedFleet, serving: Serving,
                 on_ready: Callable[[str], None]) -> None:
        self.m = fleet
        self._serving = serving
        self._on_ready = on_ready

    def provision(self, serial: str) -> None:
        """discovered -> provisioning -> ready (or unhealthy, with the reason)."""
        m = self.m
        phone = m.runtime(serial)
        _, started = m.settle(serial, lambda r: Move(DeviceState.PROVISIONING, "provisioning")
                              if r.state is DeviceState.DISCOVERED else None)
        if started is None:
            return  # no longer discovered: someone else moved it since
        try:
            controller = m.controller(serial)
            facts = controller.facts(serial)
            m.store.upsert_device(serial, m.clock.now(), facts=facts)
            prepare = getattr(controller, "prepare", None)  # optional: one-time setup
            if prepare is not None:
                prepare(serial)
            phone.blocked = None
            self.launch(serial)
            if facts.get("has_opencl") or facts.get("has_vulkan"):
                self._record_gpu_limits(serial, facts)
        except UserFault as exc:
            phone.blocked = str(exc)
            log.error("provisioning_blocked", serial=serial, reason=str(exc))
            self._provisioned(serial, DeviceState.UNHEALTHY, f"provisioning failed: {exc}")
            return
        except PhoneFault as exc:
            log.warning("provisioning_failed", serial=serial, reason=str(exc))
            m.record(serial, Failure(m.clock.now(), f"provisioning: {exc}"))
            self._provisioned(serial, DeviceState.UNHEALTHY, f"provisioning failed: {exc}")
            return
        self._provisioned(serial, DeviceState.READY, "app registered at the tracker")

    def _record_gpu_limits(self, serial: str, record: Mapping[str, Any]) -> None:
        """Keep the phone's OpenCL/Vulkan limits with its facts (``facts["gpu_limits"]``).

        Read through a real RPC session once the app serves
        (:func:`farm.tvm.probe.read_gpu_limits`); the scheduler matches a GPU
        job's work-group size against them. A failed read leaves them out (the
        scheduler then assumes the 256 threads every phone GPU allows): it says
        nothing the health sweep's own probe would not.
        """
        o = self.m.options
        try:
            limits = read_gpu_limits(*o.tracker, self.m.runtime(serial).key,
                                     timeout_s=o.probe_timeout_s, serial=serial)
        except FarmError as exc:
            log.warning("gpu_limits_unread", serial=serial, reason=str(exc))
            return
        self.m.store.upsert_device(serial, self.m.clock.now(),
                                   facts={**record, "gpu_limits": limits})
        log.info("gpu_limits_read", serial=serial, apis=sorted(limits))

    def _provisioned(self, serial: str, to_state: DeviceState, reason: str) -> None:
        """End provisioning, if the phone is still provisioning (not unplugged since)."""
        record, move = self.m.settle(serial, lambda r: Move(to_state, reason)
                                     if r.state is DeviceState.PROVISIONING else None)
        if record is not None and move is not None and to_state is DeviceState.UNHEALTHY:
            self.m.set_health(record, DeviceHealth.BAD, reason)
        if move is not None and to_state is DeviceState.READY:
            self._on_ready(serial)

    def launch(self, serial: str) -> None:
        """(Re)start the device's RPC server under its desired key and wait for its registration.

        The desired key is the one its hold asks for, else its own
        (:class:`~farm.fleet.serving.Serving`).

        Raises:
            PhoneFault: a step failed, or the server did not register in time.
        """
        record = self.m.store.get_device(serial)
        phone = self.m.runtime(serial)
        if record is not None:
            phone.key = self._serving.desired(record)
        phone.served_generation = self.m.tracker_generation
        self.m.controller(serial).serve(serial, phone.key)
        self.wait_registered(serial)

    def wait_registered(self, serial: str) -> None:
        """Block until the phone's key is at the tracker, then record it as the key it serves.

        A key several devices serve (a job's) counts one server per device
        (:meth:`~farm.fleet.serving.Serving.registered`).

        Raises:
            PhoneFault: not within ``registration_deadline_s``.
            Closing: the fleet closes meanwhile.
        """
        m = self.m
        phone = m.runtime(serial)
        key = phone.key
        deadline = m.clock.monotonic() + m.options.registration_deadline_s
        while m.clock.monotonic() < deadline:
            generation = m.tracker_generation  # of the tracker the summary below comes from
            found = m.tracker_summary(max_age_s=REGISTRATION_POLL_S, quiet=True)
            if self._serving.registered(serial, found):
                log.info("app_registered", serial=serial, tracker_key=key)
                phone.registered_generation = generation
                m.store.set_serving_key(serial, key)
                return
            if m.wait_closing(REGISTRATION_POLL_S):
                raise Closing(serial)
        raise PhoneFault(serial, f"app did not register as {key!r} within "
                                 f"{m.options.registration_deadline_s:g} s")
