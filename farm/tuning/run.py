"""The search of a model's planned tasks: one MetaSchedule run over them all, in rounds.

Each round first measures the default schedule of every task that has
trials left and no such record yet (:mod:`farm.tuning.baseline`): one of
the task's trials, recorded like any candidate, so that the tuned build
applies a tuning record only where it beat farm's default schedule on the
job's phones, and the job has its first measured trials before MetaSchedule's
search has proposed any.

All tasks are tuned in one MetaSchedule run (``tune_tasks`` with the gradient
task scheduler, XGBoost cost model) into the one work folder database
(:mod:`farm.tuning.gemm` describes the folder, :mod:`farm.tuning.rounds` the
runner set-up, shared with the GEMM tuning). :mod:`farm.tuning.search` plans each task's trials (a
small floor, the rest by its estimated share of the model's time), sizes the
evolutionary search to them, and wraps it so that a resumed run sends no
trace already measured. Resuming counts each task's measured trials in the
work folder (its records are found by its workload's line in
``database_workload.json``) and asks MetaSchedule only for the missing ones,
in rounds (:func:`farm.tuning.rounds.tune_in_rounds`) that make up for failed
measurements; a task already complete costs nothing. A time budget
(``for_s``, seconds over all attempts, each from its start in the queue:
:meth:`farm.tuning.progress.TuneProgress.expired`) bounds everything the
attempt does: no batch is sent once less time is left than the last batch
took plus the shortest check of the picks (:func:`check_price`, priced from
this attempt's measurements) and what follows the check (the tuned build
and its timing: :meth:`farm.tuning.progress.TuneProgress.tail_s`); the batch
in flight is measured until the time kept for them begins (its other
candidates dropped unrecorded: :func:`farm.tuning.rate.measure_until`,
:class:`farm.tuning.rate.BudgetSpent`), and the model is built with the
records so far. The check then runs as many rounds as the time left before
the tail holds
(:meth:`farm.tuning.check_cost.CheckPrice.rounds_in`); fewer than
:data:`MIN_CHECK_ROUNDS` (a batch in flight ran past the share kept): none,
the picks keep their default schedule (the untuned build), and the result
counts them.

Given the fleet's best records (:func:`seed_from_fleet`,
:mod:`farm.tuning.seed`), each task short of its trials first gets its
workload's best records from earlier tunings on the same target and device
model, which count as measured. Given a ``checkpoint``, the records measured
so far are handed on after every batch.

The build processes start first, in the background
(:mod:`farm.tuning.builder`), and stay for the whole run. On CPU targets,
each task whose best record is a searched candidate then has it measured
again against its default schedule (:mod:`farm.tuning.verify`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from farm.jobs.ndk import Linker
from farm.jobs.params import TrackerParams, TuneParams
from farm.jobs.tuning_db import best_record_s, count_trials, default_and_best_s
from farm.tuning.baseline import BaselineTask, measure_baselines, missing_baselines
from farm.tuning.check_cost import CheckPrice
from farm.tuning.progress import TuneProgress
from farm.tuning.rate import (
    MEASURE_UNTIL_FILE,
    limit_per_phone_hour,
    measure_until,
    run_overhead_s,
    trials_per_phone_hour,
)
from farm.tuning.rounds import (
    builder_and_runner,
    cost_model,
    cost_model_cold,
    drop_unnamed_ms_handlers,
    measure_callbacks,
    tune_in_rounds,
    warmup_samples,
)
from farm.tuning.search import FarmSearch, measured_traces, search_settings
from farm.tuning.seed import BestRecords, seed_work_dir, target_key, warm_start
from farm.tuning.space import tune_space
from farm.tuning.tasks import Planned
from farm.tuning.verify import Verdict, verify_picks

__all__ = ["MIN_CHECK_ROUNDS", "STARTING_PHASE", "Checkpoint",
           "check_price", "measured", "seed_from_fleet", "tune_all"]

log = structlog.get_logger(__name__)


#: Called after each measured batch with each task's name by its workload
#: index; it may read the work folder's records, complete up to that batch.
Checkpoint = Callable[[Mapping[int, str]], None]


#: The fewest rounds of the picks' check that judge a spread (one round has none).
MIN_CHECK_ROUNDS = 2

#: The phase while the builders' pool and the runner start (once an attempt, when first needed).
STARTING_PHASE = "starting the builders and the runner"


def check_price(planned: list[Planned], params: TuneParams, builder: Any) -> CheckPrice:
    """What the picks' check would cost now (:mod:`farm.tuning.check_cost`).

    Priced from the work folder: the tasks whose best record is not their
    first (:func:`farm.jobs.tuning_db.default_and_best_s`), their records'
    run times, the sessions' and uploads' seconds logged in this attempt, and
    the last build wave of ``builder`` (None: not started, 0 s).
    """
    indices = {p.index for p in planned}
    pairs = {i: pair for i, pair in default_and_best_s(params.work_dir).items() if i in indices}
    return CheckPrice.of(pairs, params.timing, run_overhead_s(params.work_dir),
                         params.runner_workers, getattr(builder, "wave_s", None),
                         params.builder_workers)


@dataclass(frozen=True)
class _TaskTimer:
    """A task's batches timed into the progress (a :class:`farm.tuning.search.BatchTimer`)."""

    progress: TuneProgress
    task: str

    def sent(self) -> None:
        self.progress.batch_sent(self.task)

    def searched(self, candidates: int) -> None:
        self.progress.batch_searched(self.task, candidates)

    def joined(self) -> None:
        self.progress.batch_joined(self.task)


