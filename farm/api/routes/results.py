"""``/api/v1/results``: raw samples as flat rows, the rows of ``farmctl results --format json``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from farm.api.bounds import JobIdQuery, TextQuery
from farm.api.routes import ServiceDep
from farm.queue.models import DB_INT_MAX
from farm.results.rows import SampleRow

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/results", tags=["results"])


@router.get("")
def list_samples(svc: ServiceDep, job: JobIdQuery = None, run: TextQuery = None,
                 workload: TextQuery = None,
                 limit: Annotated[int, Query(ge=1, le=DB_INT_MAX)] = 1000) -> list[SampleRow]:
    """One row per raw sample: of a job, of a run, or of the newest ``limit`` results."""
    return svc.sample_rows(job_id=job, run_id=run, workload=workload, limit=limit)
