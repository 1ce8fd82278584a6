"""Each task's pick measured again against its default schedule: a record used only where it wins.

The work folder's best record of a task is the least of the run times of its
default schedule and of each searched candidate, each measured once. A task
of tens of microseconds measured on a shared or throttling phone spreads by
more than the gap between candidates, and the least of several noisy
measurements is often a candidate that was measured fast once and is slower
(the winner's curse): MobileNetV2 (57 tasks) tuned for 300 trials came out
slower than untuned, 12.4 ms against 9.8 ms (docs/benchmarks.md's history, issue 21).

So, before the tuned build, each task whose best record is not its default
schedule has both built once and measured ``rounds`` times more, interleaved
(default then pick, then pick then default, ...) in one run on the job's
phones. The record is applied only where it is faster by more than the
measurements' spread (:func:`pick_wins`); the others keep farm's default
schedule. The kept records form their own database, ``<work_dir>/picked``
(:data:`farm.jobs.tuning_db.PICKED_DIR`), which every build "tuned by"
this work folder applies (:func:`farm.jobs.tuning_db.applied_database`);
the work folder's database keeps every record, for resuming and for the
fleet's records.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import structlog

from farm.jobs.targets import runtime_device_name
from farm.jobs.tuning_db import (
    FAILED_RUN_S,
    PICKED_DIR,
    RECORDS_FILE,
    WORKLOADS_FILE,
    open_database,
)
from farm.tuning.baseline import BaselineTask, baseline_candidate
from farm.tuning.search import trace_key

__all__ = ["CHECKED_FILE", "Verdict", "drop_picks", "pick_wins", "verify_picks"]

log = structlog.get_logger(__name__)

#: The check, in ``picked``: a digest of the records and tasks it saw, and per task
#: (workload line) the digest of its pick's trace and the verdict.
CHECKED_FILE = "checked.json"


@dataclass(frozen=True)
class Verdict:
    """One task's pick against its default schedule, measured again.

    Attributes:
        name: the task name.
        default_s: the default schedule's mean run time per round, seconds
            (inf: the measurement failed).
        picked_s: the best record's, per round, seconds.
        used: the record replaces the default in the tuned build.
        checked: False: the pick was not measured again (the tuning's time
            budget was spent), so the default schedule stays.
    """

    name: str
    default_s: list[float]
    picked_s: list[float]
    used: bool
    checked: bool = True


def pick_wins(default_s: list[float], picked_s: list[float]) -> bool:
    """Whether the pick is faster than the default by more than the measurements' spread.

    The spread is the wider of the two ranges (slowest minus fastest round);
    the gap is the difference of the medians. A failed measurement of the
    pick loses; one of the default alone lets a measured pick win.

    Args:
        default_s: the default schedule's run time per round, seconds.
        picked_s: the pick's, per round, seconds.
    """
    if not picked_s or not all(s < FAILED_RUN_S for s in picked_s):
        return False
    if not default_s or not all(s < FAILED_RUN_S for s in default_s):
        return True
    spread = max(max(default_s) - min(default_s), max(picked_s) - min(picked_s))
    return statistics.median(default_s) - statistics.median(picked_s) > spread


def _record_candidate(record: Any, workload: Any) -> Any:
    """The record's schedule as a ``MeasureCandidate`` (its trace replayed on the workload)."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    sch = s_tir.Schedule(workload)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_entry_func(sch.mod,
                                                                        remove_preproc=True))


def _mean_s(result: Any) -> float:
    if result.error_msg is not None:
        log.warning("tuning_verify_run_failed", error=str(result.error_msg)[-500:])
        return float("inf")
    return statistics.fmean(float(s) for s in result.run_secs)


def _measure(pairs: list[tuple[BaselineTask, Any, Any]], builder: Any, runner: Any,
             rounds: int) -> list[tuple[list[float], list[float]]]:
    """Build each (default, pick) once; run them ``rounds`` times, interleaved, in one run."""
    from tvm.s_tir import meta_schedule as ms

    candidates = [(t, c) for t, default, pick in pairs for c in (default, pick)]
    builds = builder.build([ms.builder.BuilderInput(c.sch.mod, t.target) for t, c in candidates])
    inputs = [None if b.error_msg is not None else
              ms.runner.RunnerInput(b.artifact_path,
                                    runtime_device_name({"kind": str(t.target.kind.name)}),
                                    c.args_info)
              for b, (t, c) in zip(builds, candidates, strict=True)]
    order: list[int] = []  # candidate positions in the order they are run
    for r in range(rounds):
        for k in range(len(pairs)):
            first, second = (2 * k, 2 * k + 1) if r % 2 == 0 else (2 * k + 1, 2 * k)
            order += [i for i in (first, second) if inputs[i] is not None]
    futures = runner.run([inputs[i] for i in order]) if order else []
    times: list[list[float]] = [[] for _ in candidates]
    for i, future in zip(order, futures, strict=True):
        times[i].append(_mean_s(future.result()))
    for b in builds:  # as MetaSchedule's RemoveBuildArtifact
        if b.artifact_path is not None:
            shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
    for b, (t, _) in zip(builds, candidates, strict=True):
        if b.error_msg is not None:
            log.warning("tuning_verify_build_failed", task=t.name, error=str(b.error_msg)[-500:])
    return [(times[2 * k] or [float("inf")], times[2 * k + 1] or [float("inf")])
            for k in range(len(pairs))]


