"""``farmctl compare A B``: per phone, is B slower than A? (and the regressions listing).

Exit codes, so a CI pipeline can gate on it: 0 every phone decided and none
is slower in B; 3 (:data:`~farm.results.compare.EXIT_REGRESSED`) at least one
is slower; 4 (:data:`~farm.results.compare.EXIT_UNDECIDED`) none is slower
but at least one is undecided (too few samples to reach alpha, or a CI too
wide to rule a change in or out: measure again with more samples); 2 the
input is wrong (unknown job or run, unfinished job, no phone in common,
different workloads); 1 anything else farm reports.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import click

from farm.cli.compare_kernels import kernels_by_phone, print_kernel_changes
from farm.cli.output import Column, echo_json, note, print_table
from farm.cli.state import CliState, pass_state
from farm.queue.regressions import RegressionView
from farm.results.compare import EXIT_REGRESSED, EXIT_UNDECIDED, compare_refs, plot_report

__all__ = ["Fraction", "compare", "regression_rows", "show_regressions"]


class Fraction(click.ParamType[float]):
    """A finite number strictly between 0 and 1 (a threshold or a p-value); refuses nan."""

    name = "fraction"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        """``value`` as a float in (0, 1); a usage error (exit 2) otherwise."""
        try:
            number = float(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (math.isfinite(number) and 0 < number < 1):
            self.fail(f"{value} is not between 0 and 1 (exclusive)", param, ctx)
        return number


_COLUMNS = [
    Column("serial"), Column("median_a_s", "A median s", "right"),
    Column("median_b_s", "B median s", "right"), Column("ratio", "B/A", "right"),
    Column("ci", "95% CI", "right"), Column("p_value", "p", "right"), Column("verdict"),
    Column("why"),
]


def _table_row(phone: dict[str, Any]) -> dict[str, Any]:
    ci = (f"{phone['ci_low']:.3f}..{phone['ci_high']:.3f}"
          if phone["ci_low"] is not None else None)
    ratio = f"{phone['ratio']:.3f}" if phone["ratio"] is not None else None
    p_value = f"{phone['p_value']:.2g}" if phone["p_value"] is not None else None
    why = "; ".join(part for part in (phone["reason"], phone["noisy"] and
                                      f"noisy: {phone['noisy']}") if part)
    return {**phone, "ci": ci, "ratio": ratio, "p_value": p_value, "why": why}


@click.command(epilog=f"Exit codes: 0 every phone decided, none slower in B; {EXIT_REGRESSED} at "
                      f"least one is slower; {EXIT_UNDECIDED} none slower but at least one "
                      "undecided (too few samples or too wide a CI); 2 wrong input "
                      "(unknown or unfinished job or run, no phone in common, "
                      "different workloads); 1 another failure.")
@click.argument("a")
@click.argument("b")
@click.option("--threshold", type=Fraction(),
              help="Smallest change of a median that counts (0.05 = 5%) "
                   "[default: results.change_threshold]")
@click.option("--alpha", type=Fraction(),
              help="p-value a change must be below [default: results.alpha]")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also draw each phone's ratio with its 95% CI to this PNG.")
@click.option("--operators", is_flag=True,
              help="Require the kernel table: A and B must be model jobs enqueued with "
                   "--profile on a phone in common (shown anyway when they are).")
@click.option("--confirm", is_flag=True,
              help="For each undecided or noisy phone, enqueue an A/B job of the two builds on "
                   "it (timed in turns, where the phone's drift cancels), wait, and judge by it.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
@click.pass_context
def compare(ctx: click.Context, state: CliState, a: str, b: str, threshold: float | None,
            alpha: float | None, plot_path: Path | None, operators: bool, confirm: bool,
            as_json: bool) -> None:
    """Compare B with A per phone: median time ratio B/A, its 95% CI, p-value, verdict.

    A and B are job ids or run ids (r-..., from enqueue --each). Builds of one
    model and input shapes compare: a model job (untuned), one run with
    --tuned N, a tune --model job N (tuned) and N:untuned (that tune job's own
    untuned timings). Only phones in both are compared (Mann-Whitney U test,
    bootstrap CI); the others are listed as only in A or only in B. A verdict
    is slower, faster, no change (the CI lies inside the threshold) or
    undecided, with the reason; noisy samples are flagged with theirs. Two
    builds that ran one library (a tune job that applied no tuning record)
    are never slower or faster: the difference is the phones' noise.

    With --confirm, each undecided or noisy phone is settled by an A/B job
    of the two builds on it (``enqueue ab``): timed in turns in one session,
    a phone's drift between the two runs cancels, and a phone that got
    slower is told from a build that did.

    When A and B are profiled model jobs (``enqueue model --profile``), a
    table per phone follows: each kernel's time in A and B, B/A and the
    change, largest absolute change first (``operators`` in ``--json``).
    """
    settings = state.settings.results
    report = compare_refs(
        state.store, a, b,
        threshold=settings.change_threshold if threshold is None else threshold,
        alpha=settings.alpha if alpha is None else alpha, max_cv=settings.max_cv,
    )
    data = report.to_json()
    by_phone = kernels_by_phone(state.store, a, b, required=operators)
    if as_json:
        echo_json({**data, "operators": by_phone} if by_phone else data)
    else:
        title = f"{report.b.shown} vs {report.a.shown} ({report.a.workload})"
        if not sys.stdout.isatty():
            # Piped, the table is tab-separated lines with no title: one comment
            # line first keeps which side is which build (untuned, tuned by job N).
            click.echo(f"# {title}")
        print_table([_table_row(p) for p in data["phones"]], _COLUMNS, title)
        print_kernel_changes(by_phone)
    if plot_path is not None:
        plot_report(report, plot_path)
        note(f"plot written to {plot_path}")
    if report.same_library:  # no build to decide: more samples or --confirm would not help
        note(report.same_library)
    elif report.regressed:
        note(f"slower in B on {len(report.slower)} phone(s): {', '.join(report.slower)}")
    elif report.undecided:
        note(f"undecided on {len(report.undecided)} phone(s): {', '.join(report.undecided)}; "
             "measure both again with more samples (--samples), or time the two builds in "
             "turns on each (--confirm) to decide")
    if confirm:
        from farm.cli.compare_confirm import confirm as confirm_phones

        code = confirm_phones(state, report, as_json=as_json)
        if code:
            ctx.exit(code)
        return
    verdicts = {p.serial: p.verdict for p in report.phones}
    for serial in report.to_confirm:
        note(f"{serial} ({verdicts[serial]} between two runs): an A/B job of the two builds, "
             f"where the phone's drift cancels, would settle it: {report.confirm_command(serial)}"
             " (or compare --confirm)")
    if report.exit_code:
        ctx.exit(report.exit_code)


def regression_rows(views: list[RegressionView]) -> list[dict[str, Any]]:
    """The regressions listing's rows (``farmctl results --regressions``)."""
    return [{"job_id": v.job_id, "baseline_job_id": v.baseline_job_id, "serial": v.serial,
             "ratio": v.ratio, "ci": f"{v.ci_low:.3f}..{v.ci_high:.3f}",
             "p_value": f"{v.p_value:.2g}", "verdict": v.verdict,
             "confirm_job_id": v.confirm_job_id, "created_at": v.created_at}
            for v in views]


_REGRESSION_COLUMNS = [
    Column("job_id", "job", "right"), Column("baseline_job_id", "baseline", "right"),
    Column("serial"), Column("ratio", "ratio", "right"), Column("ci", "95% CI", "right"),
    Column("p_value", "p", "right"), Column("verdict"),
    Column("confirm_job_id", "A/B job", "right"), Column("created_at", "found"),
]


def show_regressions(state: CliState, *, limit: int, as_json: bool,
                     include_all: bool = False) -> None:
    """Print the regression watch's verdicts, newest first: slower ones, or all if asked."""
    views = state.store.regressions(slower_only=not include_all, limit=limit)
    if as_json:
        echo_json(views)
        return
    print_table(regression_rows(views), _REGRESSION_COLUMNS,
                "regression verdicts" if include_all else "regressions")

