"""The job queue: specs, storage with leases, and the pure scheduler.

::

    spec.py         parse_spec(dict) -> JobSpec, or SpecError naming the field
    catalog.py      the job kinds as the queue sees them, installed by farm.kinds
    models.py       the tables (SQLAlchemy 2 ORM); migrations/ holds their history
    model_*.py      those tables by aggregate: base, devices, jobs, tuning, access
    db.py           engine settings per backend, migrate()
    scheduler.py    plan(snapshot, now) -> [Assignment]: pure
    plan_rows.py    the rows plan() reads and returns (QueueSnapshot, Assignment)
    matching.py     which phones fit a job, which are free, in which order jobs go
    capabilities.py requirements(kind, spec): what a job needs of a phone (target, work-group)
    head.py         read_head: the queued jobs a plan needs, paged in the scheduler's order
    waiting.py      wait_reasons(snapshot, now), refusal(spec, devices): why a job waits
    store.py        Store: the engine and the transaction; composes the facades below
    job_ops.py      Store's jobs: enqueue, read, count, cancel
    attempt_ops.py  Store's attempts: head, claim, heartbeat, reap, reclaim, finish, fail_attempt
    result_ops.py   Store's results: results and samples, snapshots, tuning records
    claims.py       the transactions behind claim and heartbeat
    lifecycle.py    the transactions behind reap/requeue/finish/fail and the retry rule
    endings.py      cancel and reclaim, and when a cancelled attempt's phones are freed
    devices.py      Store's devices: states, health, drain, serving keys, events
    health_samples.py Store's health samples: record, read, thin
    reservations.py Store's reservations: reserve, unreserve, expire (ReservationView)
    regressions.py  Store's regressions: one row per phone the regression watch flags
    thinning.py     which health samples to delete, one per phone per bucket kept
    transitions.py  idempotent device transitions that write event rows
    records.py      the frozen values Store takes and returns

A daemon tick is::

    store.reap(now)
    head = store.head(now, seed=tick, kinds=leases.keys(),  # not the whole queue
                      host=settings.host_id, device_kinds=device_kinds)
    claims = store.claim(plan(head, now, seed=tick, lease_s_by_kind=leases,
                              device_kinds=device_kinds), now, host=settings.host_id)

with ``leases`` the lease of each job kind this farm knows and ``device_kinds``
the device kinds it has controllers for: a newer farm's job kind or device
kind sharing the database is neither started nor given work here.

and once at farmd start, before any claim: ``store.reclaim(settings.host_id, reason, now)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.lazy import lazy_names

if TYPE_CHECKING:
    from farm.queue.db import default_url
    from farm.queue.models import AttemptState, DeviceHealth, DeviceState, JobState
    from farm.queue.records import (
        AttemptView,
        Claim,
        Decision,
        DeviceRecord,
        EventRecord,
        Failure,
        JobView,
        Outcome,
        ResultView,
        SnapshotData,
        TuningData,
    )
    from farm.queue.scheduler import Assignment, DeviceView, QueuedJob, QueueSnapshot, plan
    from farm.queue.spec import JobSpec, parse_spec
    from farm.queue.store import Store

__all__ = [
    "Assignment",
    "AttemptState",
    "AttemptView",
    "Claim",
    "Decision",
    "DeviceHealth",
    "DeviceRecord",
    "DeviceState",
    "DeviceView",
    "EventRecord",
    "Failure",
    "JobSpec",
    "JobState",
    "JobView",
    "Outcome",
    "QueueSnapshot",
    "QueuedJob",
    "ResultView",
    "SnapshotData",
    "Store",
    "TuningData",
    "default_url",
    "parse_spec",
    "plan",
]

#: Where each name lives: imported on first use (PEP 562), so that importing
#: one module of the package (``farm.queue.models``) does not load the store, the
#: scheduler and alembic with it (farmctl's start, issue 25).
_SOURCES = {
    "Assignment": "farm.queue.scheduler",
    "AttemptState": "farm.queue.models",
    "AttemptView": "farm.queue.records",
    "Claim": "farm.queue.records",
    "Decision": "farm.queue.records",
    "DeviceHealth": "farm.queue.models",
    "DeviceRecord": "farm.queue.records",
    "DeviceState": "farm.queue.models",
    "DeviceView": "farm.queue.scheduler",
    "EventRecord": "farm.queue.records",
    "Failure": "farm.queue.records",
    "JobSpec": "farm.queue.spec",
    "JobState": "farm.queue.models",
    "JobView": "farm.queue.records",
    "Outcome": "farm.queue.records",
    "QueueSnapshot": "farm.queue.scheduler",
    "QueuedJob": "farm.queue.scheduler",
    "ResultView": "farm.queue.records",
    "SnapshotData": "farm.queue.records",
    "Store": "farm.queue.store",
    "TuningData": "farm.queue.records",
    "default_url": "farm.queue.db",
    "parse_spec": "farm.queue.spec",
    "plan": "farm.queue.scheduler",
}


__getattr__ = lazy_names(__name__, _SOURCES)
