"""``farmctl --server URL``: the HTTP API's client, with the methods of the local service.

:class:`RemoteService` implements :class:`farm.api.interface.Queue` over
``/api/v1/...`` (httpx), returning the same frozen views the store returns,
so each command has one code path (``state.queue``) whichever way it reaches
the queue. Errors come back as the classes the server raised
(:func:`farm.api.errors.error_of`): ``farmctl`` prints the same one line and
exit code. An unreachable server is an :class:`~farm.errors.InfraFault` (exit 1),
a missing or wrong token an :class:`~farm.api.errors.Unauthorized` (exit 2).

A job's wait reason, attempts, result and tuning progress come with the job
(``GET /api/v1/jobs/{id}``): the client keeps the newest answer per job, so
``waiting``, ``attempts``, ``results`` and ``tuning`` after ``job`` or
``jobs`` cost no further request; likewise ``dead_hosts`` after ``hosts``.

A finished tune's bundle (``farmctl export``) comes as the dashboard's zip and
is unpacked here (:meth:`RemoteService.export`, :func:`farm.client.bundle.unpack_bundle`),
for ``farmctl --server export`` and :mod:`farm.client` alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from farm.api.errors import NotFound, Unauthorized, error_of
from farm.api.interface import Queue
from farm.api.schemas import DeviceOut, HostOut, JobDetailOut, JobOut, SubmittedOut, record_of
from farm.api.service import Submitted
from farm.client.bundle import unpack_bundle
from farm.errors import InfraFault, SpecError, UserFault
from farm.jobs.model_store import spec_with_blob
from farm.kinds.model_inputs import InputsBlob, outputs_by_serial, store_inputs
from farm.queue.hosts import HostRecord
from farm.queue.models import JobState
from farm.queue.records import AttemptView, DeviceRecord, JobView, ResultView
from farm.queue.reservations import ReservationView
from farm.queue.spec import DeviceSelection
from farm.results.rows import SampleRow
from farm.tuning import TuneCounters

__all__ = ["BUNDLE_TIMEOUT_S", "TIMEOUT_S", "RemoteService"]

#: Seconds to wait for the server's answer (connect, read); an enqueue checks
#: the spec against the queue, which is quick.
TIMEOUT_S = 30.0
#: Seconds to wait for a job's bundle: the server zips the library and model and
#: runs onnxruntime once for the expected outputs (never compiles: see
#: :mod:`farm.web.export_view`).
BUNDLE_TIMEOUT_S = 300.0

T = TypeVar("T")


def _path(serial: str) -> str:
    """``serial`` as one path segment: every reserved character quoted (a serial may hold '/')."""
    return quote(serial, safe="")


class RemoteService(Queue):
    """The queue behind a farmd's API, as the token's owner sees it (the interface, remotely).

    Args:
        url: the API's base URL, e.g. ``https://farm.example.org`` (a reverse
            proxy) or ``http://127.0.0.1:9465``.
        token: the caller's token (``farmctl token create``); None sends none
            (every route but ping refuses that).
        transport: an httpx transport, for tests; None: the network.
    """

    def __init__(self, url: str, token: str | None,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise UserFault(f"--server must be an http:// or https:// URL: {url!r}")
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S,
                                  transport=transport)
        self._details: dict[int, JobDetailOut] = {}
        self._waiting: dict[int, str] = {}
        self._dead: frozenset[str] | None = None

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # --- the wire -----------------------------------------------------------------------

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; the answer's JSON.

        Raises:
            InfraFault: the server cannot be reached, or answers no JSON.
            FarmError: the class the server's status stands for, with its message.
        """
        response = self._send(method, path, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = None
        if body is None:
            raise InfraFault(f"the farm server {self.url} answered {method} {path} "
                             f"with no JSON (is it farm's API?)")
        return body

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; the response, once its status says it succeeded.

        Raises:
            InfraFault: the server cannot be reached.
            FarmError: the class the server's status stands for, with its message.
        """
        try:
            response = self._http.request(method, f"/api/v1{path}", **kwargs)
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise InfraFault(f"cannot reach the farm server {self.url}: {reason}") from None
        if not response.is_error:
            return response
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code == 401:
            message = body.get("error") if isinstance(body, dict) else None
            raise Unauthorized(f"the server {self.url} refused the token: "
                               f"{message or 'unauthorized'} (set FARM_TOKEN or --token)")
        raise error_of(response.status_code, body)

    def _read(self, kind: type[T] | Any, data: Any) -> Any:
        try:
            return TypeAdapter(kind).validate_python(data)
        except ValidationError as exc:
            raise InfraFault(f"the farm server {self.url} answered an unexpected shape: "
                             f"{exc.errors()[0].get('msg', exc)}") from None

    # --- devices --------------------------------------------------------------------------

    def devices(self) -> list[DeviceRecord]:
        """Every phone (``GET /api/v1/devices``)."""
        outs: list[DeviceOut] = self._read(list[DeviceOut], self._call("GET", "/devices"))
        return [record_of(o) for o in outs]

    def hosts(self) -> list[HostRecord]:
        """The farmd hosts (``GET /api/v1/hosts``); notes the dead ones for :meth:`dead_hosts`."""
        outs: list[HostOut] = self._read(list[HostOut], self._call("GET", "/hosts"))
        self._dead = frozenset(o.host.host_id for o in outs if not o.alive)
        return [o.host for o in outs]

    def dead_hosts(self) -> frozenset[str]:
        """The hosts the server judged dead (as of the newest :meth:`hosts`)."""
        if self._dead is None:
            self.hosts()
        return self._dead or frozenset()

    def device(self, serial: str) -> DeviceRecord:
        """One phone."""
        return record_of(self._read(DeviceOut, self._call("GET", f"/devices/{_path(serial)}")))

    def set_drained(self, serial: str, drained: bool, reason: str) -> bool:
        """Drain or undrain a phone (operator token)."""
        action = "drain" if drained else "undrain"
        body = self._call("POST", f"/devices/{_path(serial)}/{action}", params={"reason": reason})
        return bool(body.get("changed"))

    def release(self, serial: str) -> None:
        """Release a quarantined phone (operator token)."""
        self._call("POST", f"/devices/{_path(serial)}/release")

    # --- jobs -------------------------------------------------------------------------------

    def jobs(self, states: Sequence[JobState] | None = None, limit: int = 100, *,
             run_id: str | None = None) -> list[JobView]:
        """Jobs newest first; keeps their wait reasons for :meth:`waiting`."""
        params: dict[str, Any] = {"limit": limit, "state": [s.value for s in states or ()]}
        if run_id is not None:
            params["run"] = run_id
        outs: list[JobOut] = self._read(list[JobOut], self._call("GET", "/jobs", params=params))
        for out in outs:
            self._note_waiting(out.job.id, out.waiting)
        return [o.job for o in outs]

    def _note_waiting(self, job_id: int, waiting: str | None) -> None:
        if waiting is None:
            self._waiting.pop(job_id, None)
        else:
            self._waiting[job_id] = waiting

    def job(self, job_id: int) -> JobView:
        """One job; keeps its attempts, result and progress for the calls after."""
        detail: JobDetailOut = self._read(JobDetailOut, self._call("GET", f"/jobs/{job_id}"))
        self._details[job_id] = detail
        self._note_waiting(job_id, detail.waiting)
        return detail.job

    def _detail(self, job_id: int) -> JobDetailOut:
        if job_id not in self._details:
            self.job(job_id)
        return self._details[job_id]

    def attempts(self, job_id: int) -> list[AttemptView]:
        """A job's attempts, as of the newest :meth:`job`."""
        return list(self._detail(job_id).attempts)

    def results(self, job_id: int) -> list[ResultView]:
        """A job's result, as of the newest :meth:`job`."""
        result = self._detail(job_id).result
        return [] if result is None else [result]

    def waiting(self, jobs: Sequence[JobView]) -> dict[int, str]:
        """Why each of ``jobs`` waits, as the server said with them."""
        return {j.id: self._waiting[j.id] for j in jobs if j.id in self._waiting}

    def tuning(self, job_id: int) -> TuneCounters | None:
        """A tuning job's progress, as of the newest :meth:`job`."""
        tuning = self._detail(job_id).tuning
        return None if tuning is None else TuneCounters.from_dict(tuning.counters)

    def sample_rows(self, *, job_id: int | None = None, run_id: str | None = None,
                    workload: str | None = None, limit: int = 1000) -> list[SampleRow]:
        """Raw samples as flat rows (``GET /api/v1/results``)."""
        params = {k: v for k, v in (("job", job_id), ("run", run_id), ("workload", workload),
                                    ("limit", limit)) if v is not None}
        rows: list[SampleRow] = self._read(list[SampleRow],
                                           self._call("GET", "/results", params=params))
        return rows

    def store_models(self, raw: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
        """A raw spec whose model files (on this machine) are uploaded, and named by their blobs.

        Each file a model field names (``Kind.input_files``) goes to ``POST
        /api/v1/blobs``, which checks it as ONNX; the spec then names the blob
        (:func:`farm.jobs.model_store.spec_with_blob`).

        Raises:
            SpecError: a named file is missing or unreadable, or the server
                found it no ONNX model (naming the field).
        """
        out: dict[str, Any] = dict(raw)
        for field in fields:
            holder: Any = out
            for part in field.split("."):
                holder = holder.get(part) if isinstance(holder, Mapping) else None
            if not isinstance(holder, str):
                continue  # absent: the spec's validation says what is missing
            path = Path(holder).expanduser()
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise SpecError(field, f"cannot read {holder!r}: {exc.strerror or exc}") from None
            try:
                body = self._call("POST", "/blobs", params={"name": path.name}, content=data,
                                  headers={"Content-Type": "application/octet-stream"})
            except SpecError as exc:  # the server's check names no flag: this field's is meant
                raise SpecError(field, exc.reason) from None
            out = spec_with_blob(out, field, str(body["sha256"]), path.name)
        return out

    def store_inputs(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """A raw spec whose ``params.inputs`` ``.npz`` (on this machine) is uploaded.

        The file goes to ``POST /api/v1/blobs?type=inputs``; the spec then names
        the blob (``{"sha256", "name"}``, :mod:`farm.kinds.model_inputs`).

        Raises:
            SpecError: the file is missing or unreadable, or the server found it
                no ``.npz`` archive (``params.inputs``).
        """
        return store_inputs(raw, self.upload_inputs)

    def upload_inputs(self, data: bytes, name: str) -> InputsBlob:
        """Upload an ``.npz`` of inputs (``POST /api/v1/blobs?type=inputs``); its blob.

        Raises:
            SpecError: the server found it no ``.npz`` archive (``params.inputs``).
        """
        body = self._call("POST", "/blobs", params={"name": name, "type": "inputs"},
                          content=data, headers={"Content-Type": "application/octet-stream"})
        blob: InputsBlob = self._read(InputsBlob, {"sha256": body.get("sha256"), "name": name})
        return blob

    def outputs(self, job_id: int) -> dict[str, bytes]:
        """Serial -> the ``.npz`` each phone gave for a ``model --inputs`` job.

        The job's result names the phones (``GET /api/v1/jobs/{id}``); each
        archive is ``GET /api/v1/jobs/{id}/outputs/{serial}``.

        Raises:
            NotFound: no such job, or it kept no outputs.
        """
        self.job(job_id)  # the newest result, not one read before the job ended
        kept = {serial for view in self.results(job_id) for serial in outputs_by_serial(view)}
        if not kept:
            raise NotFound(f"job {job_id} kept no outputs: only a model job given --inputs does")
        return {serial: self._send("GET", f"/jobs/{job_id}/outputs/{_path(serial)}").content
                for serial in sorted(kept)}

    def bundle(self, job_id: int) -> bytes:
        """A finished model tune's bundle (``farmctl export``'s folder) as zip bytes.

        ``GET /api/v1/dashboard/jobs/{id}/export.zip``, the dashboard's download.

        Raises:
            NotFound: no such job, not a finished tune of a model, or it left no
                compiled library to download (the server's one line says which).
        """
        return self._send("GET", f"/dashboard/jobs/{job_id}/export.zip",
                          timeout=BUNDLE_TIMEOUT_S).content

    def export(self, job_id: int, out: str | Path) -> Path:
        """Write a finished model tune's bundle into ``out``, the files ``farmctl export`` writes.

        The library, MetaSchedule database, model, inputs and expected outputs,
        manifest, README and C++ example (:mod:`farm.jobs.bundle`), downloaded
        as the dashboard's zip (:meth:`bundle`) and unpacked.

        Args:
            job_id: the tune job.
            out: a folder that does not exist or is empty.

        Returns:
            ``out``, its ``~`` expanded.

        Raises:
            SpecError: ``out`` exists and is not an empty folder (checked before
                any request), or cannot be written (field ``out``).
            NotFound: the job is no finished tune of a model, or it left no compiled
                library to download (the server's one line says which).
            InfraFault: the server's answer is not a bundle.
        """
        folder = Path(out).expanduser()
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise SpecError("out", f"{folder} exists and is not an empty folder")
        unpack_bundle(self.bundle(job_id), f"job-{job_id}-bundle/", folder)
        return folder

    def compare(self, a: str, b: str) -> dict[str, Any]:
        """``farmctl compare A B --json`` on the server (``GET /api/v1/dashboard/compare``).

        The dashboard's comparison, with the server's ``[results]`` threshold and alpha.

        Raises:
            UserFault: an unknown or unfinished job or run, different workloads
                (the server's one line).
        """
        body: dict[str, Any] = self._call("GET", "/dashboard/compare", params={"a": a, "b": b})
        return body

    def submit(self, raw: dict[str, Any], *, wait_for_device: bool = False,
               each: bool = False) -> Submitted:
        """Queue a spec (``POST /api/v1/jobs``); its owner is the token's."""
        body = self._call("POST", "/jobs", json={"spec": raw, "each": each,
                                                 "wait_for_device": wait_for_device})
        out: SubmittedOut = self._read(SubmittedOut, body)
        return Submitted(tuple(out.jobs), out.run_id, tuple(out.skipped))

    def cancel(self, job_id: int) -> JobView:
        """Cancel a job: the token's owner's own, or any with an operator token."""
        out: JobOut = self._read(JobOut, self._call("POST", f"/jobs/{job_id}/cancel"))
        return out.job

    # --- reservations -------------------------------------------------------------------

    def reserve(self, serial: str | None, for_s: float, *,
                selection: DeviceSelection | None = None,
                owner: str | None = None) -> ReservationView:
        """Reserve a phone for the token's owner."""
        del owner  # the token's owner reserves: --owner names owners on the local database only
        body: dict[str, Any] = {"serial": serial, "for_s": for_s}
        if serial is None and selection is not None:
            body.update(abi=selection.abi, soc=selection.soc, gpu=selection.gpu,
                        sdk_min=selection.sdk_min)
        view: ReservationView = self._read(ReservationView,
                                           self._call("POST", "/reservations", json=body))
        return view

    def unreserve(self, serial: str, *, owner: str | None = None) -> ReservationView:
        """End a reservation: the token's owner's own, or any with an operator token."""
        del owner  # the token says who asks (see reserve)
        view: ReservationView = self._read(ReservationView,
                                           self._call("DELETE", f"/reservations/{_path(serial)}"))
        return view

    def reservations(self, *, ended_too: bool = False) -> list[ReservationView]:
        """The reservations in force now; with ``ended_too`` every one ever made."""
        views: list[ReservationView] = self._read(
            list[ReservationView],
            self._call("GET", "/reservations", params={"ended_too": ended_too}))
        return views