def _contexts(planned: list[Planned], caps: list[int], params: TuneParams,
              progress: TuneProgress, expired: Callable[[], bool],
              cold: Callable[[], bool]) -> tuple[list[Any], list[float]]:
    """MetaSchedule's ``TuneContext`` per task with a cap left, each with farm's search.

    As ``extracted_tasks_to_tune_contexts`` (apache/tvm
    ``python/tvm/s_tir/meta_schedule/relax_integration.py``) builds them, but
    each with its own :func:`farm.tuning.search.FarmSearch` (its cap, recorded
    traces, ``cold`` cost model), which that function cannot give.
    """
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir
    from tvm.s_tir.meta_schedule.utils import fork_seed

    drop_unnamed_ms_handlers()
    recorded = measured_traces(params.work_dir)
    settings = search_settings(max(p.trials for p in planned))
    live = [(p, cap) for p, cap in zip(planned, caps, strict=True) if cap > 0]
    loggers = get_loggers_from_work_dir(str(params.work_dir), [p.task.name for p, _ in live])
    contexts, weights = [], []
    for (p, cap), logger, seed in zip(live, loggers, fork_seed(params.seed, n=len(live)),
                                      strict=True):
        strategy = FarmSearch(settings, recorded.get(p.index, set()), cap, expired,
                              _TaskTimer(progress, p.task.name), cold)
        contexts.append(TuneContext(
            mod=p.task.extracted.dispatched[0], target=p.task.extracted.target,
            space_generator=tune_space(p.task.extracted.target), search_strategy=strategy,
            task_name=p.task.name, logger=logger, rand_state=seed, num_threads="physical",
        ).clone())
        weights.append(float(p.task.weight))
    return contexts, weights


def _warm_start(model: Any, trials: int, progress: TuneProgress, contexts: list[Any],
                params: TuneParams) -> None:
    """A round's cost model (:func:`farm.tuning.rounds.cost_model`) warm-started, ``progress`` told.

    It is first trained on the work folder's records of the tasks (the
    fleet's, seeded, and earlier attempts': :func:`farm.tuning.seed.warm_start`),
    which count towards its warm-up. Searches cost more once it predicts
    (:meth:`TuneProgress.start_round`): before, they only sample (``FarmSearch``).
    """
    fed = warm_start(model, contexts, params.work_dir)
    if fed:
        log.info("tuning_cost_model_warm_started", records=fed)
    progress.start_round(0 if isinstance(model, str) else max(0, warmup_samples(trials) - fed))


