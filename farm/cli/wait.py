"""``farmctl wait ID``: sleep until a job ends; the exit code says how it ended.

Also :func:`wait_ended`, which ``compare --confirm`` waits with. Its timeout
error (:class:`farm.client.errors.WaitTimedOut`) is the one :mod:`farm.client`
raises as ``wait`` does.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from farm.cli.output import amount
from farm.cli.state import CliState, pass_state, warn_if_no_farmd
from farm.click_types import JOB_ID, Seconds
from farm.client.errors import EXIT_TIMEOUT, WaitTimedOut
from farm.errors import FarmError
from farm.queue.states import JobState

if TYPE_CHECKING:
    from farm.queue.records import JobView
    from farm.results.rows import SampleRow
    from farm.runner.wake import JobWaiter

__all__ = ["EXIT_TIMEOUT", "WAIT_MAX_S", "WaitTimedOut", "wait", "wait_ended"]


#: The longest ``farmctl wait --timeout`` (30 days): longer is a typo, not a plan.
WAIT_MAX_S = 30 * 24 * 3600.0


@click.command(epilog="Exit codes: 0 the job succeeded; 1 it failed or was cancelled; "
                      "2 usage error or no such job; 124 it had not ended after --timeout.")
@click.argument("job_id", type=JOB_ID)
@click.option("--timeout", "timeout_s", type=Seconds(0, WAIT_MAX_S),
              help="Give up after this many seconds (exit 124); default: wait until it ends.")
@click.option("--poll", "poll_s", type=Seconds(0, 3600, min_open=True), default=1.0,
              show_default=True, help="Seconds between checks.")
@pass_state
def wait(state: CliState, job_id: int, timeout_s: float | None, poll_s: float) -> None:
    """Wait until a job ends; the exit code says how it ended (see below).

    On a farm host it sleeps on the wake farmd uses (farm.runner.wake.JobWaiter):
    the attempt's end wakes it at once; ``--poll`` is only the safety net.
    A succeeded job's line gives each phone's median and sample count, the
    figures of ``farmctl results --job ID``, and a model tune's best build.
    """
    view = wait_ended(state, job_id, timeout_s, poll_s)
    if view.state is not JobState.SUCCEEDED:
        raise FarmError(f"job {job_id} {view.shown_state}: {view.error or 'no reason recorded'}")
    figures = [_medians(state.queue.sample_rows(job_id=job_id))]
    result = next(iter(state.queue.results(job_id)), None)
    if result is not None and isinstance(best := result.summary.get("best_build"), str):
        figures.append(f"best build {best}")
    line = ", ".join(figure for figure in figures if figure)
    click.echo(f"job {job_id} succeeded" + (f": {line}" if line else ""))


def wait_ended(state: CliState, job_id: int, timeout_s: float | None = None,
               poll_s: float = 1.0) -> JobView:
    """The job's view once it ended (``farmctl wait``, ``compare --confirm``).

    On a farm host it sleeps on the wake farmd uses (farm.runner.wake.JobWaiter);
    through ``--server`` it polls every ``poll_s``.

    Raises:
        WaitTimedOut: it had not ended after ``timeout_s``.
    """
    with contextlib.ExitStack() as stack:
        waiter = None
        if state.server is None:
            from farm.runner.wake import JobWaiter

            waiter = stack.enter_context(JobWaiter(Path(state.settings.data_dir),
                                                   state.settings.database_url))
        return _wait_for(state, job_id, timeout_s, poll_s, waiter)


def _wait_for(state: CliState, job_id: int, timeout_s: float | None, poll_s: float,
              waiter: JobWaiter | None) -> JobView:
    """The job's view once it ended; WaitTimedOut after ``timeout_s``."""
    view = state.queue.job(job_id)
    if not view.state.ended:
        warn_if_no_farmd(state, "the job will not progress until farmd starts")
    with _progress_bar(_describe(view)) as show:
        start_s = time.monotonic()
        while not view.state.ended:
            left_s = None if timeout_s is None else timeout_s - (time.monotonic() - start_s)
            if left_s is not None and left_s <= 0:
                raise WaitTimedOut(f"job {job_id} still {view.shown_state} after {timeout_s:g} s")
            sleep_s = poll_s if left_s is None else min(poll_s, left_s)
            if waiter is not None:
                waiter.wait(sleep_s)
            else:
                time.sleep(sleep_s)
            view = state.queue.job(job_id)
            if view.state.ended:
                break
            if show is not None:  # a tuning job's bar counts measured trials; others spin
                tuning = state.queue.tuning(job_id)
                show(_describe(view), tuning.trials_asked if tuning and tuning.tasks else None,
                     tuning.trials_measured if tuning else 0)
    return view


@contextlib.contextmanager
def _progress_bar(description: str) -> Iterator[Callable[[str, int | None, int], None] | None]:
    """``wait``'s bar on stderr, for people: ``update(description, total, completed)``.

    None when stderr is not a terminal (a script, a log): then rich is not even
    imported, and ``wait`` does not read the tuning counters it would show.
    """
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn()]
    console = Console(stderr=True)
    with Progress(*columns, transient=True, console=console,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task(description, total=None)
        yield lambda shown, total, completed: progress.update(
            task, description=shown, total=total, completed=completed)


def _describe(view: JobView) -> str:
    return (f"job {view.id} {view.kind}: {view.shown_state} "
            f"(attempt {view.attempts_made}/{view.attempts_max})")


def _medians(rows: Sequence[SampleRow]) -> str:
    """Each phone's median, as ``farmctl results`` shows it: ``median 12.345 ms on R1 (n=60)``.

    The same samples as :func:`~farm.results.spreads.phone_spreads` takes: each
    phone's last measurement (a noisy phone's re-run replaces the first,
    :func:`~farm.results.rows.latest_repetition`), never pooled over phones; the
    same median (the middle value, or the mean of the two middle ones, as
    numpy's); empty without samples. Computed here without numpy: ``wait`` runs
    beside the attempt it waits for.

    Args:
        rows: one job's flat sample rows (:meth:`farm.api.service.Queue.sample_rows`).
    """
    from farm.results.rows import latest_repetition

    # An A/B job's builds are two figures of one phone, as in phone_spreads.
    by_serial: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in latest_repetition(rows):
        by_serial[(row.serial or "", row.arm or "")].append(row.value)
    unit = rows[0].unit if rows else ""
    parts = [f"{f'{arm.upper()} ' if arm else ''}{amount(statistics.median(values), unit)}"
             + (f" on {serial}" if serial else "") + f" (n={len(values)})"
             for (serial, arm), values in sorted(by_serial.items())]
    return f"median {', '.join(parts)}" if parts else ""
