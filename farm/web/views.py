"""What the dashboard's pages show, as JSON data: read from the store, never written.

Each function here is one page's view, built from the serializers farmctl's
``--json`` already uses (:func:`farm.cli.devices.device_row`,
:func:`farm.cli.output.plain`, ``farmctl compare --json``'s report), so a phone,
a job or a comparison looks the same in the CLI, the API and the browser.
Every view is plain data (JSON types only): :mod:`farm.web.data` serves it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from farm.cli.compare import _report_json
from farm.cli.devices import device_row
from farm.cli.output import plain
from farm.config import Settings
from farm.errors import UserFault
from farm.jobs.tune_progress import read_counters
from farm.jobs.tune_records import trial_run_s
from farm.kinds import KINDS
from farm.queue.models import JobState
from farm.queue.records import AttemptView, JobView
from farm.queue.store import Store
from farm.queue.waiting import wait_reasons
from farm.results.compare import compare_refs
from farm.results.rows import sample_rows
from farm.results.spreads import PhoneSpread, by_workload, noise_label, phone_spreads
from farm.runner.execute import tune_work_dir

__all__ = ["compare_view", "fleet_view", "history_view", "incidents_view", "job_view",
           "queue_view", "trials_view"]

#: The most running or queued jobs one queue page lists.
_QUEUE_LIMIT = 500
_ENDED = [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED]


def _running_attempts(store: Store) -> dict[int, AttemptView]:
    """Attempt id -> attempt, for the unfinished attempts of running jobs."""
    return {a.id: a for job in store.list_jobs([JobState.RUNNING], _QUEUE_LIMIT)
            for a in store.attempts(job.id) if a.finished_at is None}


def fleet_view(store: Store, settings: Settings, now: datetime) -> list[dict[str, Any]]:
    """Every phone and board as ``farmctl devices --json`` shows it, with its job and reservation.

    Returns:
        One row per device: :func:`~farm.cli.devices.device_row` (its
        ``shown_state`` says ``unreachable`` when its host stopped heartbeating)
        plus ``job_id`` (the job its running attempt belongs to, or None) and
        ``reservation`` (its reservation in force as
        :class:`~farm.queue.reservations.ReservationView`'s fields, or None).
        Its incidents come from :func:`incidents_view`.
    """
    attempts = _running_attempts(store)
    reserved = {r.serial: r for r in store.reservations(
        now=now, key_prefix=settings.tracker.key)}
    dead = store.dead_host_ids(now, settings.hosts.dead_after_s)
    rows = []
    for record in store.list_devices():
        reservation = reserved.get(record.serial)
        row = device_row(record, next(iter(store.health_samples(record.serial, limit=1)), None),
                         reservation, dead_hosts=dead)
        attempt = attempts.get(record.attempt_id) if record.attempt_id is not None else None
        row["job_id"] = None if attempt is None else attempt.job_id
        row["reservation"] = None if reservation is None else plain(reservation)
        rows.append(row)
    return rows


def _job_json(view: JobView, attempts: Iterable[AttemptView] = ()) -> dict[str, Any]:
    """A job as ``farmctl jobs --json`` shows it, with its attempts' phones and hosts."""
    mine = list(attempts)
    current = next((a for a in reversed(mine) if a.finished_at is None), None)
    return {**plain(view),
            "serials": list(current.serials) if current else [],
            "host": current.host if current else None,
            "started_at": plain(current.started_at) if current else None}


def queue_view(store: Store, settings: Settings, now: datetime) -> dict[str, Any]:
    """The queue: running jobs, queued ones with the reason each waits, recent ends.

    Returns:
        ``{"at", "running": [job...], "queued": [job + "waiting"...], "ended": [job...]}``,
        each job as ``farmctl jobs --json``; running jobs also carry their
        current attempt's ``serials``, ``host`` and ``started_at``. Queued jobs
        come oldest first (the order they are served in at equal priority).
    """
    running = store.list_jobs([JobState.RUNNING], _QUEUE_LIMIT)
    queued = list(reversed(store.list_jobs([JobState.QUEUED], _QUEUE_LIMIT)))
    ended = store.list_jobs(_ENDED, settings.web.recent_ends) if settings.web.recent_ends else []
    waiting = wait_reasons(store.snapshot(), now, known_kinds=list(KINDS),
                           job_ids={j.id for j in queued}) if queued else {}
    return {
        "at": plain(now),
        "running": [_job_json(j, store.attempts(j.id)) for j in running],
        "queued": [{**_job_json(j), "waiting": waiting.get(j.id)} for j in queued],
        "ended": [_job_json(j) for j in ended],
    }


def _spread_json(figure: PhoneSpread) -> dict[str, Any]:
    """One phone's spread (numbers in the figure's unit) and its noise label."""
    return {**plain(figure), "noise": noise_label(figure)}


def trials_view(data_dir: Path, job_id: int) -> dict[str, list[float | None]]:
    """A tuning job's recorded trials so far, for its live chart.

    Returns:
        ``{"trial_run_s": [...], "best_run_s": [...]}``: each recorded trial's
        mean run time in seconds (None where its measurement failed), in the
        order measured, and the best so far after each; both empty before the
        first trial (or for a job that does not tune).
    """
    trials = trial_run_s(tune_work_dir(data_dir, job_id))
    best: list[float | None] = []
    for run_s in trials:
        last = best[-1] if best else None
        best.append(run_s if last is None or (run_s is not None and run_s < last) else last)
    return {"trial_run_s": trials, "best_run_s": best}


def _tuning_json(data_dir: Path, job_id: int) -> dict[str, Any] | None:
    """A tuning job's counters and its trials' run times so far (None for other jobs)."""
    counters = read_counters(tune_work_dir(data_dir, job_id))
    trials = trials_view(data_dir, job_id)
    if counters is None and not trials["trial_run_s"]:
        return None
    return {
        **(counters.to_dict() if counters else {}),
        "trials_asked": counters.trials_asked if counters else None,
        "trials_measured": counters.trials_measured if counters else None,
        "tasks_done": counters.tasks_done if counters else None,
        **trials,
    }


def incidents_view(store: Store, settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """Each device's newest ``[web] incidents`` events, newest first, by serial.

    Returns:
        ``{serial: [{"at", "from_state", "to_state", "reason"}, ...]}``.
    """
    limit = settings.web.incidents
    return {record.serial: [
        {"at": plain(e.at), "from_state": e.from_state, "to_state": e.to_state,
         "reason": e.reason} for e in store.device_events(record.serial, limit=limit)
    ] if limit else [] for record in store.list_devices()}


def job_view(store: Store, settings: Settings, job_id: int, now: datetime) -> dict[str, Any]:
    """One job: spec, attempts, tuning progress and results per phone with their spread.

    Returns:
        ``{"at", "job", "waiting", "attempts", "result", "tuning", "phones"}``:
        ``job`` and ``attempts`` as ``farmctl job --json``; ``tuning`` (None
        unless it tunes) the counters plus ``trial_run_s`` (each recorded
        trial's mean run time in s, None where it failed, in order) and
        ``best_run_s`` (the best so far after each trial); ``phones`` the
        spread of each phone's samples (``farmctl results``).

    Raises:
        UserFault: no job ``job_id``.
    """
    view = store.get_job(job_id)
    if view is None:
        raise UserFault(f"no job {job_id}")
    attempts = store.attempts(job_id)
    waiting = None
    if view.state is JobState.QUEUED:
        waiting = wait_reasons(store.snapshot(), now, known_kinds=list(KINDS),
                               job_ids={job_id}).get(job_id)
    result = next(iter(store.results(job_id)), None)
    figures = phone_spreads(sample_rows(store, job_ids=[job_id]), settings.results.max_cv)
    return {
        "at": plain(now), "job": _job_json(view, attempts), "waiting": waiting,
        "attempts": plain(attempts),
        "result": None if result is None else {
            "id": result.id, "summary": plain(result.summary), "unit": result.unit,
            "samples": len(result.samples), "created_at": plain(result.created_at)},
        "tuning": _tuning_json(Path(settings.data_dir), job_id),
        "phones": [_spread_json(f) for f in figures],
    }


def compare_view(store: Store, settings: Settings, a: str, b: str) -> dict[str, Any]:
    """``farmctl compare A B --json`` with the configured threshold and alpha.

    Raises:
        UserFault: as :func:`farm.results.compare.compare_refs` (unknown or
            unfinished job or run, different workloads).
    """
    report = compare_refs(store, a, b, threshold=settings.results.change_threshold,
                          alpha=settings.results.alpha)
    return _report_json(report)


def history_view(store: Store, settings: Settings, workload: str | None) -> dict[str, Any]:
    """A workload's per-phone figures over time (``farmctl results --history``).

    Returns:
        ``{"workloads": [label...], "workload", "phones": [spread...]}``: every
        workload of the newest ``[web] history_limit`` results, and the chosen
        one's figures oldest first (none when ``workload`` is None).

    Raises:
        UserFault: ``workload`` has no results among them.
    """
    figures = phone_spreads(sample_rows(store, limit=settings.web.history_limit),
                            settings.results.max_cv)
    known = sorted({f.workload for f in figures})
    if workload is not None and workload not in known:
        raise UserFault(f"no results of workload {workload!r} in the newest "
                        f"{settings.web.history_limit} (known: {', '.join(known) or 'none'})")
    chosen = by_workload(figures, workload) if workload is not None else []
    return {"workloads": known, "workload": workload,
            "phones": [_spread_json(f) for f in chosen]}
