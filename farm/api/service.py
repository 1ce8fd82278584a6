"""What farmctl and the HTTP API do with the queue, with the caller's rights: one place.

:class:`FarmService` implements :class:`farm.api.interface.Queue` (the
methods, their types and errors, listed once) over the database. The API's
routes are thin shells over it (one service per request, for the token's
caller); the local ``farmctl`` uses one with ``caller=None`` (whoever can write
the database may do anything); ``farmctl --server`` uses
:class:`farm.client.remote.RemoteService`, which implements the same interface
and returns the same frozen views, read back from the routes' JSON. So every
command has one code path, whichever way it reaches the queue. The methods
beyond the interface (uploads, a phone's events, one phone's outputs) are the
routes' own.

Rights: any token reads everything and enqueues (its owner is stored on the
job, ``jobs.owner``); a job is cancelled by its owner or an operator; drain,
undrain and release need an operator. Refusals are :mod:`farm.api.errors`.

This module imports no FastAPI: the local CLI loads it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from farm import controllers
from farm.api.errors import Conflict, Forbidden, NotFound
from farm.api.interface import Queue
from farm.api.reserving import ReservationMethods
from farm.api.submitting import Submitted, submit_spec
from farm.clock import Clock
from farm.config import Settings
from farm.errors import UserFault
from farm.jobs.model_store import StoredModel, put_model, store_spec_models
from farm.kinds import KINDS
from farm.kinds.model_inputs import InputsBlob, outputs_by_serial, put_inputs, store_inputs
from farm.queue.hosts import HostRecord
from farm.queue.models import AttemptState, DeviceState, JobState
from farm.queue.records import AttemptView, DeviceRecord, EventRecord, JobView, ResultView
from farm.queue.store import Store
from farm.queue.tokens import Caller
from farm.queue.waiting import wait_reasons
from farm.results.rows import SampleRow, sample_rows
from farm.tuning import TuneCounters

__all__ = ["FarmService", "Queue", "Submitted"]


class FarmService(ReservationMethods, Queue):
    """The queue as a caller sees it, over the database (:class:`~farm.api.interface.Queue`).

    Args:
        store: the queue database.
        settings: farm's settings (the data folder, job time limits).
        clock: the time source.
        caller: the API token's owner; None for the local CLI (every right).
        wake: asks farmd's dispatcher for a tick after an enqueue; None: nobody to wake.
        local_owner: without a caller, who the jobs queued here belong to (farmctl
            passes the login name, so the dashboard's owner column is not empty).
    """

    def __init__(self, store: Store, settings: Settings, clock: Clock,
                 caller: Caller | None = None, wake: Callable[[], object] | None = None,
                 local_owner: str | None = None) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.caller = caller
        self.wake = wake
        self.local_owner = local_owner

    # --- rights ---------------------------------------------------------------------

    def _operator(self, what: str) -> None:
        """Raises Forbidden unless the caller may act on any phone or job."""
        if self.caller is not None and not self.caller.operator:
            raise Forbidden(f"{what} needs an operator token ({self.caller.owner}'s is not one)")

    @property
    def owner(self) -> str | None:
        """Who new jobs belong to: the token's owner, else ``local_owner``."""
        return self.local_owner if self.caller is None else self.caller.owner

    # --- devices ----------------------------------------------------------------------

    def devices(self) -> list[DeviceRecord]:
        """Every phone by serial, from the store."""
        return self.store.list_devices()

    def device(self, serial: str) -> DeviceRecord:
        """One phone, from the store."""
        record = self.store.get_device(serial)
        if record is None:
            raise NotFound(f"no phone {serial!r} is known (see farmctl devices)")
        return record

    def device_events(self, serial: str, limit: int = 50) -> list[EventRecord]:
        """A phone's state changes and recovery steps, newest first."""
        return self.store.device_events(serial, limit=limit)

    def dead_hosts(self) -> frozenset[str]:
        """The dead farmd hosts: heartbeats older than ``hosts.dead_after_s``."""
        return self.store.dead_host_ids(self.clock.now(), self.settings.hosts.dead_after_s)

    def hosts(self) -> list[HostRecord]:
        """The farmd hosts by id, from the store."""
        return self.store.list_hosts()

    def running_jobs(self) -> dict[int, int]:
        """Attempt id -> job id of every running attempt (what each busy phone runs)."""
        running = self.store.list_jobs([JobState.RUNNING], limit=10_000)
        return {a.id: job.id for job in running for a in self.store.attempts(job.id)
                if a.state is AttemptState.RUNNING}

    def set_drained(self, serial: str, drained: bool, reason: str) -> bool:
        """Drain or undrain a phone in the store (operators only)."""
        self._operator("drain" if drained else "undrain")
        self.device(serial)
        return bool(self.store.set_drained(serial, drained, reason, self.clock.now()))

    def release(self, serial: str) -> None:
        """Release a quarantined phone in the store (operators only)."""
        self._operator("release")
        was = self.store.release_quarantined(
            serial, "released from quarantine by " + (self.owner or "operator"), self.clock.now())
        if was is None:
            raise NotFound(f"no phone {serial!r} is known (see farmctl devices)")
        if was is not DeviceState.QUARANTINED:
            raise UserFault(f"{serial} is not quarantined (it is {was.value})")

    # --- jobs -----------------------------------------------------------------------

    def jobs(self, states: Sequence[JobState] | None = None, limit: int = 100, *,
             run_id: str | None = None) -> list[JobView]:
        """Jobs newest first, from the store."""
        return self.store.list_jobs(states or None, limit, run_id=run_id)

    def job(self, job_id: int) -> JobView:
        """One job, from the store."""
        view = self.store.get_job(job_id)
        if view is None:
            raise NotFound(f"no job {job_id}")
        return view

    def attempts(self, job_id: int) -> list[AttemptView]:
        """A job's attempts, from the store."""
        return self.store.attempts(job_id)

    def results(self, job_id: int) -> list[ResultView]:
        """A job's results, from the store."""
        return self.store.results(job_id)

    def waiting(self, jobs: Sequence[JobView]) -> dict[int, str]:
        """Why queued jobs wait, from one snapshot of the queue."""
        if not any(v.state is JobState.QUEUED for v in jobs):
            return {}
        return wait_reasons(self.store.snapshot(), self.clock.now(), known_kinds=list(KINDS),
                            job_ids={v.id for v in jobs}, dead_hosts=self.dead_hosts(),
                            device_kinds=controllers.kinds())

    def tuning(self, job_id: int) -> TuneCounters | None:
        """A tuning job's progress: tasks from the database, counters from this host's folder.

        None for other jobs (:func:`farm.tuning.work_progress.job_progress`).
        """
        # Imported here: the attempt side of task work brings numpy and structlog, which
        # farmctl's listings (through this service, without farmd) must not load.
        from farm.jobs.tuning_db import tune_work_dir
        from farm.tuning import job_progress

        return job_progress(self.store, job_id, tune_work_dir(self.settings.data_dir, job_id))

    def sample_rows(self, *, job_id: int | None = None, run_id: str | None = None,
                    workload: str | None = None, limit: int = 1000) -> list[SampleRow]:
        """Raw samples as flat rows, from the store (:func:`farm.results.rows.sample_rows`)."""
        if job_id is not None:
            self.job(job_id)
        if run_id is not None and not self.store.list_jobs(limit=1, run_id=run_id):
            raise NotFound(f"no run {run_id}")
        rows = sample_rows(self.store, job_ids=None if job_id is None else [job_id],
                           run_id=run_id, limit=limit)
        if workload is not None:
            known = sorted({r.workload for r in rows})
            rows = [r for r in rows if r.workload == workload]
            if not rows:
                raise UserFault(f"no results of workload {workload!r} in the newest {limit} "
                                f"(known: {', '.join(known) or 'none'})")
        return rows

    def store_models(self, raw: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
        """Model files on this host, stored as blobs (``store_spec_models``)."""
        return store_spec_models(raw, fields, self.store, self.clock.now())

    def upload_model(self, data: bytes | Path, name: str) -> StoredModel:
        """Check uploaded bytes as an ONNX model and store them as a blob (``POST /api/v1/blobs``).

        Args:
            data: the bytes, or the file an upload was spooled to.
            name: the user's file name.

        Raises:
            SpecError: ``data`` is not a valid ONNX model (field ``model``).
            StoreError: the database refused the write.
        """
        return put_model(self.store, data, name, self.clock.now(), field="model")

    def store_inputs(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """An ``.npz`` on this host, stored as a blob (``store_inputs``)."""
        return store_inputs(raw, self.upload_inputs)

    def upload_inputs(self, data: bytes | Path, name: str) -> InputsBlob:
        """Uploaded bytes, or the file they were spooled to, stored as a blob."""
        return put_inputs(self.store, data, name, self.clock.now(),
                          self.settings.jobs.inputs_max_bytes)

    def outputs(self, job_id: int) -> dict[str, bytes]:
        """Each phone's kept outputs, from the store's blobs."""
        kept = self._kept_outputs(job_id)
        if not kept:
            raise NotFound(f"job {job_id} kept no outputs: only a model job given --inputs does")
        return {serial: self._outputs_blob(job_id, serial, kept) for serial in kept}

    def output(self, job_id: int, serial: str) -> bytes:
        """The ``.npz`` of outputs one phone gave for a ``model --inputs`` job.

        Raises:
            NotFound: see :meth:`outputs`; or ``serial`` kept none.
        """
        return self._outputs_blob(job_id, serial, self._kept_outputs(job_id))

    def _outputs_blob(self, job_id: int, serial: str, kept: Mapping[str, str]) -> bytes:
        """The outputs ``serial`` kept (``kept``: :meth:`_kept_outputs`), read from the store."""
        if serial not in kept:
            raise NotFound(f"job {job_id} kept no outputs of {serial!r} (phones that did: "
                           f"{', '.join(sorted(kept)) or 'none'}; only a model job given "
                           "--inputs keeps them)")
        data = self.store.get_blob(kept[serial])
        if data is None:
            raise NotFound(f"job {job_id}: the outputs of {serial} are no longer stored")
        return data

    def _kept_outputs(self, job_id: int) -> dict[str, str]:
        """Serial -> outputs blob of job ``job_id`` (NotFound: no such job)."""
        self.job(job_id)
        return {serial: sha256 for view in self.results(job_id)
                for serial, sha256 in outputs_by_serial(view).items()}

    def submit(self, raw: dict[str, Any], *, wait_for_device: bool = False,
               each: bool = False) -> Submitted:
        """Validate and store a spec (:func:`farm.api.submitting.submit_spec`)."""
        return submit_spec(self, raw, wait_for_device=wait_for_device, each=each)

    def wake_dispatcher(self) -> None:
        """Ask farmd for a dispatcher tick (after an enqueue); nothing without a farmd to wake."""
        if self.wake is not None:
            self.wake()

    def cancel(self, job_id: int) -> JobView:
        """Cancel a job in the store (its owner or an operator)."""
        view = self.job(job_id)
        if (self.caller is not None and not self.caller.operator
                and view.owner != self.caller.owner):
            raise Forbidden(f"job {job_id} is {view.owner or 'a local user'}'s: "
                            f"only its owner or an operator may cancel it")
        if view.unknown_state is not None:
            raise Conflict(f"job {job_id} is {view.shown_state}: a state this farm "
                           "does not know; cancel it from a host of a farm that knows it")
        if not self.store.cancel(job_id, self.clock.now()):
            raise Conflict(f"job {job_id} has already ended ({self.job(job_id).shown_state})")
        return self.job(job_id)

