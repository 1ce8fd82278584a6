"""``farmctl compare A B --confirm``: settle the undecided phones with A/B jobs of the two builds.

Two runs taken minutes apart see the phone's drift (heat, other load, the
governor): ``compare`` then calls a phone undecided, or flags it noisy. For
each such phone this enqueues an A/B job (:mod:`farm.kinds.ab`) of the build
A timed there against the build B timed there, pinned to that phone, waits
for them all, and prints their verdicts: timed in turns in one session the
drift cancels. A phone whose runs differed but whose A/B says no change changed
speed itself (it was throttled, hot or busy during one run): the build did not.
"""

from __future__ import annotations

from typing import Any

import click

from farm.cli.ab_table import print_ab
from farm.cli.output import echo_json, note
from farm.cli.state import CliState
from farm.errors import FarmError
from farm.queue.models import JobState
from farm.results.ab import ab_phones
from farm.results.compare import EXIT_REGRESSED, EXIT_UNDECIDED, CompareReport

__all__ = ["confirm"]


def _enqueue(state: CliState, report: CompareReport, serial: str) -> int:
    """The A/B job of ``serial``'s two builds, pinned to it; its id."""
    from farm.kinds.ab_builds import parse_build

    a, b = report.ab_sides(serial)
    params = {"a": parse_build(a, "params.a"), "b": parse_build(b, "params.b")}
    raw = {"kind": "ab", "params": params, "devices": {"serials": [serial]}}
    [job] = state.queue.submit(raw).jobs
    return job.id


def confirm(state: CliState, report: CompareReport, *, as_json: bool) -> int:
    """Enqueue and wait for the A/B jobs of :attr:`CompareReport.to_confirm`; return the exit code.

    The exit code is ``compare``'s, with each confirmed phone's verdict taken
    from its A/B job: :data:`EXIT_REGRESSED` if a phone is slower, else
    :data:`EXIT_UNDECIDED` if one is still undecided, else 0.

    Raises:
        FarmError: an A/B job failed or was cancelled (its error named).
        WaitTimedOut: never (no timeout is given).
    """
    from farm.cli.jobs import wait_ended

    serials = report.to_confirm
    if not serials:
        note(f"{report.same_library}: nothing to confirm" if report.same_library
             else "every phone is decided and steady: nothing to confirm")
        return report.exit_code
    jobs = {serial: _enqueue(state, report, serial) for serial in serials}
    note("confirming with A/B jobs: " + "; ".join(f"job {job_id} on {serial}"
                                                  for serial, job_id in jobs.items()))
    verdicts = {p.serial: p.verdict for p in report.phones if p.comparison is not None}
    confirmed: list[dict[str, Any]] = []
    for serial, job_id in jobs.items():
        view = wait_ended(state, job_id)
        if view.state is not JobState.SUCCEEDED:
            raise FarmError(f"A/B job {job_id} on {serial} {view.state.value}: "
                            f"{view.error or 'no reason recorded'}")
        [result] = state.queue.results(job_id)
        if not as_json:
            print_ab(result)
        for row in ab_phones(result.summary):
            verdicts[row["serial"]] = str(row["verdict"])
            confirmed.append({**row, "job_id": job_id})
            _say_whose(report, row)
    if as_json:
        echo_json({"confirmed": confirmed})
    if "slower" in verdicts.values():
        return EXIT_REGRESSED
    return EXIT_UNDECIDED if "undecided" in verdicts.values() else 0


def _say_whose(report: CompareReport, row: dict[str, Any]) -> None:
    """Tell a phone that got slower from a build that did, for one confirmed phone."""
    phone = next(p for p in report.phones if p.serial == row["serial"])
    if phone.comparison is None:
        return
    verdict = row["verdict"]
    if verdict == "no change":
        click.echo(f"{row['serial']}: the two runs read {phone.comparison.verdict.value} "
                   f"({phone.comparison.ratio - 1:+.1%}), but timed in turns the builds show no "
                   "change: the phone's speed moved between the runs, not the build")
    elif verdict in ("slower", "faster"):
        click.echo(f"{row['serial']}: timed in turns, B is {verdict} than A "
                   f"({row['ratio'] - 1:+.1%}): the build, not the phone")
    elif verdict == "undecided":
        click.echo(f"{row['serial']}: still undecided after the A/B job: {row['why']}")
