"""Desired and observed tracker keys: each device serves what its hold asks (reconcile).

As Kubernetes controllers do, the fleet compares two records and acts on the
difference, never on a sequence of commands:

- desired: ``devices.serve_key``, the key the device's hold asks it to serve.
  A tuning attempt sets its job's key on each device it holds
  (:meth:`farm.queue.store.Store.set_serve_key`, a compare-and-set on the hold)
  and sets None (the device's own key) again before it times each phone; the
  store clears it whenever the device leaves ``busy``, so a hold that ends in
  any way (released, reclaimed after a farmd crash) asks for the own key again.
- observed: the key farmd last started the device's server under
  (:attr:`farm.controllers.phone.PhoneRuntime.key`, also written to
  ``devices.serving_key`` once the server registered), and the generation of
  farmd's tracker it was started toward (``served_generation``). A restart of
  farmd's tracker makes every device's observed state stale
  (:meth:`farm.fleet.manager.FleetManager.tracker_restarted`): the servers
  registered with the dead tracker, and the stock app registers again only
  after a 300 s accept timeout. Reconcile is then the one owner of starting
  them again, as of any other serve: two owners (a relaunch of its own beside
  reconcile) could each restart one phone's server.

:meth:`Serving.reconcile` runs on every sweep and on every tracker look between
sweeps (``health.held_interval_s``, 1 s) and serves the desired key through the
device's controller (:meth:`~farm.controllers.base.DeviceController.serve`) on
the device's task thread. A server that dies while its hold asks for a key is
an ordinary incident for the recovery ladder (:func:`farm.fleet.recovery.healable`):
the app watch and the sweep see it, and the ladder's rung restarts it under
the key it serves.

A device handed back ``ready`` before its server is back on its own key (a
tuning attempt that failed asks for the own key and ends without waiting) is
claimable while reconcile restarts it: the next job's attempt would meet the
restart (its checks or session lost: a try spent on a restart farmd made). So
the dispatcher waits while such a device is between keys
(:meth:`Serving.between_keys`, the outage gate's ``unjoined`` pattern): the job
stays queued, and reconcile stays the one owner of the restart.

Several devices serve one job key; TVM's tracker lists one server entry per
registered server (apache/tvm ``python/tvm/rpc/tracker.py``, ``server_info``),
so "registered" for a shared key means "as many servers listed under it as
devices of this host serve it" (:meth:`Serving.registered`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

import structlog

from farm.errors import FarmError
from farm.fleet.lifecycle import WATCHED, Move
from farm.fleet.ports import DeviceBook
from farm.queue.models import DeviceState
from farm.queue.records import DeviceRecord
from farm.supervise.ladder import Failure, incident_open

if TYPE_CHECKING:
    import threading

    from farm.controllers.base import DeviceController
    from farm.controllers.phone import PhoneRuntime
    from farm.tvm.tracker import TrackerSummary

__all__ = ["SERVED", "ServedFleet", "Serving"]

log = structlog.get_logger(__name__)

#: States in which a device serves a key farmd keeps it serving.
SERVED = WATCHED | {DeviceState.BUSY}
#: States a failed serve takes out of the dispatcher's reach, as an app death does.
_TAKE_OUT = frozenset({DeviceState.READY, DeviceState.COOLING})


class ServedFleet(DeviceBook, Protocol):
    """What serving reads and asks of the fleet beyond its bookkeeping."""

    controllers: dict[str, DeviceController]
    phones: dict[str, PhoneRuntime]
    tracker_generation: int
    on_ready: Callable[[], None] | None

    @property
    def phones_lock(self) -> threading.Lock:
        """Guards :attr:`phones`."""
        ...

    def submit(self, serial: str, task: Callable[[str], None]) -> bool:
        """Run ``task(serial)`` on its own thread unless a slow task runs for the device."""
        ...

    def own_devices(self) -> list[DeviceRecord]:
        """The devices this host runs."""
        ...

    def in_session(self, serial: str) -> bool:
        """Whether a client on this host holds a session with the device's server now."""
        ...

    def wait_registered(self, serial: str) -> None:
        """Block until the device's key is at the tracker.

        Raises:
            PhoneFault: not within the registration deadline.
        """
        ...


