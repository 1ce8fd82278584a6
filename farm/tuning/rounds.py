"""The MetaSchedule glue every tuning shares: builder, runner, cost model and rounds.

A gemm (:mod:`farm.tuning.gemm`) and a model (:mod:`farm.tuning.run`) are searched
with the same parts: candidates built as ``.so`` in worker processes whose slow
imports run once (``builder_initializer``), timed over the tracker's key with the
job's thread pool settings, a cost model warmed by the trials already measured,
and rounds that ask MetaSchedule only for the trials still missing
(:func:`tune_in_rounds`).

Builds run in MetaSchedule's ``LocalBuilder`` worker processes. On a 2-core host
its 30 s default timeout fails every build, because each worker first imports
``tvm.s_tir.tensor_intrin`` (tens of seconds, a few through
:func:`farm.jobs.tvmscript.import_light`); farm gives it a long timeout and
an ``initializer`` doing those imports once per worker (apache/tvm
``python/tvm/s_tir/meta_schedule/builder/local_builder.py`` documents registering
functions "via initializer"). Candidates are exported as ``.so`` (NDK-linked for
real phones) since the phone's RPC server loads shared libraries.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from farm.jobs.ndk import Linker
from farm.jobs.params import TrackerParams, TuneParams
from farm.jobs.session import ThreadPoolSession, connect_fresh
from farm.jobs.tuning_db import repair_work_dir
from farm.tuning.progress import TuneProgress

__all__ = ["SoExporter", "builder_and_runner", "builder_initializer", "cost_model",
           "cost_model_cold", "drop_unnamed_ms_handlers", "measure_callbacks", "tune_in_rounds",
           "warmup_samples"]

log = structlog.get_logger(__name__)


# --- the builder's worker processes -------------------------------------------------


def builder_initializer() -> None:
    """Run once in each LocalBuilder worker: the slow imports, before any build's timeout."""
    import tvm.support.ndk  # noqa: F401

    from farm.jobs.tvmscript import import_light

    import_light()


@dataclass(frozen=True)
class SoExporter:
    """MetaSchedule ``f_export``: a built candidate to a ``.so`` path (picklable).

    Attributes:
        linker: links the library.
        path: where the library goes; None: a fresh temporary folder each call.
    """

    linker: Linker
    path: str | None = None

    def to(self, path: str) -> SoExporter:
        """This exporter writing to ``path`` (a pipelined build's)."""
        return replace(self, path=path)

    def __call__(self, module: Any) -> str:
        """Export ``module`` to its ``.so`` and return the path.

        With a ``path`` given, the library is written beside it and renamed
        into place, so a runner waiting for ``path`` never loads half a file.
        """
        if self.path is None:
            path = Path(tempfile.mkdtemp(prefix="farm-ms-")) / "tvm_tmp_mod.so"
            module.export_library(str(path), fcompile=self.linker)
            return str(path)
        partial = f"{self.path}.partial.so"
        module.export_library(partial, fcompile=self.linker)
        os.replace(partial, self.path)
        return self.path


