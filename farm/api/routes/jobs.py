"""``/api/v1/jobs``: list, show, results, enqueue and cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from farm.api.bounds import JobIdPath, SerialPath, TextQuery
from farm.api.routes import ServiceDep
from farm.api.schemas import (
    JobDetailOut,
    JobOut,
    ResultsOut,
    SubmitIn,
    SubmittedOut,
    job_out,
    tuning_out,
)
from farm.queue.models import DB_INT_MAX, JobState
from farm.results.spreads import phone_spreads

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

@router.get("")
def list_jobs(svc: ServiceDep,
              state: Annotated[list[JobState] | None, Query()] = None,
              limit: Annotated[int, Query(ge=1, le=DB_INT_MAX)] = 100,
              run: TextQuery = None) -> list[JobOut]:
    """Jobs newest first, optionally only those in ``state`` (repeatable) or of one run."""
    views = svc.jobs(state, limit, run_id=run)
    waiting = svc.waiting(views)
    return [job_out(v, waiting) for v in views]


@router.get("/{job_id}")
def get_job(svc: ServiceDep, job_id: JobIdPath) -> JobDetailOut:
    """One job: spec, state, why it waits, attempts, result, tuning progress."""
    view = svc.job(job_id)
    return JobDetailOut(job=view, waiting=svc.waiting([view]).get(job_id),
                        attempts=svc.attempts(job_id),
                        result=next(iter(svc.results(job_id)), None),
                        tuning=tuning_out(svc.tuning(job_id)))


@router.get("/{job_id}/results")
def get_results(svc: ServiceDep, job_id: JobIdPath) -> ResultsOut:
    """Per phone spread of the job's result, and its raw samples (``farmctl results``)."""
    rows = svc.sample_rows(job_id=job_id)
    return ResultsOut(spreads=phone_spreads(rows, svc.settings.results.max_cv), samples=rows)


@router.get("/{job_id}/outputs/{serial:path}", response_class=Response,
            responses={200: {"content": {"application/octet-stream": {}}}})
def get_outputs(svc: ServiceDep, job_id: JobIdPath, serial: SerialPath) -> Response:
    """The outputs a phone gave for a ``model`` job's user inputs: an ``.npz`` by output name.

    The job's result names the phones that kept some (``runs[].outputs_sha256``);
    404 for any other phone, job or a job run on random inputs.
    """
    return Response(svc.output(job_id, serial), media_type="application/octet-stream")


@router.post("", status_code=status.HTTP_201_CREATED)
def submit(svc: ServiceDep, body: SubmitIn) -> SubmittedOut:
    """Queue a job spec (validated as ``farmctl enqueue`` does); its owner is the caller."""
    done = svc.submit(body.spec, wait_for_device=body.wait_for_device, each=body.each)
    return SubmittedOut(jobs=list(done.jobs), run_id=done.run_id, skipped=list(done.skipped))


@router.post("/{job_id}/cancel")
def cancel(svc: ServiceDep, job_id: JobIdPath) -> JobOut:
    """Cancel a queued or running job: the caller's own, or any with an operator token."""
    return JobOut(job=svc.cancel(job_id))
