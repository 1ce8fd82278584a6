"""The tuning engine: MetaSchedule's search of a gemm or a model's tasks across devices.

Everything tuning does between "these devices serve the job's tracker key" and
"this is the best build": the search, its builder and runner, the work folder's
counters, the time left, the check of each pick and what the job ended with.
It sits below the queue and never imports it (``pyproject.toml``'s floors): the
tune kind (:mod:`farm.kinds.tune`) hands it plain parameters, a work folder and
the store as the two protocols it needs (``TaskRows``, ``RecordStore``).

::

    gemm.py        tune_gemm, compare_tuned: the gemm workload tuned and timed
    model.py       tune_model: a model's tasks tuned, checked and built once
    tasks.py       a model's tunable tasks, extracted and ranked
    search.py      trials per task, search sizes, farm's search strategy
    run.py         the search of the planned tasks: one MetaSchedule run, in rounds
    rounds.py      the MetaSchedule glue gemm and model share: builder, runner, rounds
    builder.py     a builder whose worker processes stay warm for the run
    rate.py        measured trials per phone-hour, the timed sessions and uploads
    kept_session.py  a runner worker's RPC session, kept across its candidates
    cores.py       the host's free cores, shared by its tune attempts
    space.py       the design space a CPU task is searched in
    baseline.py    each task's default schedule measured as one of its trials
    seed.py        the work folder seeded with the fleet's best records
    verify.py      each pick measured again against its default schedule
    check_cost.py  what that check costs
    result.py      the result and the tuned build
    outcome.py     which build is best, and why, said plainly
    counters.py    the counters' file in the work folder, and reading it
    progress.py    the counters kept as an attempt goes, with the time left
    eta.py, batches.py, tail.py   the seconds a job has left
    advice.py      ``enqueue tune --model --trials N``: a warning at enqueue
    task_rows.py   a model tune's task rows: their values and TaskRows, the store's protocol
    work_progress.py  the progress that also keeps those rows (TaskWorkProgress)
    record_rows.py    a fleet record's identity and values, RecordStore, the store's protocol
    fleet_records.py  the fleet's records: seeding a search, keeping a work folder, checkpoints

The work folder's MetaSchedule database (files, repair, counts) is
:mod:`farm.jobs.tuning_db`, a floor lower, since a model's build applies it.

Other packages import the names below from ``farm.tuning`` (loaded on first
use: ``farmctl`` pays for TVM only when it tunes); the queue imports the rows'
values from ``task_rows`` and ``record_rows``, ``farmctl records`` reads
an exported database through ``fleet_records``, and the tune kind the
attempt's parts from ``work_progress`` and ``fleet_records``. The rest are the
engine's own. (A name here is never a module's name: importing the module would
shadow it.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.lazy import lazy_names

if TYPE_CHECKING:
    from farm.jobs.tuning_db import RECORDS_FILE, TUNED_LIBRARY, tune_work_dir
    from farm.tuning.advice import trials_advice
    from farm.tuning.cores import held_builders
    from farm.tuning.counters import TaskProgress, TuneCounters, read_counters
    from farm.tuning.gemm import compare_tuned, gemm_label, tune_gemm
    from farm.tuning.model import keep_untuned, tune_model
    from farm.tuning.outcome import Decision, decide, outcome_lines, searched_trials, speedup_text
    from farm.tuning.progress import TuneProgress
    from farm.tuning.result import ModelTuneResult
    from farm.tuning.search import trace_key
    from farm.tuning.seed import (
        BestRecords,
        WorkDirDatabase,
        read_database,
        target_key,
        write_database,
    )
    from farm.tuning.tail import TailPrice
    from farm.tuning.work_progress import job_progress

_SOURCES = {
    "RECORDS_FILE": "farm.jobs.tuning_db",
    "TUNED_LIBRARY": "farm.jobs.tuning_db",
    "tune_work_dir": "farm.jobs.tuning_db",
    "trials_advice": "farm.tuning.advice",
    "held_builders": "farm.tuning.cores",
    "job_progress": "farm.tuning.work_progress",
    "compare_tuned": "farm.tuning.gemm",
    "gemm_label": "farm.tuning.gemm",
    "tune_gemm": "farm.tuning.gemm",
    "keep_untuned": "farm.tuning.model",
    "tune_model": "farm.tuning.model",
    "Decision": "farm.tuning.outcome",
    "decide": "farm.tuning.outcome",
    "outcome_lines": "farm.tuning.outcome",
    "searched_trials": "farm.tuning.outcome",
    "speedup_text": "farm.tuning.outcome",
    "TaskProgress": "farm.tuning.counters",
    "TuneCounters": "farm.tuning.counters",
    "TuneProgress": "farm.tuning.progress",
    "read_counters": "farm.tuning.counters",
    "ModelTuneResult": "farm.tuning.result",
    "trace_key": "farm.tuning.search",
    "BestRecords": "farm.tuning.seed",
    "WorkDirDatabase": "farm.tuning.seed",
    "read_database": "farm.tuning.seed",
    "target_key": "farm.tuning.seed",
    "write_database": "farm.tuning.seed",
    "TailPrice": "farm.tuning.tail",
}

__all__ = [
    "RECORDS_FILE",
    "TUNED_LIBRARY",
    "BestRecords",
    "Decision",
    "ModelTuneResult",
    "TailPrice",
    "TaskProgress",
    "TuneCounters",
    "TuneProgress",
    "WorkDirDatabase",
    "compare_tuned",
    "decide",
    "gemm_label",
    "held_builders",
    "job_progress",
    "keep_untuned",
    "outcome_lines",
    "read_counters",
    "read_database",
    "searched_trials",
    "speedup_text",
    "target_key",
    "trace_key",
    "trials_advice",
    "tune_gemm",
    "tune_model",
    "tune_work_dir",
    "write_database",
]

__getattr__ = lazy_names(__name__, _SOURCES)
