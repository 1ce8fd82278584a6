"""A tuning job's page data: its tuning curves while it runs, its speed-up per phone once done.

Curves: MetaSchedule records every measured candidate of every task in one
database file (:mod:`farm.jobs.tuning_db`); the trials of different tasks
are different kernels (a convolution's 5 ms, a reshape's 2 µs), so each task
gets its own curve: its trials and its best so far, the heaviest tasks first
(the job's tuning order, :func:`farm.tuning.tasks.model_tasks`: by
estimated cost).

Speed-ups: a finished tune job, of a GEMM or of a model, writes each phone's
untuned and tuned timings in its summary's ``runs`` (``serial``,
``untuned_samples_s``, ``tuned_samples_s`` and the kind's ``speedup``; a
GEMM tune's ``per_serial`` adds ``tuned_gflops``), as
:func:`farm.results.builds.untuned_timings` reads them.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from farm.jobs.tuning_db import trial_run_s
from farm.queue.store import Store
from farm.tuning import job_progress, tune_work_dir

__all__ = ["TUNING_CURVES", "speedups_view", "trials_view"]

#: Tasks charted on a tuning job's page, the heaviest first (a model has up to ~60).
TUNING_CURVES = 8


def _best_so_far(trials: Sequence[float | None]) -> list[float | None]:
    """After each trial, the fastest measured so far (None before the first measured one)."""
    best: list[float | None] = []
    for run_s in trials:
        last = best[-1] if best else None
        best.append(run_s if last is None or (run_s is not None and run_s < last) else last)
    return best


def trials_view(store: Store, data_dir: Path, job_id: int,
                curves: int = TUNING_CURVES) -> dict[str, Any]:
    """A tuning job's recorded trials so far, one curve per task, for its live chart.

    Args:
        store: the queue (the job's task rows name the tasks, in tuning order).
        data_dir: farm's data folder (the job's work folder is under it).
        job_id: the job.
        curves: how many tasks' curves to give, the heaviest first.

    Returns:
        ``{"tasks": [{"name", "workload_index", "trial_run_s", "best_run_s"}],
        "tasks_tuned": int, "trials": int}``: for each of the ``curves``
        heaviest tasks with a recorded trial, its trials' mean run times in
        seconds in the order measured (None where the measurement failed) and
        its best so far after each; how many tasks have a recorded trial; the
        trials recorded over all tasks. Empty before the first trial (or for a
        job that does not tune).

    Raises:
        StoreError: the database cannot be read.
    """
    work_dir = tune_work_dir(data_dir, job_id)
    by_workload = trial_run_s(work_dir)
    counters = job_progress(store, job_id, work_dir)
    named = [(t.name, t.workload_index) for t in (counters.tasks if counters else ())
             if t.workload_index in by_workload]
    known = {index for _, index in named}
    named += [(f"workload {index}", index) for index in by_workload if index not in known]
    return {
        "tasks": [{"name": name, "workload_index": index, "trial_run_s": by_workload[index],
                   "best_run_s": _best_so_far(by_workload[index])}
                  for name, index in named[:curves]],
        "tasks_tuned": len(named),
        "trials": sum(len(trials) for trials in by_workload.values()),
    }


def _samples(run: Mapping[str, Any], key: str) -> list[float]:
    """A run's samples under ``key`` as floats; empty where absent or malformed."""
    values = run.get(key)
    if not isinstance(values, list):
        return []
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def _phone(run: Mapping[str, Any], per_serial: Mapping[str, Any]) -> dict[str, Any] | None:
    """One phone's figures from its run; None for a run without both timings."""
    untuned, tuned = _samples(run, "untuned_samples_s"), _samples(run, "tuned_samples_s")
    if not untuned or not tuned or not run.get("serial"):
        return None
    serial = str(run["serial"])
    untuned_s, tuned_s = statistics.median(untuned), statistics.median(tuned)
    speedup = run.get("speedup")
    figures = per_serial.get(serial)
    gflops = figures.get("tuned_gflops") if isinstance(figures, Mapping) else None
    return {"serial": serial, "untuned_median_s": untuned_s, "tuned_median_s": tuned_s,
            "speedup": float(speedup) if isinstance(speedup, int | float) and speedup > 0
            else untuned_s / tuned_s if tuned_s > 0 else None,
            "tuned_gflops": float(gflops) if isinstance(gflops, int | float) else None}


def speedups_view(store: Store, job_id: int) -> dict[str, Any]:
    """A finished tune job's speed-up per phone, from its newest result.

    Returns:
        ``{"phones": [{"serial", "speedup", "untuned_median_s", "tuned_median_s",
        "tuned_gflops"}], "best_note": str | None}``: by serial; ``speedup`` is
        the kind's own figure (untuned over tuned time), else the ratio of the
        medians; ``tuned_gflops`` only for a GEMM. ``best_note`` says which
        build a model tune kept. No phones for a job without such a result.

    Raises:
        StoreError: the database cannot be read.
    """
    results = store.results(job_id, limit=1)
    summary: Mapping[str, Any] = results[0].summary if results else {}
    runs = summary.get("runs")
    per_serial = summary.get("per_serial")
    phones = [_phone(run, per_serial if isinstance(per_serial, Mapping) else {})
              for run in (runs if isinstance(runs, list) else []) if isinstance(run, Mapping)]
    note = summary.get("best_note")
    return {"phones": sorted((p for p in phones if p is not None), key=lambda p: p["serial"]),
            "best_note": note if isinstance(note, str) else None}