def _round_start(planned: list[Planned], caps: list[int], params: TuneParams,
                 progress: TuneProgress, expired: Callable[[], bool], asked: int,
                 batch: int) -> tuple[list[Any], list[float], Any, float]:
    """A round's cost model, its tasks (:func:`_contexts`), then the model warm-started.

    Returns:
        The contexts, their weights, the cost model and the seconds they took.
    """
    from_s = progress.tuning_s()
    _import_tensor_intrin(progress)
    model = cost_model(asked)
    cold = cost_model_cold(model)  # or an evolution would not fit the time left: sample
    contexts, weights = _contexts(planned, caps, params, progress, expired,
                                  lambda: cold() or not progress.evolution_fits())
    log.info("tuning_round_tasks", tasks=len(contexts), trials=sum(caps), batch=batch)
    _warm_start(model, asked, progress, contexts, params)
    return contexts, weights, model, progress.tuning_s() - from_s


def _import_tensor_intrin(progress: TuneProgress) -> None:
    """Import what MetaSchedule's ``TuneContext`` imports first, saying so in the progress.

    ``tvm.s_tir.tensor_intrin`` parses ~500 TVMScript functions; imported
    plainly it took 1 to 7 minutes in a process that has loaded farm (or
    pytest) on the loaded 2-core CI host, a few seconds through
    :func:`farm.jobs.tvmscript.import_light`. An attempt child forked from the
    zygote has it already (:data:`farm.runner.zygote.PRELOAD`); a cold one
    shows this phase instead of a silent first round.
    """
    import sys

    from farm.jobs.tvmscript import TENSOR_INTRIN, import_light

    if TENSOR_INTRIN not in sys.modules:
        progress.set_phase("importing TVM's tensor intrinsics")
        import_light(TENSOR_INTRIN)
    progress.set_phase("tuning")


def _measure_baselines(planned: list[Planned], params: TuneParams, builder: Any, runner: Any,
                       progress: TuneProgress, expired: Callable[[], bool],
                       on_batch: Callable[[], None]) -> float:
    """Measure the default schedule of each task with trials left and none measured yet.

    The baseline is one of the task's trials (:mod:`farm.tuning.baseline`).

    Returns:
        Seconds it took (0: none measured).
    """
    left = [p for p, m in zip(planned, measured(planned, params), strict=True) if m < p.trials]
    tasks = missing_baselines(_baseline_tasks(left), params.work_dir)
    if not tasks:
        return 0.0
    from_s = progress.tuning_s()
    progress.set_phase("measuring the default schedules")
    measure_baselines(tasks, builder, runner, params.work_dir, params.builder_workers,
                      expired, on_batch)
    return progress.tuning_s() - from_s


def seed_from_fleet(planned: list[Planned], params: TuneParams, target: dict[str, Any],
                    fleet: BestRecords) -> int:
    """Seed each task short of its trials with the fleet's best records.

    The records come through ``fleet`` and are appended by
    :func:`farm.tuning.seed.seed_work_dir`; they count as measured trials.

    Returns:
        Records seeded.
    """
    import tvm

    short = [(p, p.trials - m) for p, m in zip(planned, measured(planned, params), strict=True)
             if m < p.trials]
    if not short:
        return 0
    found = fleet(target_key(tvm.target.Target(target).export()),
                  {p.shash: p.trials for p, _ in short})
    seeded = seed_work_dir(params.work_dir, {p.index: found.get(p.shash, ()) for p, _ in short},
                           {p.index: left for p, left in short})
    log.info("tuning_seeded_from_fleet", records=seeded, tasks=len(short))
    return seeded


def measured(planned: list[Planned], params: TuneParams) -> list[int]:
    """Each task's measured trials in the work folder."""
    return [count_trials(params.work_dir, p.index)[0] for p in planned]


