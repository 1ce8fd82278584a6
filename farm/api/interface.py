"""The farm's service interface: what a caller may ask of the queue, listed once.

:class:`Queue` is the one list of the API's methods, with their types, units
and errors. Three classes implement it, and each says so by subclassing it
(mypy then checks every signature against this one):

- :class:`farm.api.service.FarmService`: the queue database, with a caller's
  rights; the local ``farmctl`` uses it, and each HTTP request gets one for its
  token's caller (:data:`farm.api.routes.ServiceDep`), so it is also the
  routes' service;
- :class:`farm.client.remote.RemoteService`: the same over ``/api/v1/...``,
  returning the same frozen views, for ``farmctl --server`` and
  :mod:`farm.client`.

Errors are farm's classes (:mod:`farm.errors`, :mod:`farm.api.errors`); the
remote client gets back the class the server raised. This module imports no
FastAPI and no httpx.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from farm.api.submitting import Submitted
from farm.kinds.model_inputs import InputsBlob
from farm.queue.hosts import HostRecord
from farm.queue.models import JobState
from farm.queue.records import AttemptView, DeviceRecord, JobView, ResultView
from farm.queue.reservations import ReservationView
from farm.queue.spec import DeviceSelection
from farm.results.rows import SampleRow
from farm.tuning.progress import TuneCounters

__all__ = ["Queue"]


class Queue(Protocol):
    """The queue as a caller sees it: devices, hosts, jobs, results and reservations.

    Rights are the implementation's: any token reads everything and enqueues
    (its owner is stored on the job); a job or reservation is ended by its
    owner or an operator; drain, undrain and release need an operator.
    """

    def devices(self) -> list[DeviceRecord]:
        """Every phone, by serial, with its latest health sample."""

    def device(self, serial: str) -> DeviceRecord:
        """One phone.

        Raises:
            NotFound: no phone has this serial.
        """

    def dead_hosts(self) -> frozenset[str]:
        """The farmd hosts whose heartbeat is older than ``hosts.dead_after_s``.

        Their phones show as ``unreachable`` and take no new work (:mod:`farm.queue.hosts`).
        """

    def hosts(self) -> list[HostRecord]:
        """The farmd hosts sharing the database, by id."""

    def set_drained(self, serial: str, drained: bool, reason: str) -> bool:
        """Drain or undrain a phone; whether that changed anything.

        Raises:
            Forbidden: the caller is no operator.
            NotFound: no such phone.
        """

    def release(self, serial: str) -> None:
        """Release a quarantined phone: it is set up and health-checked again.

        Raises:
            Forbidden: the caller is no operator.
            NotFound: no such phone.
            UserFault: the phone is not quarantined.
        """

    def jobs(self, states: Sequence[JobState] | None = None, limit: int = 100, *,
             run_id: str | None = None) -> list[JobView]:
        """Jobs newest first, optionally only those in ``states`` or of one run."""

    def job(self, job_id: int) -> JobView:
        """One job.

        Raises:
            NotFound: no job has this id.
        """

    def attempts(self, job_id: int) -> list[AttemptView]:
        """A job's attempts, oldest first."""

    def results(self, job_id: int) -> list[ResultView]:
        """A job's results (at most one) with raw samples."""

    def waiting(self, jobs: Sequence[JobView]) -> dict[int, str]:
        """Why each queued job of ``jobs`` is not running (one snapshot of the queue)."""

    def tuning(self, job_id: int) -> TuneCounters | None:
        """A tuning job's progress: tasks from the database, counters from this host's folder.

        None for other jobs (:func:`farm.tuning.work_progress.job_progress`).
        """

    def sample_rows(self, *, job_id: int | None = None, run_id: str | None = None,
                    workload: str | None = None, limit: int = 1000) -> list[SampleRow]:
        """Raw samples as flat rows (:func:`farm.results.rows.sample_rows`).

        Raises:
            NotFound: no such job or run.
            UserFault: no result of ``workload`` in the newest ``limit``.
        """

    def store_models(self, raw: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
        """A raw spec whose model files (on this host) are stored as blobs, and named by them.

        See :func:`farm.jobs.model_store.store_spec_models`; ``fields`` are the
        kind's ``input_files``.

        Raises:
            SpecError: a named file is missing, unreadable or not an ONNX model.
        """

    def store_inputs(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """A raw spec whose ``params.inputs`` ``.npz`` (on this host) is stored as a blob.

        See :func:`farm.kinds.model_inputs.store_inputs`.

        Raises:
            SpecError: the file is missing, unreadable or no ``.npz`` archive.
        """

    def upload_inputs(self, data: bytes, name: str) -> InputsBlob:
        """Check uploaded bytes as an ``.npz`` archive and store them as a blob.

        ``POST /api/v1/blobs?type=inputs``; a spec names the blob in ``params.inputs``.

        Raises:
            SpecError: ``data`` is no ``.npz`` archive, or its arrays declare more
                than ``[jobs] inputs_max_bytes`` (field ``params.inputs``).
            StoreError: the database refused the write.
        """

    def outputs(self, job_id: int) -> dict[str, bytes]:
        """Serial -> the ``.npz`` of outputs each phone gave for a ``model --inputs`` job.

        Raises:
            NotFound: no such job, or it kept no outputs (not finished, or run
                on random inputs), or they are no longer stored.
        """

    def submit(self, raw: dict[str, Any], *, wait_for_device: bool = False,
               each: bool = False) -> Submitted:
        """Validate and store a job spec (``farmctl enqueue``, ``POST /api/v1/jobs``).

        Args:
            raw: the spec as JSON data; model files it names must already be in
                farm's store (the CLI stores local files; the API takes uploads).
            wait_for_device: queue it even if no known phone can run it.
            each: one job per phone in service that fits, pinned to it, under one
                run id (kinds with ``fan_out`` only).

        Raises:
            SpecError: the spec is invalid (the field and why), or ``each`` with
                ``devices.count`` above 1 or a kind that does not fan out.
            UserFault: no known phone can run it (and not ``wait_for_device``),
                or, with ``each``, none in service fits now.
        """

    def cancel(self, job_id: int) -> JobView:
        """Cancel a queued or running job (a running attempt is stopped by its farmd).

        Raises:
            NotFound: no such job.
            Forbidden: another owner's job, and the caller is no operator.
            Conflict: the job has already ended, or is in a state this farm does
                not know (a newer farm's, which this one leaves alone).
        """

    def reserve(self, serial: str | None, for_s: float, *,
                selection: DeviceSelection | None = None,
                owner: str | None = None) -> ReservationView:
        """Reserve ``serial``, or one free phone matching ``selection``, for ``for_s`` seconds.

        Args:
            serial: the phone; None picks a free one matching ``selection``.
            for_s: how long, in seconds (at most ``reservations.max_for_s``).
            selection: ``--abi/--soc/--gpu/--sdk-min`` when no serial is given.
            owner: the local CLI's ``--owner`` (farmctl passes the login name by
                default); a token's reservation is always its owner's.

        Raises:
            UserFault: ``for_s`` out of range, no owner, or neither serial nor selection.
            ReservationError: unknown serial, held by another owner, none free matches.
        """

    def unreserve(self, serial: str, *, owner: str | None = None) -> ReservationView:
        """End the reservation of ``serial``.

        Args:
            serial: the phone.
            owner: the local CLI's ``--owner``: end it only if it is theirs;
                None ends anyone's. A token's owner ends only their own unless
                it is an operator's.

        Raises:
            NotFound: the phone is not reserved.
            Forbidden: another owner's reservation, and the token is no operator's.
            ReservationError: as :meth:`Store.unreserve`.
        """

    def reservations(self, *, ended_too: bool = False) -> list[ReservationView]:
        """The reservations in force now, by serial; with ``ended_too`` every one ever made."""
