"""``farmctl results``: stored results and their raw samples."""

from __future__ import annotations

from typing import Any

import click

from farm.cli.output import Column, echo_json, print_table, to_csv
from farm.cli.params import JOB_ID, LIMIT
from farm.cli.state import CliState, pass_state
from farm.queue.records import ResultView

__all__ = ["RESULT_COLUMNS", "result_row", "results"]

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def result_row(view: ResultView) -> dict[str, Any]:
    """One line of the results table: the result's ids and headline figures."""
    summary = view.summary
    return {
        "id": view.id, "job_id": view.job_id, "attempt_id": view.attempt_id,
        "kind": summary.get("kind"), "mean_s": summary.get("mean_s"),
        "gflops": summary.get("gflops") or summary.get("tuned_gflops"),
        "speedup": summary.get("speedup"), "samples": len(view.samples), "unit": view.unit,
        "created_at": view.created_at,
    }


RESULT_COLUMNS = [
    Column("id", "result", "right"), Column("job_id", "job", "right"),
    Column("attempt_id", "attempt", "right"),
    Column("kind"), Column("mean_s", justify="right"), Column("gflops", justify="right"),
    Column("speedup", justify="right"), Column("samples", justify="right"),
    Column("created_at", "created"),
]
_SAMPLE_FIELDS = ["result_id", "job_id", "attempt_id", "index", "value", "unit"]


@click.command()
@click.option("--job", "job_id", type=JOB_ID, help="Only this job's result.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="csv has one line per raw sample.")
@click.option("--limit", type=LIMIT, default=1000, show_default=True)
@_JSON
@pass_state
@click.pass_context
def results(ctx: click.Context, state: CliState, job_id: int | None, fmt: str, limit: int,
            as_json: bool) -> None:
    """List results with their raw samples."""
    fmt_given = ctx.get_parameter_source("fmt") is not click.core.ParameterSource.DEFAULT
    if as_json and fmt_given and fmt != "json":
        raise click.UsageError(f"--json and --format {fmt} ask for two formats: give one")
    views = state.store.results(job_id, limit)
    if as_json or fmt == "json":
        echo_json(views)
    elif fmt == "csv":
        rows = [{"result_id": v.id, "job_id": v.job_id, "attempt_id": v.attempt_id, "index": i,
                 "value": s, "unit": v.unit} for v in views for i, s in enumerate(v.samples)]
        click.echo(to_csv(rows, _SAMPLE_FIELDS), nl=False)
    else:
        print_table([result_row(v) for v in views], RESULT_COLUMNS, "results")