def _baseline_tasks(planned: list[Planned]) -> list[BaselineTask]:
    return [BaselineTask(p.task.name, p.index, p.task.extracted.dispatched[0],
                         p.task.extracted.target) for p in planned]


def _expired(params: TuneParams, progress: TuneProgress, reserve_s: float,
             untimed_batch_s: float = 0.0) -> bool:
    """Whether no further batch fits the budget (:meth:`TuneProgress.expired`).

    Before this attempt has timed a batch, one is priced ``untimed_batch_s``
    (the default schedules' measurement: a search, builds and runs take at
    least as long): priced 0 s, a first batch of 16 sent with 33 s left ended
    23 s later, and its job 11 s past a 60 s budget.

    Each time asked, the runner is told until when it measures: the budget's
    end less ``reserve_s`` kept for the picks' check and less what follows it
    (:meth:`TuneProgress.tail_s`), so the batch in flight is cut where the
    search's share ends (:func:`farm.tuning.rate.measure_until`): its
    candidates not measured by then are dropped, those measured kept.
    """
    left_s = progress.budget_left_s()
    measure_until(params.work_dir / MEASURE_UNTIL_FILE,
                  None if left_s is None else time.time() + left_s - reserve_s - progress.tail_s())
    if progress.expired(reserve_s):
        return True
    return (left_s is not None and progress.last_batch_s is None
            and left_s <= untimed_batch_s + reserve_s + progress.tail_s())


def _end(params: TuneParams, builders: list[Any]) -> None:
    """The runner measures without limit again (the next attempt's); the builders end."""
    measure_until(params.work_dir / MEASURE_UNTIL_FILE, None)
    for builder in builders:
        builder.shutdown()


def _check_picks(planned: list[Planned], params: TuneParams, progress: TuneProgress,
                 started: Callable[[], tuple[Any, Any]], builder: Any) -> list[Verdict]:
    """Measure each task's pick against its default again, the rounds the budget left holds.

    The time left less what follows the check (:meth:`TuneProgress.tail_s`)
    holds the rounds; fewer than :data:`MIN_CHECK_ROUNDS`: none, and the
    picks keep their default schedule. The runner measures without limit:
    the rounds are priced to fit.
    """
    measure_until(params.work_dir / MEASURE_UNTIL_FILE, None)
    price = check_price(planned, params, builder)
    left_s = progress.budget_left_s()
    rounds = price.rounds_in(None if left_s is None else left_s - progress.tail_s(),
                             params.verify_rounds, MIN_CHECK_ROUNDS)
    progress.set_phase("checking each task's pick against its default schedule"
                       if rounds else "time budget spent: no pick measured again")
    check_from_s = progress.tuning_s()
    verdicts = verify_picks(_baseline_tasks(planned), started, params.work_dir, rounds)
    log.info("tuning_picks_check_timed", rounds=rounds, build_s=price.build_s,
             round_s=price.round_s, priced_s=price.cost_s(rounds),
             took_s=progress.tuning_s() - check_from_s, batch_s=progress.last_batch_s,
             budget_left_s=progress.budget_left_s(), tail_s=progress.tail_s())
    return verdicts


