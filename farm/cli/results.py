"""``farmctl results``: raw samples as flat rows, per-phone spread as a table, plots.

``--format csv|json`` gives one row per raw sample (:func:`farm.results.rows.sample_fields`:
job, run, serial, model, SoC, ABI, workload, repetition, sample index, value,
unit, the readings declared ``with_results`` before the run, finish time). The
table gives, per result and phone, the spread of that phone's last measurement
(median, IQR, CV %, bootstrap 95% CI of the median) and marks noisy ones (CV
above ``[results] max_cv``); phones are never pooled. ``--plot FILE.png`` draws
the same per-phone figures; with ``--history WORKLOAD`` it draws one workload's
medians over time instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from farm.cli.ab_table import print_ab
from farm.cli.compare import show_regressions
from farm.cli.jobs import LOAD_COLUMNS, load_rows
from farm.cli.output import Column, amount, echo_json, note, print_table, to_csv
from farm.cli.profile_table import print_profiles, write_job_outputs
from farm.cli.state import CliState, pass_state
from farm.click_types import JOB_ID, LIMIT
from farm.errors import UserFault
from farm.health.readings import result_readings
from farm.results.plots import write_history_plot, write_spread_plot
from farm.results.rows import SampleRow, sample_fields
from farm.results.spreads import PhoneSpread, by_workload, noise_label, phone_spreads

__all__ = ["results"]

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _spread_columns() -> list[Column]:
    """The spread table's columns: one per reading declared ``with_results``, before noise."""
    return [
        Column("job_id", "job", "right"), Column("run_id", "run"), Column("serial", "phone"),
        Column("workload"), Column("n", justify="right"),
        Column("median", justify="right"), Column("iqr", "IQR", "right"),
        Column("cv_pct", "CV %", "right"), Column("ci", "95% CI"),
        *(Column(r.name, r.heading, "left" if r.levels else "right")
          for r in result_readings()),
        Column("noise"),
    ]


def _interval(low: float, high: float, unit: str) -> str:
    """``9.900-10.100 ms`` for seconds, else ``low-high unit``."""
    if unit == "s":
        return f"{low * 1e3:.3f}-{high * 1e3:.3f} ms"
    return f"{low:.4g}-{high:.4g} {unit}"


def _spread_row(figure: PhoneSpread) -> dict[str, Any]:
    s, unit = figure.spread, figure.unit
    return {
        "job_id": figure.job_id, "run_id": figure.run_id, "serial": figure.serial,
        "workload": figure.workload, "n": s.n,
        "median": amount(s.median, unit), "iqr": amount(s.iqr, unit),
        "cv_pct": f"{100 * s.cv:.1f}",
        "ci": _interval(s.ci_low, s.ci_high, unit),
        **{r.name: r.text(figure.readings.get(r.name)) for r in result_readings()},
        "noise": noise_label(figure),
    }


def _print_loads(state: CliState, job_id: int | None) -> None:
    """A model tune's outcome, and the library load, first run and peak memory per phone.

    Each when the job's result has them (:func:`farm.tuning.outcome.outcome_lines`);
    an A/B job's verdict per phone likewise (:func:`farm.cli.ab_table.print_ab`).
    """
    from farm.tuning import outcome_lines

    for view in [] if job_id is None else state.queue.results(job_id):
        for line in outcome_lines(view.summary):
            click.echo(line)
        print_ab(view)  # an A/B job: each phone's verdict of B against A
        if rows := load_rows(view):
            print_table(rows, LOAD_COLUMNS, "library load, first run and peak memory")
        print_profiles(view)  # model --profile: the heaviest kernels per phone


def _rows(state: CliState, job_id: int | None, run_id: str | None, workload: str | None,
          limit: int) -> list[SampleRow]:
    """The rows asked for; a job, run or workload that has none is the user's error."""
    return state.queue.sample_rows(job_id=job_id, run_id=run_id, workload=workload, limit=limit)


@click.command(epilog="Examples: farmctl results --run r-0123456789ab --format csv; "
                      "farmctl results --history 'gemm n=256 float32' --plot gemm.png")
@click.option("--job", "job_id", type=JOB_ID, help="Only this job's result.")
@click.option("--run", "run_id", help="Only the results of this run (enqueue --each).")
@click.option("--history", "workload",
              help="Only this workload's results (its label, e.g. 'gemm n=256 float32'), "
                   "oldest first; with --plot, its medians over time per phone.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True,
              help="table: spread per result and phone; csv and json: one row per raw sample.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also draw the per-phone figures into this PNG.")
@click.option("--limit", type=LIMIT, default=1000, show_default=True,
              help="Newest results read, without --job or --run.")
@click.option("--regressions", "list_regressions", is_flag=True,
              help="List instead the phones the regression watch found slower than their "
                   "schedule's baseline, newest first.")
@click.option("--outputs", "outputs_dir", type=click.Path(file_okay=False, path_type=Path),
              help="With --job of a model job given --inputs: write each phone's outputs "
                   "as DIR/<serial>/<output name>.npy.")
@_JSON
@pass_state
@click.pass_context
def results(ctx: click.Context, state: CliState, job_id: int | None, run_id: str | None,
            workload: str | None, fmt: str, plot_path: Path | None, limit: int,
            list_regressions: bool, as_json: bool, outputs_dir: Path | None) -> None:
    """Results per phone: raw samples, spread, noise and plots."""
    if outputs_dir is not None:
        if job_id is None:
            raise click.UsageError("--outputs needs --job")
        write_job_outputs(state.queue, job_id, outputs_dir)
    if list_regressions:
        state.require_local("--regressions", "reads the regression watch's verdicts from the "
                                             "farm host's database, which the API does not serve")
        show_regressions(state, limit=limit, as_json=as_json or fmt == "json")
        return
    fmt_given = ctx.get_parameter_source("fmt") is not click.core.ParameterSource.DEFAULT
    if as_json and fmt_given and fmt != "json":
        raise click.UsageError(f"--json and --format {fmt} ask for two formats: give one")
    if job_id is not None and run_id is not None:
        raise click.UsageError("--job and --run select two ways: give one")
    rows = _rows(state, job_id, run_id, workload, limit)
    if as_json or fmt == "json":
        echo_json([r.flat() for r in rows])
    elif fmt == "csv":
        click.echo(to_csv([r.flat() for r in rows], sample_fields()), nl=False)
    figures: list[PhoneSpread] | None = None
    if fmt == "table" and not as_json:
        figures = phone_spreads(rows, state.settings.results.max_cv)
        if workload is not None:
            figures = by_workload(figures, workload)
        print_table([_spread_row(f) for f in figures], _spread_columns(), "results per phone")
        _print_loads(state, job_id)
    if plot_path is not None:
        if figures is None:
            figures = phone_spreads(rows, state.settings.results.max_cv)
        _plot(figures, workload, plot_path)


def _plot(figures: list[PhoneSpread], workload: str | None, plot_path: Path) -> None:
    """``--plot``: the per-phone figures, or with ``--history`` one workload's medians over time.

    Raises:
        UserFault: the file cannot be written.
    """
    try:
        if workload is not None:
            write_history_plot(by_workload(figures, workload), plot_path, workload)
        else:
            write_spread_plot(figures, plot_path)
    except OSError as exc:
        raise UserFault(f"cannot write the plot {plot_path}: {exc.strerror or exc}") from None
    note(f"plot written to {plot_path}")