def warmup_samples(trials: int) -> int:
    """The results MetaSchedule's ``XGBModel`` takes before it predicts, for a run of ``trials``.

    Until it holds ``num_warmup_samples`` results (100 by default, which is a
    whole small budget) it scores candidates at random; farm has it predict
    after a tenth of the run's trials, 8 at least and 100 at most.

    >>> warmup_samples(16), warmup_samples(300), warmup_samples(5000)
    (8, 30, 100)
    """
    return min(100, max(8, trials // 10))


def cost_model(trials: int | None = None) -> Any:
    """MetaSchedule's cost model: XGBoost (a dependency), random if xgboost cannot load.

    Args:
        trials: the run's measured trials, which set when the model starts to
            predict (:func:`warmup_samples`); None: MetaSchedule's default model.

    Returns:
        An ``XGBModel``, ``"xgb"`` (with ``trials`` None) or ``"random"``.
    """
    # Without xgboost a random model still explores (more slowly) instead of
    # failing at the first update.
    try:
        import xgboost  # noqa: F401
    except ImportError:
        log.warning("tuning_cost_model_random", reason="xgboost is not installed")
        return "random"
    if trials is None:
        return "xgb"
    if not _XGB_CLASS:
        _XGB_CLASS.append(_warm_only_xgb_class())
    from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBConfig

    return _XGB_CLASS[0](num_warmup_samples=warmup_samples(trials),
                         config=XGBConfig(nthread=XGB_THREADS))


_XGB_CLASS: list[type] = []

#: XGBoost's threads when the cost model trains and predicts. MetaSchedule's
#: ``XGBConfig`` takes the host's physical cores, which the tune's builders and
#: search use at the same moment. Profiled on the 16-core GPU host (MetaSchedule's
#: ``Profiler``, 160 trials of the small CNN in 67 s, load 11.7), the trainings
#: took 19 s (``MeasureCallback/UpdateCostModel``, the largest part; 25 boosting
#: rounds of about 100 results in 5-8 s), against 4.7 s of 80 s for 232 trials
#: on this 2-core host, where the default is 2 threads. Each boosting round is a
#: few parallel loops over a few thousand rows, each as slow as its slowest
#: thread: with 16 threads beside 16 busy builders, one is most likely waiting
#: for a core (this limit is not yet measured on the 16-core host). Two threads
#: are the 2-core host's default (11,908 and 12,350 trials per phone-hour
#: against 11,175 and 11,532 at one thread, runs in turns).
XGB_THREADS = 2


def _warm_only_xgb_class() -> type:
    """MetaSchedule's ``XGBModel``, trained only once it holds its warm-up of results.

    ``XGBModel.update`` trains XGBoost on every batch (apache/tvm
    ``python/tvm/s_tir/meta_schedule/cost_model/xgb_model.py``), while
    ``predict`` uses the booster only from ``num_warmup_samples`` results
    on: each training before that is thrown away. It still keeps each
    batch's features, so the first training, at the warm-up, learns from all
    of them; and forgetting the skipped size makes its adaptive training
    (a new training only after a fifth more results) start there.
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    @derived_object
    class WarmOnlyXGBModel(ms.cost_model.XGBModel._cls):
        """``XGBModel`` whose updates skip XGBoost's training before its warm-up."""

        updating = False

        def update(self, context: Any, candidates: list[Any], results: list[Any]) -> None:
            self.updating = True
            try:
                super().update(context, candidates, results)
            finally:
                self.updating = False

        def _train(self, xs: list[Any], ys: Any) -> None:
            if self.updating and self.data_size < self.num_warmup_samples:
                self.last_train_size = 0
                return
            super()._train(xs, ys)

    return WarmOnlyXGBModel


def cost_model_cold(model: Any) -> Callable[[], bool]:
    """Whether ``model`` (:func:`cost_model`'s) scores candidates at random, asked when called.

    An ``XGBModel`` does until it holds ``num_warmup_samples`` results and a
    trained booster (its ``predict``), the warm-started ones included
    (:func:`farm.tuning.seed.warm_start`); ``"random"`` always does;
    ``"xgb"`` (MetaSchedule's own, not reachable from here) is taken to predict.
    """
    if model == "random":
        return lambda: True
    if isinstance(model, str):
        return lambda: False
    return lambda: model.data_size < model.num_warmup_samples or model.booster is None


# --- tuning -------------------------------------------------------------------------


def _batch_counter(progress: TuneProgress, on_batch: Callable[[], None]) -> Any:
    """A MetaSchedule measure callback adding one batch per call to ``progress``.

    MetaSchedule calls its measure callbacks once per measured batch, after
    ``AddToDatabase`` wrote its records (apache/tvm
    ``python/tvm/s_tir/meta_schedule/measure_callback/measure_callback.py``), so
    ``on_batch`` may read the records file.
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class BatchCounter(PyMeasureCallback):
        """Counts measured batches; TVM calls ``apply`` with positional arguments."""

        def apply(self, _task_scheduler: Any, _task_id: int, _measure_candidates: Any,
                  _builder_results: Any, _runner_results: Any) -> None:
            """One batch of candidates was measured: count it."""
            progress.add(batches=1)
            on_batch()

    return BatchCounter()


def _measured_only(add_to_database: Any) -> Any:
    """``AddToDatabase`` for the candidates the time budget did not cut (:class:`BudgetSpent`).

    A candidate cut at the budget's end was not measured: recorded, it would
    count as a failed trial, reach the fleet's records, and never be measured
    by a resumed job.
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    from farm.tuning.rate import cut_by_budget

    @derived_object
    class MeasuredOnly(PyMeasureCallback):
        """Drops the cut candidates, then adds the others; TVM calls ``apply`` positionally."""

        def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Any,
                  builder_results: Any, runner_results: Any) -> None:
            """Record the batch's candidates that were measured or failed on their own."""
            keep = [i for i, r in enumerate(runner_results) if not cut_by_budget(r.error_msg)]
            add_to_database.apply(task_scheduler, task_id,
                                  [measure_candidates[i] for i in keep],
                                  [builder_results[i] for i in keep],
                                  [runner_results[i] for i in keep])

    return MeasuredOnly()


def measure_callbacks(progress: TuneProgress, on_batch: Callable[[], None]) -> list[Any]:
    """MetaSchedule's default measure callbacks, farm's batch counter right after ``AddToDatabase``.

    The counter is saved as soon as the batch's records are, before
    ``UpdateCostModel`` retrains XGBoost (seconds on a busy host): a farmd
    killed in between would otherwise keep the records but lose the batch.
    ``AddToDatabase`` records no candidate the time budget cut (:func:`_measured_only`).
    """
    from tvm.s_tir import meta_schedule as ms

    callbacks = list(ms.measure_callback.MeasureCallback.create("default"))
    at = next((i for i, c in enumerate(callbacks)
               if isinstance(c, ms.measure_callback.AddToDatabase)), None)
    if at is None:
        callbacks.append(_batch_counter(progress, on_batch))
        return callbacks
    callbacks[at] = _measured_only(callbacks[at])
    callbacks.insert(at + 1, _batch_counter(progress, on_batch))
    return callbacks


def builder_and_runner(
    params: TuneParams, tracker: TrackerParams, linker: Linker, *, warm: bool = False,
    on_built: Callable[[], None] | None = None,
) -> tuple[Any, Any]:
    """MetaSchedule's builder (host, ``.so`` per candidate) and runner (the tracker's key).

    Candidates are timed with the job's thread pool settings
    (:class:`farm.jobs.session.ThreadPoolSession`), as its untuned and tuned timings are.

    Args:
        params: builder and timing settings, the work folder.
        tracker: the tracker and the key the phones serve.
        linker: links each candidate's ``.so``.
        warm: one pool of build processes started now and kept for the whole
            run (:func:`farm.tuning.builder.warm_builder`, pipelined with
            ``params.pipeline``: the runner waits for each library), and each session
            and upload timed into the work folder (:class:`farm.tuning.rate.TimedSession`,
            :class:`farm.tuning.rate.TimedUpload`), each runner worker's session
            kept for its next candidate with ``params.keep_sessions``
            (:class:`farm.tuning.kept_session.KeptSession`);
            False: MetaSchedule's ``LocalBuilder`` (a fresh pool per batch).
        on_built: called after each build call of the warm builder (a batch built).

    Returns:
        ``(builder, RPCRunner)``.
    """
    from tvm.s_tir import meta_schedule as ms

    from farm.tuning.builder import warm_builder
    from farm.tuning.kept_session import KeptSession, kept_cleanup
    from farm.tuning.rate import MEASURE_UNTIL_FILE, UPLOADS_FILE, TimedSession, TimedUpload

    if warm:
        builder = warm_builder(params.builder_workers, params.builder_timeout_s,
                               SoExporter(linker), builder_initializer, on_built=on_built,
                               pipeline=params.pipeline)
    else:
        builder = ms.builder.LocalBuilder(
            max_workers=params.builder_workers,
            timeout_sec=params.builder_timeout_s,
            f_export=SoExporter(linker),
            initializer=builder_initializer,
        )
    upload = TimedUpload(str(params.work_dir / UPLOADS_FILE),
                         params.builder_timeout_s if params.pipeline else 0.0,
                         str(params.work_dir / MEASURE_UNTIL_FILE)) if warm else None
    workload = params.model if params.model is not None else params.gemm
    threads = connect_fresh if workload is None else ThreadPoolSession(
        workload.threads.affinity_mode, workload.threads.num_threads)
    kept = warm and params.keep_sessions
    if kept:
        threads = KeptSession(threads)
    session = threads if not warm else TimedSession(str(params.work_dir / UPLOADS_FILE), threads)
    runner = ms.runner.RPCRunner(
        ms.runner.RPCConfig(
            tracker_host=tracker.host,
            tracker_port=tracker.port,
            tracker_key=tracker.key,
            session_timeout_sec=int(tracker.session_timeout_s),
        ),
        evaluator_config=ms.runner.EvaluatorConfig(
            number=params.timing.number,
            repeat=params.timing.repeat,
            min_repeat_ms=params.timing.min_repeat_ms,
        ),
        max_workers=params.runner_workers,
        f_create_session=session,
        f_upload_module=upload,
        f_cleanup=kept_cleanup if kept else None,
    )
    return builder, runner


def tune_in_rounds(
    params: TuneParams, asked: int, measured: Callable[[], int],
    tune_round: Callable[[int], bool | None], progress: TuneProgress,
    expired: Callable[[], bool] = lambda: False,
) -> int:
    """Run ``tune_round(remaining)`` until ``asked`` trials are measured or rounds run out.

    MetaSchedule counts trials from 0 in every run, measured or failed; farm asks
    each round only for the trials still missing, so no measured trial is
    measured again and a failed one is made up for (up to ``params.max_rounds``).
    A round that says its tasks ran dry (every search came up empty) is the
    last: the small CNN's max pool, out of new candidates at 89 of its 250
    trials, took 3 more rounds of empty searches (28 s) before its job went on.

    Args:
        params: the work folder and ``max_rounds``.
        asked: measured trials wanted.
        measured: reads the trials measured so far from the (repaired) work folder.
        tune_round: one MetaSchedule run asking for that many trials; it returns
            False when its searches sent no candidate (None: not known).
        progress: counts the rounds.
        expired: True once the time budget is spent: no further round starts.

    Returns:
        The rounds run.
    """
    done, rounds = measured(), 0
    while done < asked and rounds < params.max_rounds and not expired():
        log.info("tuning_round", round=rounds, measured=done, remaining=asked - done)
        sent = tune_round(asked - done)
        rounds += 1
        progress.add(rounds=1)
        repair_work_dir(params.work_dir)
        done = measured()
        if sent is False:
            log.info("tuning_tasks_ran_dry", measured=done, remaining=asked - done)
            break
    return rounds


def drop_unnamed_ms_handlers() -> None:
    """Remove handlers without a name from MetaSchedule's logger.

    TVM's ``create_loggers`` (tvm/s_tir/meta_schedule/logging.py) lists that
    logger's handlers by name in a ``dictConfig`` and fails (``None.format``)
    on one without a name. One is left behind after a ``tune_tir`` has run
    in the same process (seen running a model tuning, then a GEMM tuning,
    and the other way round, in one test process); an attempt child tunes
    once, so only a process that tunes twice meets it. Every tuning entry
    point calls this before MetaSchedule makes its loggers.
    """
    import logging

    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in list(ms_logger.handlers):
        if handler.get_name() is None:
            ms_logger.removeHandler(handler)