class Serving:
    """Serves each device's desired key; see the module docstring.

    Args:
        fleet: the fleet's devices, their runtime state and tasks.
        recover: climbs the recovery ladder for a device whose serve failed.
    """

    def __init__(self, fleet: ServedFleet, recover: Callable[[str], None]) -> None:
        self.m = fleet
        self._recover = recover

    def own_key(self, serial: str) -> str:
        """The key the device serves when no hold asks for another (its controller's)."""
        phone = self.m.runtime(serial)
        controller = self.m.controllers.get(phone.kind)
        return controller.tracker_key(serial) if controller is not None else phone.key

    def desired(self, record: DeviceRecord) -> str:
        """The key ``record``'s hold asks for, else the device's own."""
        return record.serve_key or self.own_key(record.serial)

    def reconcile(self, devices: Iterable[DeviceRecord]) -> list[str]:
        """Start serving the desired key on each device that serves another one.

        Args:
            devices: this host's devices as just read from the store.

        Returns:
            The serials whose serve task started now.
        """
        started = []
        for record in devices:
            if record.state not in SERVED or record.kind not in self.m.controllers:
                continue
            phone = self.m.runtime(record.serial)
            if phone.busy_task or phone.blocked is not None:
                continue  # a provisioning or a recovery runs: it ends on the key it read
            stale = (phone.key != self.desired(record)
                     or phone.served_generation < self.m.tracker_generation)
            if stale and self.m.submit(record.serial, self.serve):
                started.append(record.serial)
        return started

    def between_keys(self, devices: Iterable[DeviceRecord]) -> list[str]:
        """The ready devices whose server is not yet on the key they must serve, or moving to it.

        A device a person must fix (``blocked``) is not counted, nor one whose
        serve failed (it is ``unhealthy`` then), so one broken device does not
        hold the farm.

        Args:
            devices: this host's devices as just read from the store.
        """
        waiting = []
        for record in devices:
            if record.state is not DeviceState.READY or record.kind not in self.m.controllers:
                continue
            phone = self.m.runtime(record.serial)
            if phone.blocked is None and (phone.moving_key or phone.key != self.desired(record)):
                waiting.append(record.serial)
        return waiting

    def serve(self, serial: str) -> None:
        """(Task) serve the device's desired key, read again now; a failure is an incident.

        A server that does not come up under the key opens an incident (unless
        one is open) and the ladder's next step runs at once, under that key.
        A busy device that already serves the key and whose client holds a
        session now (only a new tracker made it stale) keeps its server: the
        stock app registers again with the tracker at its address when the
        session ends, as after every session, and a restart would cut the
        job's session (``link lost``, a lost try).
        """
        record = self.m.store.get_device(serial)
        if record is None or record.state not in SERVED:
            return
        key = self.desired(record)
        phone = self.m.runtime(serial)
        generation = self.m.tracker_generation
        if phone.key == key:
            if phone.served_generation >= generation:
                return
            if record.state is DeviceState.BUSY and self.m.in_session(serial):
                log.info("device_serve_kept_session", serial=serial, tracker_key=key)
                phone.served_generation = phone.registered_generation = generation
                return
        log.info("device_serve", serial=serial, tracker_key=key, was=phone.key,
                 state=record.state.value, tracker_generation=generation)
        phone.key = key  # from now on its rungs restart it under this key
        phone.served_generation = generation
        phone.moving_key = True
        try:
            self.m.controller(serial).serve(serial, key)
            self.m.wait_registered(serial)
        except FarmError as exc:
            phone.moving_key = False
            reason = f"serving {key} failed: {exc}"
            log.warning("device_serve_failed", serial=serial, tracker_key=key, reason=str(exc))
            now = self.m.clock.now()
            if not incident_open(self.m.history(serial), now):
                self.m.record(serial, Failure(now, reason))
            self.m.settle(serial, lambda r: Move(DeviceState.UNHEALTHY, reason)
                          if r.state in _TAKE_OUT else None)
            self._recover(serial)
            return
        finally:
            phone.moving_key = False
        if self.m.on_ready is not None:  # a gate may wait for this phone (farm.supervise.outage)
            self.m.on_ready()

    def sharing(self, key: str) -> int:
        """How many of this host's devices serve ``key`` now (a job's key: its devices here)."""
        with self.m.phones_lock:
            return sum(1 for phone in self.m.phones.values() if phone.key == key)

    def registered(self, serial: str, found: TrackerSummary | None) -> bool:
        """Whether ``serial``'s server is listed: one server per device of this host on its key.

        With a shared key the tracker cannot say which device a server is, so a
        device that came back counts when the listed servers cover every device
        of the key but those that are being healed themselves.
        """
        if found is None:
            return False
        key = self.m.runtime(serial).key
        with self.m.phones_lock:
            others = sum(1 for s, phone in self.m.phones.items()
                         if s != serial and phone.key == key and not phone.busy_task)
        return len(found.servers_for(key)) >= 1 + others

    def unjoined(self) -> int:
        """How many of this host's devices the new tracker does not know yet, or soon won't.

        Those whose server was started toward an older tracker (the fleet
        serves them next) and those whose serve toward this one runs now; a
        device whose serve failed (unhealthy, no job goes there) or that a
        person must fix (``blocked``) is not counted, so one broken phone does
        not hold the farm (:class:`farm.supervise.outage.TrackerGate`).
        """
        generation = self.m.tracker_generation
        left = 0
        for device in self.m.own_devices():
            if device.kind not in self.m.controllers or device.state not in SERVED:
                continue
            phone = self.m.runtime(device.serial)
            if phone.blocked is None and (
                    phone.served_generation < generation
                    or (phone.busy_task and phone.registered_generation < generation)):
                left += 1
        return left