def tune_all(planned: list[Planned], batch: int, params: TuneParams, tracker: TrackerParams,
             linker: Linker, progress: TuneProgress, checkpoint: Checkpoint | None,
             verdicts: list[Verdict] | None) -> str:
    """Tune the planned tasks together until each has its trials or the budget is spent.

    ``checkpoint`` (if any) is called after each measured batch, with each
    task's name by its workload index. Then, given a list in ``verdicts`` (CPU
    targets), each task's pick is measured again against its default schedule
    (:mod:`farm.tuning.verify`, in the rounds the time budget left holds:
    :func:`check_price`) and the verdicts appended.

    Returns:
        Why it stopped: ``"trials"``, ``"time"`` or ``"rounds"``.
    """
    from tvm.s_tir import meta_schedule as ms

    measurers: list[tuple[Any, Any]] = []  # started when first needed: none if nothing is measured
    asked = sum(p.trials for p in planned)
    start_s = progress.tuning_s()
    start_measured = sum(min(m, p.trials) for m, p in zip(measured(planned, params), planned,
                                                          strict=True))

    def done_trials() -> int:
        return sum(min(m, p.trials) for m, p in zip(measured(planned, params), planned,
                                                    strict=True))

    price = [CheckPrice(0.0, 0.0)]  # the check's, updated after each batch

    def on_batch() -> None:
        progress.set_run_s(run_overhead_s(params.work_dir) / max(params.runner_workers, 1),
                           params.builder_workers)
        if verdicts is not None:
            price[0] = check_price(planned, params, measurers[0][0] if measurers else None)
            progress.set_check_s(price[0].cost_s(params.verify_rounds),  # for the ETA
                                 runs=price[0].runs * params.verify_rounds,
                                 builds=price[0].runs)
        if checkpoint is not None:
            checkpoint({p.index: p.task.name for p in planned})
        counts = measured(planned, params)
        for p, count in zip(planned, counts, strict=True):
            progress.update_task(p.task.name, count, best_record_s(params.work_dir, p.index))
        done = sum(min(m, p.trials) for m, p in zip(counts, planned, strict=True))
        progress.set_rate(
            trials_per_phone_hour(done - start_measured, progress.tuning_s() - start_s,
                                  params.runner_workers),
            limit_per_phone_hour(params.work_dir, params.timing))

    def started() -> tuple[Any, Any]:
        if not measurers:  # a pool of build processes: seconds, a minute on a loaded host
            phase = progress.counters.phase
            progress.set_phase(STARTING_PHASE)
            measurers.append(builder_and_runner(params, tracker, linker, warm=True,
                                                on_built=progress.batch_built))
            progress.set_phase(phase)
        return measurers[0]

    # Kept from the search: the shortest check of the picks, and a round's end (its last
    # results recorded and learnt, its searches stopped), priced as its start (the tasks'
    # contexts, the cost model trained on the records): a 60 s tune's search ended 3.5 s
    # after its runner's cut, 5.3 s after its round began.
    def reserve_s() -> float:
        return 0.0 if verdicts is None else price[0].cost_s(
            min(MIN_CHECK_ROUNDS, params.verify_rounds))

    # This attempt's measurement of the default schedules, and its last round's start.
    baselines_s, round_start_s = [0.0], [0.0]

    def expired() -> bool:
        return _expired(params, progress, reserve_s() + round_start_s[0], baselines_s[0])

    def tune_round(_remaining: int) -> bool | None:
        if expired():  # nothing is started once the budget is spent, the builders neither
            return None
        builder, runner = started()
        baselines_s[0] = max(baselines_s[0], _measure_baselines(
            planned, params, builder, runner, progress, expired, on_batch))
        caps = [max(0, p.trials - m) for p, m in zip(planned, measured(planned, params),
                                                      strict=True)]
        if not any(caps) or expired():
            return None
        contexts, weights, model, round_start_s[0] = _round_start(
            planned, caps, params, progress, expired, asked, batch)
        sent_before = progress.candidates_sent
        ms.tune_tasks(
            tasks=contexts, task_weights=weights, work_dir=str(params.work_dir),
            max_trials_global=sum(caps), max_trials_per_task=max(caps),
            num_trials_per_iter=batch, builder=builder, runner=runner,
            cost_model=model, measure_callbacks=measure_callbacks(progress, on_batch),
            task_scheduler=ms.task_scheduler.GradientBased(seed=params.seed or -1),
        )
        return progress.candidates_sent > sent_before

    try:
        progress.enter_stage("search")  # again when this attempt takes over another's tasks
        tune_in_rounds(params, asked, done_trials, tune_round, progress, expired)
        progress.enter_stage("check")
        if verdicts is not None:
            verdicts += _check_picks(planned, params, progress, started,
                                     measurers[0][0] if measurers else None)
    finally:
        _end(params, [builder for builder, _ in measurers])
    on_batch()
    return "trials" if done_trials() >= asked else "time" if expired() else "rounds"
