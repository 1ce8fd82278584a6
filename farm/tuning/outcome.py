"""What a model tuning job ended with, said plainly: which build is best, and why.

A model tune (:func:`farm.kinds.tune_model.run_model_tuning`) stores the facts in
its result summary; this module decides the best build from them at the end of
the job (:func:`decide`) and reads them back as lines (:func:`outcome_lines`) for
every place the outcome shows: ``farmctl job``, ``farmctl results --job``, the
export bundle's README and :meth:`farm.client.Job.outcome`.

The facts, under these names in the summary:

- ``best_build``: ``"tuned"`` or ``"untuned"``, and ``best_note``, the line that says why;
- ``speedup``: the phones' median of untuned / tuned median time, present only
  where a tuned build exists: a tuned build that applies no record is the very
  library the untuned figure timed, and a ratio of it to itself is the noise
  of two timings (one such job printed ``speedup 1.10681``);
- ``records_tuned``: tuning records the tuned build applied (None: unknown);
  ``records_applied``: those the job's library applies (0 where the best
  build is the untuned one: its export and ``--tuned`` are the untuned build);
- ``picks_checked``, ``picks_used``, ``picks_unchecked``: on CPU targets,
  the tasks whose best record was a searched candidate, measured again
  against their default schedule (:mod:`farm.tuning.verify`);
- ``tasks`` (those tuned, with their trials) and ``model_tasks`` (all the
  model's tasks: fewer trials than tasks tune only the heaviest);
- ``trials_measured``, ``trials_requested``, ``stopped_by``.

Pure: no TVM, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Decision", "decide", "outcome_lines", "searched_trials", "speedup_text"]


@dataclass(frozen=True)
class Decision:
    """The best build of a finished model tune and the facts behind it (summary fields).

    Attributes:
        best_build: ``"tuned"`` or ``"untuned"``.
        best_note: why, one line.
        speedup: the phones' median untuned / tuned time; None where no tuned build exists.
        records_tuned: tuning records the tuned build applied.
        records_applied: tuning records the job's library (its best build) applies.
    """

    best_build: str
    best_note: str
    speedup: float | None
    records_tuned: int
    records_applied: int

    def to_summary(self) -> dict[str, Any]:
        """The summary's fields."""
        return {"best_build": self.best_build, "best_note": self.best_note,
                "speedup": self.speedup, "records_tuned": self.records_tuned,
                "records_applied": self.records_applied}


def searched_trials(tasks: Sequence[Mapping[str, Any]], baselines: bool) -> int:
    """Trials measured beyond each task's default schedule (its first trial on CPU targets).

    Args:
        tasks: the summary's tasks (``trials_measured`` each).
        baselines: each task's first trial is its default schedule (CPU targets:
            :mod:`farm.tuning.baseline`).
    """
    return sum(max(0, int(t.get("trials_measured") or 0) - (1 if baselines else 0))
               for t in tasks)


def _no_record_why(picks_checked: int | None, picks_unchecked: int | None,
                   searched: int) -> str:
    """Why the tuned build applies no tuning record (CPU targets: the picks' check)."""
    if picks_unchecked:
        return (f"the time budget ran out before any of the {picks_unchecked} picks was "
                "measured again against its default schedule")
    if picks_checked:
        return (f"none of the {picks_checked} picks beat its default schedule when "
                "measured again")
    if searched == 0:
        return "nothing was searched: every trial measured a task's default schedule"
    return f"none of the {searched} searched candidates beat its task's default schedule"


def decide(speedup: float, *, same_build: bool, records_tuned: int,
           picks_checked: int | None = None, picks_unchecked: int | None = None,
           searched: int = 0) -> Decision:
    """The job's best build, ``"tuned"`` or ``"untuned"``, with the line that says why.

    Where the tuned build applies no tuning record it is the very library the
    untuned figure timed (``same_build``), and its own figure differs only by
    the load between the two timings. Such a job ran the small CNN's one
    library twice and reported "tuned 1.68x slower" (a load rise between
    them; docs/benchmarks.md's history) or "tuned 1.03x untuned: the tuned build is the
    best"; it is the untuned build, whatever the timings say, and it has no
    speed-up.

    Args:
        speedup: the phones' median of untuned / tuned median time.
        same_build: every phone timed one library as both.
        records_tuned: tuning records the tuned build applied.
        picks_checked: picks measured again against their default (None: no check, GPU).
        picks_unchecked: picks the time budget left unchecked.
        searched: trials measured beyond the default schedules (:func:`searched_trials`).

    >>> decide(1.03, same_build=True, records_tuned=0).best_build
    'untuned'
    >>> decide(1.2, same_build=False, records_tuned=3).best_note
    'tuned 1.20x untuned with 3 tuning records applied: the tuned build is the best'
    """
    if same_build:
        why = _no_record_why(picks_checked, picks_unchecked, searched)
        return Decision("untuned", f"no tuning record applied ({why}): the tuned build is the "
                                   f"untuned build (timed {speedup:.2f}x itself: the timings' "
                                   "noise)", None, 0, 0)
    records = f"{records_tuned} tuning record{'s' if records_tuned != 1 else ''} applied"
    if speedup > 1.0:
        return Decision("tuned", f"tuned {speedup:.2f}x untuned with {records}: the tuned "
                                 "build is the best", speedup, records_tuned, records_tuned)
    return Decision("untuned", f"tuned {speedup:.2f}x untuned with {records}, not faster: "
                               "the untuned build is the best (the job's library and export "
                               "are the untuned build)", speedup, records_tuned, 0)