def verify_picks(tasks: list[BaselineTask], measurers: Callable[[], tuple[Any, Any]],
                 work_dir: Path, rounds: int) -> list[Verdict]:
    """Measure each task's pick against its default again; write ``<work_dir>/picked``.

    Tasks whose best record is their default schedule, or that have no
    record, are not measured: the default applies to them. A task whose
    best record was checked by an earlier call (a resumed job) keeps that
    verdict; nothing is measured when the records are those of the last check.

    Args:
        tasks: the CPU tasks of the tuning run.
        measurers: gives MetaSchedule's builder and runner (the tuning run's,
            the job's phones); called only when there is a pick to measure.
        work_dir: the work folder (its database is read, not changed).
        rounds: measurements of each schedule, alternating which goes first;
            0: no new pick is measured (the time budget is spent): each keeps
            its default schedule, with an unchecked verdict, and a later call
            checks it.

    Returns:
        One verdict per task whose best record is not its default schedule.
    """
    digest = hashlib.sha256((work_dir / RECORDS_FILE).read_bytes()
                            + repr(sorted(t.index for t in tasks)).encode()).hexdigest()
    checked = _checked(work_dir)
    if checked.get("records_sha256") == digest:  # no record since (a resumed run, none left)
        return [Verdict(**c["verdict"]) for c in checked["tasks"].values()]
    database = open_database(work_dir)
    picks: list[tuple[BaselineTask, Any, str]] = []  # (task, best record, its trace's digest)
    for task in tasks:
        best = database.get_top_k(database.commit_workload(task.workload), 1)
        if not best or not all(float(s) < FAILED_RUN_S for s in best[0].run_secs):
            continue
        key = trace_key(best[0].trace.as_json(remove_postproc=False))
        if key != _default_key(task):
            picks.append((task, best[0], hashlib.sha256(key.encode()).hexdigest()))
    # A task whose pick was checked before keeps its verdict: only new picks are measured.
    known = {t.index: Verdict(**c["verdict"]) for t, _, pick in picks
             if (c := checked["tasks"].get(str(t.index))) and c["pick"] == pick}
    new = [(t, baseline_candidate(t.workload, t.target), _record_candidate(r, t.workload))
           for t, r, _ in picks if t.index not in known]
    if rounds <= 0:  # the time budget is spent: the new picks stay unchecked
        new = []
    measured = _measure(new, *measurers(), rounds) if new else []
    known.update({t.index: Verdict(t.name, d, p, pick_wins(d, p))
                  for (t, _, _), (d, p) in zip(new, measured, strict=True)})
    verdicts = [known.get(t.index) or Verdict(t.name, [], [], used=False, checked=False)
                for t, _, _ in picks]
    _write_picked(work_dir, [(t, r) for (t, r, _), v in zip(picks, verdicts, strict=True)
                             if v.used],
                  {"records_sha256": digest if all(v.checked for v in verdicts) else "",
                   "tasks": {str(t.index): {"pick": pick, "verdict": asdict(v)}
                             for (t, _, pick), v in zip(picks, verdicts, strict=True)
                             if v.checked}})
    log.info("tuning_picks_verified", tasks=len(tasks), checked=sum(v.checked for v in verdicts),
             unchecked=sum(not v.checked for v in verdicts), measured=len(measured),
             used=sum(v.used for v in verdicts))
    return verdicts


def _default_key(task: BaselineTask) -> str:
    return trace_key(baseline_candidate(task.workload, task.target).sch.trace.as_json(
        remove_postproc=False))


def _checked(work_dir: Path) -> dict[str, Any]:
    """The last check: the digest it saw and, per task, its pick's digest and verdict."""
    try:
        checked = json.loads((work_dir / PICKED_DIR / CHECKED_FILE).read_text())
        if isinstance(checked, dict) and isinstance(checked.get("tasks"), dict):
            return checked
    except (OSError, ValueError):
        pass
    return {"tasks": {}}


def _write_picked(work_dir: Path, kept: list[tuple[BaselineTask, Any]],
                  checked: dict[str, Any]) -> None:
    """``<work_dir>/picked``: a database of the kept records and the check, replaced whole."""
    from tvm.s_tir import meta_schedule as ms

    out, tmp = work_dir / PICKED_DIR, work_dir / f"{PICKED_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        (tmp / name).touch()
    database = ms.database.JSONDatabase(work_dir=str(tmp))
    for task, record in kept:
        database.commit_tuning_record(ms.database.TuningRecord(
            record.trace, database.commit_workload(task.workload), record.run_secs,
            record.target, record.args_info))
    (tmp / CHECKED_FILE).write_text(json.dumps(checked))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def drop_picks(work_dir: Path) -> None:
    """Apply no record of ``work_dir``: builds "tuned by" it become the untuned build.

    For a tuned model that was not faster than the untuned one as a whole
    (:func:`farm.tuning.model.keep_untuned`). The work folder's database
    and the check's verdicts stay; a later check (new records) writes the
    picks again.
    """
    picked = work_dir / PICKED_DIR
    picked.mkdir(exist_ok=True)
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        (picked / name).write_bytes(b"")
