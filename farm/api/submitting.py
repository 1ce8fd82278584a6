"""Enqueueing a job spec as a caller: validate, check against the fleet, store.

The half of :class:`farm.api.service.FarmService` behind its ``submit``.

The same path for ``farmctl enqueue`` (no caller) and ``POST /api/v1/jobs``
(a token's owner). Through the API a spec must name its models by uploaded
blobs (``POST /api/v1/blobs``), never by a path on the server: a token must
not make farmd read its files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.errors import SpecError, UserFault
from farm.kinds import KINDS
from farm.kinds.model_inputs import FIELD as INPUTS_FIELD
from farm.queue.records import DeviceRecord, JobView
from farm.queue.scheduler import DeviceView
from farm.queue.spec import JobSpec, parse_spec
from farm.queue.waiting import fitting_in_service, refusal, utc_text

if TYPE_CHECKING:
    from farm.api.service import FarmService

__all__ = ["Submitted", "submit_spec"]


@dataclass(frozen=True)
class Submitted:
    """The jobs one enqueue stored: one job, or a fan-out's jobs under its run id."""

    jobs: tuple[JobView, ...]
    run_id: str | None = None
    #: ``--each``: the fitting phones it queued nothing on, each with why
    #: (``R58M12ABC: reserved by alice until 2026-11-24T09:00Z``).
    skipped: tuple[str, ...] = ()


def submit_spec(svc: FarmService, raw: dict[str, Any], *, wait_for_device: bool,
                each: bool) -> Submitted:
    """:meth:`FarmService.submit` (see it for arguments and errors)."""
    named = KINDS.get(str(raw.get("kind")))
    if svc.caller is not None and named is not None:  # before validation reads the path
        _no_server_paths(raw, named.input_files)
        if isinstance(_at(raw, INPUTS_FIELD), str):
            raise SpecError(INPUTS_FIELD, "a path on the server is refused: upload the .npz "
                                          "(POST /api/v1/blobs?type=inputs, farmctl --server "
                                          "enqueue does)")
        _uploaded(svc, raw, named.input_files)
    spec = parse_spec(raw)
    kind = KINDS[spec.kind]
    if kind.enqueue.check is not None:
        spec = kind.enqueue.check(spec, svc.store, Path(svc.settings.data_dir)) or spec
    if spec.timeout_s is None:  # the config's limit for the kind, stored with the job
        spec = spec.model_copy(update={"timeout_s": spec.timeout_for(svc.settings.jobs)})
    known = svc.devices()
    now = svc.clock.now()
    if each:
        # Every live host's phones; a dead host's run nothing until it is back.
        dead = svc.dead_hosts()
        return _submit_each(svc, spec, [_view(d) for d in known
                                        if d.host is None or d.host not in dead])
    views = [_view(d) for d in known]
    if not wait_for_device:
        reason = refusal(spec, views)
        if reason is not None:
            raise UserFault(f"no known phone can run this job: {reason} "
                            "(--wait-for-device queues it for phones not plugged in yet)")
    job_id = svc.store.enqueue(spec, now, owner=svc.owner)
    svc.wake_dispatcher()
    return Submitted((svc.job(job_id),))


def _uploaded(svc: FarmService, raw: Mapping[str, Any], fields: Sequence[str]) -> None:
    """Refuse an API spec naming a model blob nobody uploaded.

    Raises:
        SpecError: the ``sha256`` beside a model field names no stored blob.
    """
    for field in fields:
        parent = field.rsplit(".", 1)[0]
        sha256 = _at(raw, f"{parent}.sha256")
        if isinstance(sha256, str) and not svc.store.blob_exists(sha256):
            raise SpecError(f"{parent}.sha256", "no uploaded model has this sha256: "
                            "upload it first (POST /api/v1/blobs)")


def _submit_each(svc: FarmService, spec: JobSpec, views: list[DeviceView]) -> Submitted:
    """One job per phone of ``views`` that fits ``spec`` and is in service, one run id."""
    if not KINDS[spec.kind].fan_out:
        raise SpecError("kind", f"{spec.kind} jobs cannot fan out with --each")
    if spec.devices.count != 1:
        raise SpecError("devices.count", "must be 1 with --each: each job holds one phone")
    fitting = fitting_in_service(spec, views)
    # A reserved phone takes no job until its person is done: a job pinned to it
    # would wait silently for hours (issue 25), so --each leaves it out and says so.
    now = svc.clock.now()
    reserved = {v.serial: v for v in svc.reservations() if v.expires_at > now}
    skipped = tuple(f"{p.serial}: reserved by {reserved[p.serial].owner} until "
                    f"{utc_text(reserved[p.serial].expires_at)}"
                    for p in fitting if p.serial in reserved)
    phones = [p for p in fitting if p.serial not in reserved]
    if not phones:
        reason = refusal(spec, views) or f"{len(views)} phones known, none in service fits"
        if skipped:
            reason = f"every fitting phone is reserved ({'; '.join(skipped)})"
        raise UserFault(f"--each: no phone to run on now: {reason}")
    data = spec.to_json()
    # Each job is pinned to its phone: a preference (model --tuned) has nothing left to choose.
    specs = [parse_spec({**data, "devices": {**data["devices"], "serials": [p.serial],
                                             "prefer_serials": None}})
             for p in phones]
    run_id, job_ids = svc.store.enqueue_run(specs, svc.clock.now(), owner=svc.owner)
    svc.wake_dispatcher()
    return Submitted(tuple(svc.job(j) for j in job_ids), run_id, skipped)


def _view(device: DeviceRecord) -> DeviceView:
    """A stored device as the scheduler sees it (selection and needs are matched on this)."""
    return DeviceView(device.serial, device.state, device.drained, device.facts,
                      kind=device.kind)


def _no_server_paths(raw: Mapping[str, Any], fields: Sequence[str]) -> None:
    """Refuse an API spec naming a model file by a path on the server.

    A remote caller must upload models (``POST /api/v1/blobs``): a path would
    let a token read any file farmd can read.

    Raises:
        SpecError: a model field of the kind (``Kind.input_files``) names a path.
    """
    for field in fields:
        if _at(raw, field) is not None:
            raise SpecError(field, "a path on the server is refused: upload the model "
                                   "(POST /api/v1/blobs, farmctl --server enqueue does)")


def _at(raw: Mapping[str, Any], field: str) -> Any:
    """The value at a dotted path of raw JSON data, or None where the path ends early."""
    holder: Any = raw
    for part in field.split("."):
        holder = holder.get(part) if isinstance(holder, Mapping) else None
    return holder
