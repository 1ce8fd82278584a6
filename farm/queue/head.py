"""The head of the queue: the queued jobs a plan needs, read in the scheduler's order.

:meth:`Store.snapshot` reads and decodes every queued job; a daemon tick over
1000 queued jobs spent most of its time there (docs/benchmarks.md, the notes
on "Dispatch" and "Queue head"). :func:`read_head` reads the queued jobs in pages, in the order
the index ``ix_jobs_state_priority`` gives (priority, then submit time, then
id), and stops as soon as the jobs read settle the plan: a tick with one free
phone reads one page, however long the queue is.

Why a prefix of that order is enough. :func:`farm.queue.scheduler.decide`
takes jobs by ``(-effective priority, submitted_at, id)`` and stops once every
free phone is placed or held. Aging adds at most ``B = floor((now - oldest
submitted_at) / aging_step_s)`` points to any queued job, so a job not read yet
(base priority at most the last row's ``p``, and after it within ``p``) sorts
after the key ``(-(p + B), t_last, id_last)``. The read jobs at or before that
key are therefore the first jobs of the full order: if deciding over them
places or holds every free phone, plan() over the whole queue decides the same
(the matcher and the exclusion judgement depend on the phones only). Otherwise
the next, twice as large page is read, until the queue ends.

Decoded specs (device selection, workload requirements) are cached by job id:
a job's spec never changes once enqueued.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, func, or_, select
from sqlalchemy.orm import Session

from farm.queue.capabilities import Requirements, requirements
from farm.queue.models import Job, JobState
from farm.queue.scheduler import (
    AGING_STEP_S,
    DeviceView,
    QueuedJob,
    QueueSnapshot,
    decide,
    effective_priority,
    free_phones,
)
from farm.queue.spec import DeviceSelection

__all__ = ["COLUMNS", "DecodedSpecs", "read_head"]

#: The job columns the scheduler reads.
COLUMNS = (
    Job.id,
    Job.kind,
    Job.priority,
    Job.submitted_at,
    Job.not_before,
    Job.retry_at,
    Job.excluded_serials,
    Job.spec,
)

#: Rows of the first page per free phone: enough for a few jobs the phone does
#: not fit (or that wait) before one it does.
_ROWS_PER_FREE_PHONE = 4
_MIN_PAGE = 16

# The scheduler's sort key of a job.
_Key = tuple[int, datetime, int]


class DecodedSpecs:
    """Device selections and requirements of stored specs, decoded once per job id.

    Jobs of one selection share one :class:`DeviceSelection` object, which the
    scheduler's :class:`~farm.queue.scheduler.Matcher` relies on to match each
    phone once per selection. Holds at most ``limit`` jobs; emptied when full
    (a queue that long is read a page at a time anyway).
    """

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self._selections: dict[str, DeviceSelection] = {}
        self._by_job: dict[int, tuple[DeviceSelection, Requirements]] = {}

    def decoded(self, job_id: int, kind: str, spec: dict[str, Any]) -> tuple[
        DeviceSelection, Requirements
    ]:
        """The selection and requirements of job ``job_id`` whose stored spec is ``spec``."""
        found = self._by_job.get(job_id)
        if found is None:
            if len(self._by_job) >= self.limit:
                self._by_job.clear()
                self._selections.clear()
            raw = spec.get("devices", {})
            key = json.dumps(raw, sort_keys=True)
            selection = self._selections.get(key)
            if selection is None:  # most jobs share a handful of selections
                selection = self._selections[key] = DeviceSelection.model_validate(raw)
            found = self._by_job[job_id] = (selection, requirements(kind, spec))
        return found

    def job(self, row: Row[Any]) -> QueuedJob:
        """The scheduler's view of a row of :data:`COLUMNS`."""
        selection, needs = self.decoded(row.id, row.kind, row.spec)
        return QueuedJob(
            id=row.id,
            kind=row.kind,
            priority=row.priority,
            submitted_at=row.submitted_at,
            devices=selection,
            not_before=row.not_before,
            retry_at=row.retry_at,
            excluded_serials=frozenset(row.excluded_serials or ()),
            needs=needs,
        )


def _page(session: Session, after: _Key | None, limit: int) -> Sequence[Row[Any]]:
    """Up to ``limit`` queued jobs after ``after`` (priority, submitted_at, id), in that order."""
    query = select(*COLUMNS).where(Job.state == JobState.QUEUED)
    if after is not None:
        priority, submitted_at, job_id = after
        query = query.where(
            or_(
                Job.priority < priority,
                and_(
                    Job.priority == priority,
                    or_(
                        Job.submitted_at > submitted_at,
                        and_(Job.submitted_at == submitted_at, Job.id > job_id),
                    ),
                ),
            )
        )
    order = (Job.priority.desc(), Job.submitted_at, Job.id)
    return session.execute(query.order_by(*order).limit(limit)).all()


def read_head(
    session: Session,
    devices: Sequence[DeviceView],
    now: datetime,
    specs: DecodedSpecs,
    *,
    seed: int = 0,
    kinds: Collection[str] | None = None,
    aging_step_s: float = AGING_STEP_S,
    device_kinds: Collection[str] | None = None,
) -> QueueSnapshot:
    """The queued jobs that settle a plan at ``now``, and ``devices``.

    ``plan(head, now, seed=seed, ...)`` equals ``plan(store.snapshot(), now,
    seed=seed, ...)`` for the same seed, kinds (``lease_s_by_kind.keys()``),
    aging step and device kinds (the module doc says why).

    Args:
        session: an open transaction: every page is read in it.
        devices: every known phone.
        now: the plan's time (aware UTC).
        specs: the decoded-spec cache to use.
        seed: the seed the plan will be given.
        kinds: the kinds that may start (the plan's ``lease_s_by_kind`` keys);
            None: all.
        aging_step_s: seconds of waiting worth one priority point.
        device_kinds: the device kinds that may take work (the plan's); None: all.

    Returns:
        A snapshot whose jobs are the first queued jobs in the scheduler's
        order (every queued job if no prefix settles the plan).
    """
    free = set(free_phones(devices, now, device_kinds))
    if not free:
        return QueueSnapshot([], devices)
    oldest = session.scalar(select(func.min(Job.submitted_at)).where(Job.state == JobState.QUEUED))
    if oldest is None:
        return QueueSnapshot([], devices)
    bonus_max = int(max(0.0, (now - oldest).total_seconds()) // aging_step_s)
    jobs: list[QueuedJob] = []
    after: _Key | None = None
    limit = max(_MIN_PAGE, _ROWS_PER_FREE_PHONE * len(free))
    while True:
        rows = _page(session, after, limit)
        jobs += [specs.job(row) for row in rows]
        if len(rows) < limit:
            return QueueSnapshot(jobs, devices)  # the whole queue
        last = rows[-1]
        after = (last.priority, last.submitted_at, last.id)
        bound = (-(last.priority + bonus_max), last.submitted_at, last.id)
        settled = [
            j
            for j in jobs
            if (-effective_priority(j, now, aging_step_s), j.submitted_at, j.id) <= bound
        ]
        head = QueueSnapshot(settled, devices)
        decisions = decide(head, now, seed=seed, kinds=kinds, aging_step_s=aging_step_s,
                           device_kinds=device_kinds)
        if free.issubset(decisions.given):
            return head
        limit *= 2