def speedup_text(summary: Mapping[str, Any]) -> str | None:
    """``1.21x`` where the result has a tuned build's speed-up; None where it has none."""
    value = summary.get("speedup")
    runs = summary.get("runs")
    same = (isinstance(runs, list) and bool(runs)
            and all(isinstance(r, Mapping) and r.get("same_build") is True for r in runs))
    if not isinstance(value, int | float) or summary.get("records_tuned") == 0 or same:
        return None  # ``same``: a result stored before ``records_tuned``, the same fact
    return f"{value:.2f}x"


def _count(summary: Mapping[str, Any], name: str) -> int | None:
    value = summary.get(name)
    return value if type(value) is int else None


def outcome_lines(summary: Mapping[str, Any]) -> list[str]:
    """A model tune's outcome for people: best build and why, records, picks, tasks, trials.

    Empty for any other result (a gemm tune, a model job); a tune on emulated
    devices (gemm or model) has one line, its ``emulated_note``.

    >>> for line in outcome_lines({
    ...         "kind": "tune", "best_build": "tuned", "best_note": "tuned 1.20x ...",
    ...         "speedup": 1.2, "records_tuned": 2, "records_applied": 2, "picks_checked": 3,
    ...         "picks_used": 2, "picks_unchecked": 0, "tasks": [{"trials_measured": 5}] * 3,
    ...         "model_tasks": 3, "trials_measured": 15, "trials_requested": 15,
    ...         "stopped_by": "trials"}):
    ...     print(line)
    best build: tuned (tuned 1.20x ...)
    speed-up: 1.20x (untuned / tuned, the phones' median)
    tuning records applied: 2 in the job's library (the tuned build applied 2)
    picks checked against their default schedule: 3, used 2
    tasks tuned: 3 of the model's 3; trials measured 15/15 (all that were asked)
    """
    if summary.get("kind") == "tune" and isinstance(note := summary.get("emulated_note"), str):
        return [note]  # no ranking, so no build is best (farm.tuning.emulated)
    build = summary.get("best_build")
    if summary.get("kind") != "tune" or not isinstance(build, str):
        return []
    lines = [f"best build: {build} ({summary.get('best_note') or 'no reason recorded'})"]
    speedup = speedup_text(summary)
    lines.append(f"speed-up: {speedup} (untuned / tuned, the phones' median)" if speedup
                 else "speed-up: none: no tuned build exists (it applied no tuning record)")
    applied, tuned = _count(summary, "records_applied"), _count(summary, "records_tuned")
    if applied is not None:
        lines.append(f"tuning records applied: {applied} in the job's library "
                     f"(the tuned build applied {tuned if tuned is not None else '?'})")
    checked, used = _count(summary, "picks_checked"), _count(summary, "picks_used")
    unchecked = _count(summary, "picks_unchecked")
    if checked is not None:
        left = f"; {unchecked} left unchecked (time budget spent)" if unchecked else ""
        lines.append(f"picks checked against their default schedule: {checked}, "
                     f"used {used if used is not None else 0}{left}")
    tasks = summary.get("tasks")
    tuned_tasks = len(tasks) if isinstance(tasks, list) else 0
    total = _count(summary, "model_tasks")
    of = f" of the model's {total}" if total is not None else ""
    measured, asked = _count(summary, "trials_measured"), _count(summary, "trials_requested")
    stopped = {"trials": "all that were asked", "time": "stopped by the time budget",
               "rounds": "stopped after its rounds"}.get(str(summary.get("stopped_by")),
                                                          "stopped")
    lines.append(f"tasks tuned: {tuned_tasks}{of}; trials measured "
                 f"{measured if measured is not None else '?'}/"
                 f"{asked if asked is not None else '?'} ({stopped})")
    return lines
