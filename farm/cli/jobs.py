"""``farmctl jobs | job ID | cancel ID | logs``; ``wait ID`` (:mod:`farm.cli.wait`) re-exported."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import click

from farm.cli.output import Column, echo_json, plain, print_table
from farm.cli.state import CliState, pass_state, warn_if_no_farmd
from farm.cli.wait import EXIT_TIMEOUT, WaitTimedOut, wait, wait_ended
from farm.click_types import JOB_ID, LIMIT
from farm.errors import FarmError
from farm.queue.states import JobState

if TYPE_CHECKING:
    from farm.queue.records import AttemptView, JobView, ResultView
    from farm.tuning import TuneCounters

__all__ = ["EXIT_FAILED", "EXIT_TIMEOUT", "LOAD_COLUMNS", "RESULT_COLUMNS", "WaitTimedOut",
           "cancel", "job", "jobs", "load_rows", "logs_", "result_row", "tuning_line", "wait",
           "wait_ended"]

#: ``farmctl wait``: the job ended failed or cancelled.
EXIT_FAILED = FarmError.exit_code

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def result_row(view: ResultView) -> dict[str, Any]:
    """One line of the results table: the result's ids and headline figures.

    ``speedup`` only where a tuned build exists (:func:`farm.tuning.outcome.speedup_text`):
    a model tune whose tuned build applied no record timed one library twice.
    """
    from farm.tuning import speedup_text

    summary = view.summary
    return {
        "id": view.id, "job_id": view.job_id, "attempt_id": view.attempt_id,
        "kind": summary.get("kind"), "mean_s": summary.get("mean_s"),
        "gflops": summary.get("gflops") or summary.get("tuned_gflops"),
        "speedup": summary.get("speedup") if speedup_text(summary) else None,
        "samples": len(view.samples), "unit": view.unit, "created_at": view.created_at,
    }


def load_rows(view: ResultView) -> list[dict[str, Any]]:
    """Per phone of a model result: load time, first run, peak memory (each phone's last run).

    Empty for results without them (other kinds, results stored before they were kept).
    """
    runs = view.summary.get("runs")
    last: dict[str, dict[str, Any]] = {}
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, dict) and isinstance(run.get("load_s"), (int, float)):
            last[str(run.get("serial"))] = run
    return [{"serial": serial, "load": f"{run['load_s'] * 1e3:.3f} ms",
             "first_run": (f"{run['first_run_s'] * 1e3:.3f} ms"
                           if isinstance(run.get("first_run_s"), (int, float)) else None),
             "peak_memory": (f"{run['peak_memory_kb'] / 1024:.1f} MiB"
                             if isinstance(run.get("peak_memory_kb"), int) else None)}
            for serial, run in last.items()]


LOAD_COLUMNS = [Column("serial", "phone"), Column("load", justify="right"),
                Column("first_run", "first run", "right"),
                Column("peak_memory", "peak memory", "right")]
RESULT_COLUMNS = [
    Column("id", "result", "right"), Column("job_id", "job", "right"),
    Column("attempt_id", "attempt", "right"),
    Column("kind"), Column("mean_s", justify="right"), Column("gflops", justify="right"),
    Column("speedup", justify="right"), Column("samples", justify="right"),
    Column("created_at", "created"),
]
_JOB_COLUMNS = [
    Column("id", "job", "right"), Column("kind"), Column("state"),
    Column("priority", "prio", "right"),
    Column("attempts", justify="right"), Column("submitted_at", "submitted"),
    Column("finished_at", "finished"), Column("error"), Column("waiting"),
]
#: ``farmctl jobs``: each job's workload too (``gemm n=512 float32``), so jobs of one
#: kind tell apart without ``job ID``.
_JOBS_COLUMNS = [*_JOB_COLUMNS[:2], Column("workload"), *_JOB_COLUMNS[2:]]


def _waiting(state: CliState, views: list[JobView]) -> dict[int, str]:
    """Why each queued job of ``views`` is not running, from one snapshot of the queue."""
    return state.queue.waiting(views)


def _get_job(state: CliState, job_id: int) -> JobView:
    return state.queue.job(job_id)


@click.command()
@click.option("--state", "states", multiple=True, type=click.Choice([s.value for s in JobState]),
              help="Only jobs in this state (repeatable); unknown: in a state a newer farm "
                   "sharing the database wrote, shown as e.g. 'paused (unknown)'.")
@click.option("--limit", type=LIMIT, default=100, show_default=True)
@_JSON
@pass_state
def jobs(state: CliState, states: tuple[str, ...], limit: int, as_json: bool) -> None:
    """List jobs, newest first, each with its workload and why it waits."""
    rows = state.listing("jobs", {"states": list(states), "limit": limit, "as_json": as_json})
    if as_json:
        echo_json(rows)
        return
    print_table(rows, _JOBS_COLUMNS, "jobs")
    if not state.listed_by_farmd:
        warn_if_no_farmd(state)


def _attempt_row(view: AttemptView) -> dict[str, Any]:
    return {**plain(view), "serials": list(view.serials), "state": view.state,
            "started_at": view.started_at, "finished_at": view.finished_at}


_ATTEMPT_COLUMNS = [
    Column("id", "attempt", "right"), Column("serials"), Column("state"),
    Column("started_at", "started"),
    Column("finished_at", "finished"), Column("error_kind"), Column("error"),
]


@click.command()
@click.argument("job_id", type=JOB_ID)
@_JSON
@pass_state
def job(state: CliState, job_id: int, as_json: bool) -> None:
    """Show one job: its state and result first, then its tuning, attempts and spec."""
    view = _get_job(state, job_id)
    attempts = state.queue.attempts(job_id)
    result = next(iter(state.queue.results(job_id)), None)
    waiting = _waiting(state, [view]).get(job_id)
    progress = _tuning(state, job_id)
    if as_json:
        echo_json({"job": view, "waiting": waiting, "attempts": attempts, "result": result,
                   "tuning": None if progress is None else _progress_json(progress)})
        return
    from farm.api.listings import job_row
    from farm.tuning import outcome_lines

    print_table([{**job_row(view), "waiting": waiting}], _JOB_COLUMNS, f"job {job_id}")
    if waiting is not None:
        click.echo(f"waiting: {waiting}")
    if result is not None:
        for line in outcome_lines(result.summary):
            click.echo(line)
        print_table([result_row(result)], RESULT_COLUMNS, "result")
        from farm.cli.ab_table import print_ab  # here: farmctl's listings load no database layer

        print_ab(result)
        if loads := load_rows(result):
            print_table(loads, LOAD_COLUMNS, "library load, first run and peak memory")
    if progress is not None:
        _print_progress(progress, ended=view.state.ended)
    print_table([_attempt_row(a) for a in attempts], _ATTEMPT_COLUMNS, "attempts")
    # One line, last: the spec is what was asked, the lines above what happened.
    click.echo(f"spec: {json.dumps(plain(view.spec), sort_keys=True)}")


def _tuning(state: CliState, job_id: int) -> TuneCounters | None:
    """A tuning job's progress from its work folder (None for other jobs)."""
    return state.queue.tuning(job_id)


def _progress_json(counters: TuneCounters) -> dict[str, Any]:
    return {**counters.to_dict(), "tasks_done": counters.tasks_done,
            "trials_asked": counters.trials_asked, "trials_measured": counters.trials_measured}


def tuning_line(counters: TuneCounters, ended: bool = False) -> str:
    """The tuning's phase and counts in one line, true of a running job and of an ended one.

    A task is "done" once its planned trials are measured; a job stopped by
    its time budget ends with fewer, so an ended job says how many tasks were
    tuned and how many got all their trials, not "0/55 tasks done".

    >>> from farm.tuning.counters import TaskProgress, TuneCounters
    >>> c = TuneCounters(tasks=(TaskProgress("a", 0, 4, 1),), phase="done: ...", model_tasks=2)
    >>> print(tuning_line(c, ended=True))  # doctest: +NORMALIZE_WHITESPACE
    tuning done: 1 of the model's 2 tasks tuned, 0 of them got all their planned trials;
    1/4 trials measured
    """
    of = "" if counters.model_tasks is None else f" of the model's {counters.model_tasks}"
    counts = f"{counters.trials_measured}/{counters.trials_asked} trials measured"
    if ended:
        return (f"tuning done: {len(counters.tasks)}{of} tasks tuned, {counters.tasks_done} of "
                f"them got all their planned trials; {counts}")
    eta = "" if counters.eta_s is None else f", about {counters.eta_s:.0f} s left"
    phase = f" ({counters.phase})" if counters.phase and counters.phase != "tuning" else ""
    return (f"tuning{phase}: {counters.tasks_done}/{len(counters.tasks)} tasks done{of}, "
            f"{counts}{eta}")


def _print_progress(counters: TuneCounters, ended: bool = False) -> None:
    click.echo(tuning_line(counters, ended))
    if counters.trials_per_phone_hour is not None:
        limit = ("" if counters.limit_per_phone_hour is None
                 else f" (measurement-bound limit {counters.limit_per_phone_hour:.0f})")
        first = ("" if counters.first_trial_s is None
                 else f", first trial {counters.first_trial_s:.0f} s after the attempt's start")
        click.echo(f"throughput: {counters.trials_per_phone_hour:.0f} measured trials per "
                   f"phone-hour{limit}{first}")
    print_table([{"task": t.name, "trials": f"{t.trials_measured}/{t.trials_asked}",
                  "best_s": t.best_s} for t in counters.tasks],
                [Column("task"), Column("trials", justify="right"),
                 Column("best_s", "best s", "right")], "tuning tasks")


@click.command()
@click.argument("job_id", type=JOB_ID)
@pass_state
def cancel(state: CliState, job_id: int) -> None:
    """Cancel a queued or running job (a running attempt is stopped by farmd)."""
    state.queue.cancel(job_id)
    click.echo(f"job {job_id} cancelled")


def _attempt_entries(attempts: list[AttemptView]) -> list[dict[str, Any]]:
    entries = []
    for a in attempts:
        entries.append({"at": a.started_at, "source": "attempt", "serial": ",".join(a.serials),
                        "job_id": a.job_id, "text": f"attempt {a.id} started"})
        if a.finished_at is not None:
            text = f"attempt {a.id} {a.state.value}"
            if a.error:
                text += f": {a.error_kind}: {a.error}"
            entries.append({"at": a.finished_at, "source": "attempt", "serial": ",".join(a.serials),
                            "job_id": a.job_id, "text": text})
    return entries


@click.command(name="logs")
@click.option("--serial", help="Only this phone's events.")
@click.option("--job", "job_id", type=JOB_ID,
              help="Only this job's attempts and the events they caused.")
@click.option("--limit", type=LIMIT, default=200, show_default=True)
@_JSON
@pass_state
def logs_(state: CliState, serial: str | None, job_id: int | None, limit: int,
          as_json: bool) -> None:
    """Device events and attempt errors from the database, oldest first."""
    store = state.store
    if job_id is not None:
        attempts = store.attempts(_get_job(state, job_id).id)
    else:
        attempts = [a for j in store.list_jobs(limit=limit) for a in store.attempts(j.id)]
    if serial is not None:
        attempts = [a for a in attempts if serial in a.serials]
    events = store.device_events(serial, limit=10 * limit if job_id is not None else limit)
    if job_id is not None:
        ids = "|".join(str(a.id) for a in attempts) or "-"
        mentions = re.compile(rf"\battempt ({ids})\b|\bjob {job_id}\b")
        events = [e for e in events if mentions.search(e.reason)]
    entries = _attempt_entries(attempts) + [
        {"at": e.at, "source": "device", "serial": e.serial, "job_id": None,
         "text": f"{e.from_state or '-'} -> {e.to_state}" + (f" ({e.reason})" if e.reason else "")}
        for e in reversed(events)  # the store gives newest first; ties keep their order
    ]
    entries.sort(key=lambda e: e["at"])
    entries = entries[-limit:]
    if as_json:
        echo_json(entries)
        return
    print_table(entries, [Column("at"), Column("source"), Column("serial"), Column("job_id", "job"),
                          Column("text")], "log entries")


