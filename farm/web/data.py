"""The JSON the dashboard's pages poll beside the API's own routes: ``/api/v1/dashboard/...``.

Only what ``/api/v1/devices`` and ``/api/v1/jobs...`` do not carry (see
:mod:`farm.web.views`). Each needs a token like every API route
(:data:`farm.api.auth.CallerDep`: the bearer header or the dashboard's cookie),
so a request without one is refused with 401. A user's mistake (an unknown job,
two runs of different workloads) is a 404 or 400 whose ``error`` is farm's
one-line message; the page shows it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, status
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from farm.api.auth import CallerDep
from farm.api.bounds import JobIdPath, TextQuery
from farm.api.context import ApiContext, context
from farm.errors import SpecError, UserFault
from farm.web import ab_view, device_view, export_view, tune_view, views

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/dashboard", tags=["dashboard"])

ContextDep = Annotated[ApiContext, Depends(context)]


@router.get("/incidents")
def incidents(ctx: ContextDep, _who: CallerDep) -> dict[str, list[dict[str, Any]]]:
    """Each device's newest events (``[web] incidents``), newest first, by serial."""
    return views.incidents_view(ctx.store, ctx.settings)


@router.get("/jobs/{job_id}/trials")
def trials(job_id: JobIdPath, ctx: ContextDep, _who: CallerDep) -> dict[str, Any]:
    """A tuning job's recorded trials so far, one curve per task (heaviest first), for its chart."""
    if ctx.store.get_job(job_id) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id}")
    return tune_view.trials_view(ctx.store, Path(ctx.settings.data_dir), job_id)


@router.get("/jobs/{job_id}/speedups")
def speedups(job_id: JobIdPath, ctx: ContextDep, _who: CallerDep) -> dict[str, Any]:
    """A finished tune job's speed-up per phone (untuned / tuned median time)."""
    if ctx.store.get_job(job_id) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id}")
    return tune_view.speedups_view(ctx.store, job_id)


@router.get("/jobs/{job_id}/ab")
def ab(job_id: JobIdPath, ctx: ContextDep, _who: CallerDep) -> dict[str, Any]:
    """An A/B job's verdict per phone with the ratio B/A of each round (none for other jobs)."""
    if ctx.store.get_job(job_id) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id}")
    return ab_view.ab_view(ctx.store, job_id)


@router.get("/jobs/{job_id}/export")
def export_state(job_id: JobIdPath, ctx: ContextDep, _who: CallerDep) -> dict[str, Any]:
    """``{"available": bool, "reason": str}``: whether the job's bundle can be downloaded."""
    state = export_view.export_state(ctx.store, Path(ctx.settings.data_dir), job_id)
    return {"available": state.available, "reason": state.reason}


@router.get("/jobs/{job_id}/export.zip")
def export_zip(job_id: JobIdPath, ctx: ContextDep, _who: CallerDep) -> FileResponse:
    """The job's bundle (``farmctl export``) as a zip; 404 with the reason when there is none."""
    try:
        archive = export_view.write_export_zip(ctx.store, Path(ctx.settings.data_dir), job_id)
    except SpecError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, exc.reason) from None
    return FileResponse(archive, media_type="application/zip", filename=archive.name,
                        background=BackgroundTask(shutil.rmtree, archive.parent,
                                                  ignore_errors=True))


@router.get("/compare")
def compare(ctx: ContextDep, _who: CallerDep,
            a: Annotated[str, Query(min_length=1, max_length=512)],
            b: Annotated[str, Query(min_length=1, max_length=512)]) -> dict[str, Any]:
    """``farmctl compare A B --json`` (400 with farm's message for a wrong A or B)."""
    try:
        return views.compare_view(ctx.store, ctx.settings, a.strip(), b.strip())
    except UserFault as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None


@router.get("/history")
def history(ctx: ContextDep, _who: CallerDep, workload: TextQuery = None) -> dict[str, Any]:
    """A workload's per-phone medians over time, and the workloads known."""
    try:
        return views.history_view(ctx.store, ctx.settings, workload or None)
    except UserFault as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None


@router.get("/devices/{serial}/readings")
def readings(serial: str, ctx: ContextDep, _who: CallerDep) -> list[dict[str, Any]]:
    """A device's stored health samples, oldest first (its page's chart)."""
    if ctx.store.get_device(serial) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no device {serial!r}")
    return device_view.readings_view(ctx.store, serial)


@router.get("/devices/{serial}/log")
def device_log(serial: str, ctx: ContextDep, _who: CallerDep) -> dict[str, Any]:
    """The tail of a phone's logcat (``{"source", "lines", "error"}``)."""
    if ctx.store.get_device(serial) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no device {serial!r}")
    return device_view.log_view(ctx.store, ctx.settings, serial)
