"""Recurring jobs: ``[[schedules]]`` from the config as APScheduler 3 cron triggers.

farmd passes in its scheduler; each schedule becomes one job on it whose firing
enqueues the schedule's spec. Specs are validated here, when farmd starts, so a
typo in the config stops farmd with the field named instead of failing every
night at 01:00 in silence.

A firing missed while farmd was down is not made up later (``coalesce`` and a
short ``misfire_grace_time``): a tuning run queued hours late would collide
with the day's work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import tzinfo
from typing import Any

import structlog
from apscheduler.job import Job as SchedulerJob
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.cron import CronTrigger

from farm.clock import Clock
from farm.config import Schedule
from farm.errors import ConfigError, FarmError, SpecError
from farm.queue.spec import parse_spec
from farm.queue.store import Store

__all__ = ["MISFIRE_GRACE_S", "install_schedules", "schedule_id", "validate_schedules"]

log = structlog.get_logger(__name__)

MISFIRE_GRACE_S = 300
_ID_PREFIX = "farm-schedule:"


def schedule_id(index: int, schedule: Schedule) -> str:
    """The scheduler job id of a schedule: by name if it has one, else by position."""
    return f"{_ID_PREFIX}{schedule.name or index}"


def fire(store: Store, clock: Clock, spec: Mapping[str, Any], name: str) -> int | None:
    """Enqueue one firing of a schedule; returns the job id (None if the store refused).

    Errors are logged, not raised: APScheduler would only log them itself, and
    one failed firing must not stop the next.
    """
    try:
        job_id = store.enqueue(spec, clock.now())
    except FarmError as exc:
        log.error("schedule_not_enqueued", schedule=name, reason=str(exc))
        return None
    log.info("schedule_fired", schedule=name, job_id=job_id)
    return job_id


def validate_schedules(schedules: Sequence[Schedule]) -> list[dict[str, Any]]:
    """Parse every schedule's spec; farmd calls this before it starts anything.

    Returns:
        The specs as the queue stores them, in the order of ``schedules``.

    Raises:
        ConfigError: a spec is invalid; the key names the schedule and field,
            e.g. ``schedules.0.spec.params.n``.
    """
    specs = []
    for index, schedule in enumerate(schedules):
        try:
            specs.append(parse_spec(schedule.spec).to_json())
        except SpecError as exc:
            raise ConfigError(f"schedules.{index}.spec.{exc.field}", exc.reason) from exc
    return specs


def install_schedules(
    scheduler: BaseScheduler,
    schedules: Sequence[Schedule],
    store: Store,
    clock: Clock,
    *,
    timezone: tzinfo | None = None,
) -> list[SchedulerJob]:
    """Add one cron job per schedule to ``scheduler`` (started or not).

    Re-installing replaces the jobs by id, so a config reload does not double them.

    Args:
        scheduler: farmd's APScheduler 3 scheduler.
        schedules: ``settings.schedules``.
        store: where firings enqueue.
        clock: stamps the submit time.
        timezone: the cron expressions' time zone; the scheduler's by default.

    Returns:
        The scheduler jobs, in the order of ``schedules``.

    Raises:
        ConfigError: a spec is invalid; the key names the schedule and field,
            e.g. ``schedules.0.spec.params.n``.
    """
    installed = []
    specs = validate_schedules(schedules)
    for index, (schedule, spec) in enumerate(zip(schedules, specs, strict=True)):
        trigger = CronTrigger.from_crontab(schedule.cron, timezone=timezone or scheduler.timezone)
        job_id = schedule_id(index, schedule)
        installed.append(scheduler.add_job(
            fire, trigger, args=(store, clock, spec, schedule.name or str(index)), id=job_id,
            name=job_id, replace_existing=True, coalesce=True, misfire_grace_time=MISFIRE_GRACE_S,
            max_instances=1,
        ))
        log.info("schedule_installed", schedule=job_id, cron=schedule.cron)
    return installed
