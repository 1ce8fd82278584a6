"""How a model's tuning budget is spent: trials per task, search sizes, and farm's search strategy.

A model is tuned in one MetaSchedule run over all its tasks (``tune_tasks`` with
the gradient task scheduler, :mod:`farm.tuning.model`). The gradient
scheduler first gives every task one batch (round robin), then the task whose
best time, times its weight, improves fastest; it stops at the global budget.
farm adds three things MetaSchedule does not do:

- a plan of trials per task (:func:`plan_trials`): a small floor each, the
  rest by the task's estimated share of the model's time
  (:attr:`farm.tuning.tasks.ModelTask.cost`); each task's plan is its
  cap, so a heavy task gets more trials than a light one whatever the order;
- evolutionary search sized to the budget (:func:`search_settings`):
  MetaSchedule's defaults (population 512, 4 genetic rounds) took 41 s to
  propose the first 4 candidates of a small convolution on a loaded 2-core
  host, against 2 s at population 64 and 2 rounds; and a task of many
  trials has one search propose up to :data:`SEARCH_CANDIDATES`, handed out
  a batch at a time, since a search costs about the same whether it picks 16
  candidates or 64;
- :class:`FarmSearch`, which wraps MetaSchedule's evolutionary search so that
  a resumed run never sends a trace already measured in the work folder
  (MetaSchedule only remembers the traces of its own run: its evolutionary
  search seeds the population with the database's best traces and may pick
  them again), never sends more than the task's cap, and sends nothing after
  the time budget's deadline, which ends the run with its records kept;
- a cheap search while the cost model scores at random: until MetaSchedule's
  ``XGBModel`` holds its warm-up of results it ranks candidates by random
  numbers (``XGBModel.predict``), so the genetic rounds evolve the population
  by chance. Then each search only samples the design space for one batch
  (MetaSchedule's ``ReplayTrace``, :func:`farm.tuning.rounds.cost_model_cold`):
  a batch of 16 for a conv of the small CNN in 0.08 s, against 6.3-6.7 s
  through the evolution at population 256 and 3 rounds (2-core host, load
  0.3-0.8; docs/benchmarks.md, "Tuning a model").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from farm.jobs.tuning_db import FAILED_RUN_S, RECORDS_FILE
from farm.tuning.eta import EMPTY_SEARCHES

__all__ = ["SEARCHES_PER_TASK", "SEARCH_CANDIDATES", "BatchTimer", "FarmSearch", "SearchSettings",
           "measured_traces", "plain_json", "plan_trials", "search_settings", "trace_key"]

log = structlog.get_logger(__name__)


#: At most one part in this of a model's trials goes to the floors every task gets.
FLOOR_PART = 4


def plan_trials(costs: list[float], trials: int, trials_per_iter: int,
                trials_per_task: int | None = None) -> tuple[list[int], int]:
    """Measured trials per task, by the task's share of the model's cost, a small floor each.

    Each task first gets a floor: a batch where the budget holds it, but so
    that the floors take at most a quarter of ``trials`` (:data:`FLOOR_PART`);
    when even one trial each does not fit, only the heaviest tasks are kept.
    The rest of ``trials`` is shared in proportion to ``costs`` (largest
    remainders first), each task capped at ``trials_per_task``. A floor of a
    whole batch for every task spent MobileNetV3-small's 1,000 trials on its
    53 tasks' first rounds (18 each), so the gradient task scheduler never
    got to move trials to the tasks that pay; a task of little cost keeps
    farm's default schedule where its few trials do not beat it.

    Args:
        costs: each task's cost (its share of the model's time), heaviest first.
        trials: measured trials for the whole model.
        trials_per_iter: the batch size asked for.
        trials_per_task: a cap per task; None: no cap.

    Returns:
        ``(plan, batch)``: trials per task (0: not tuned; same order as
        ``costs``) and the batch size to run with.

    >>> plan_trials([3.0, 1.0], 10, 2)
    ([7, 3], 2)
    >>> plan_trials([3.0, 1.0, 1.0], 2, 8)
    ([1, 1, 0], 1)
    """
    n = len(costs)
    if n == 0 or trials <= 0:
        return [0] * n, max(1, min(trials_per_iter, trials))
    cap = trials if trials_per_task is None else min(trials, trials_per_task)
    floor = max(1, min(trials_per_iter, cap, trials // (FLOOR_PART * n)))
    kept = min(n, trials // floor)
    plan = [floor if i < kept else 0 for i in range(n)]
    left = trials - floor * kept
    weights = [max(c, 0.0) for c in costs[:kept]]
    if sum(weights) <= 0:  # no cost known: share evenly
        weights = [1.0] * kept
    shares = [w / sum(weights) * left for w in weights]
    for i, share in enumerate(shares):
        plan[i] = min(cap, plan[i] + int(share))
    order = sorted(range(kept), key=lambda i: (int(shares[i]) - shares[i], i))
    left = trials - sum(plan)
    while left > 0 and any(plan[i] < cap for i in order):
        for i in order:
            if left > 0 and plan[i] < cap:
                plan[i] += 1
                left -= 1
    return plan, max(1, min(trials_per_iter, cap, max(plan)))


#: Candidates one evolutionary search proposes at most: MetaSchedule's own
#: ``num_trials_per_iter`` default (apache/tvm ``meta_schedule/tune.py``). A
#: search's cost is its population's evolution, about the same for 16 picks as
#: for 64: on the 2-core host a small CNN's conv took 12-20 s to propose 16
#: candidates at population 256, 2 genetic rounds, and 12-14 s to propose 64
#: (docs/benchmarks.md, "Tuning a model"). :class:`FarmSearch` hands them out
#: a batch at a time, so a batch's size, its checkpoint and the time budget's
#: stop stay as they were.
SEARCH_CANDIDATES = 64

#: Searches a task gets at least, where its trials allow a batch each: each
#: search starts from the best measured so far and a cost model trained on
#: more results. Proposing each task's 60 trials in one search made the small
#: CNN's best records 0.81x their default schedule's time at 128 trials, against
#: 0.42x in batches of 16 searched one by one.
SEARCHES_PER_TASK = 8


@dataclass(frozen=True)
class SearchSettings:
    """MetaSchedule ``EvolutionarySearch`` settings (its argument names), and the picks per search.

    Attributes:
        population_size: schedules evolved per search.
        init_measured_ratio: share of the population seeded from the best measured.
        init_min_unmeasured: fresh random schedules needed to go on.
        genetic_num_iters: mutation rounds per search.
        candidates: candidates one search proposes, sent a batch at a time
            (at least a batch: a batch larger than this is searched whole).
    """

    population_size: int
    init_measured_ratio: float
    init_min_unmeasured: int
    genetic_num_iters: int
    candidates: int = 1


def search_settings(trials_per_task: int) -> SearchSettings:
    """Evolutionary search sized to a task's trials, a search proposing several batches.

    The population is 2 per trial, 64 at least and 256 at most, evolved in 2
    genetic rounds below 64 trials, 3 above; one search proposes an eighth of
    the task's trials (:data:`SEARCHES_PER_TASK`), at most
    :data:`SEARCH_CANDIDATES` (a batch at least, :class:`FarmSearch`).
    MetaSchedule's defaults (population 512, 4 rounds) proposing farm's batch
    of 16 cost 28-33 s a search on the 2-core host, 1.7 s a candidate against
    0.07 s of a phone's time to measure it (docs/benchmarks.md, "Tuning a model").

    Args:
        trials_per_task: the most trials a task is planned to measure.

    >>> s = search_settings(4)
    >>> s.population_size, s.genetic_num_iters, s.candidates
    (64, 2, 1)
    >>> s = search_settings(1000)
    >>> s.population_size, s.genetic_num_iters, s.candidates
    (256, 3, 64)
    """
    candidates = max(1, min(SEARCH_CANDIDATES, trials_per_task // SEARCHES_PER_TASK))
    population = min(256, max(64, 2 * trials_per_task))
    rounds = 2 if trials_per_task < 64 else 3
    return SearchSettings(population, 0.3, max(16, population // 4), rounds, candidates)


def plain_json(value: Any) -> Any:
    """``value`` (a trace's or target's JSON, with TVM objects inside) as the records file has it.

    TVM objects become what its JSON writer writes (``IntImm`` its number,
    ``Array`` a list, ``Map`` a dict: ``Target.export()`` is one), and booleans
    become 0 and 1: a live trace gives ``Split``'s flags as ``true``/``false``,
    the records file as ``1``/``0``, and a resumed run took the same trace for a
    new one and measured it again.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str)) or value is None:
        return value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): plain_json(v) for k, v in value.items()}
    if hasattr(value, "value"):
        return plain_json(value.value)
    try:
        return [plain_json(v) for v in value]
    except TypeError:
        return str(value)


def trace_key(trace_json: Any) -> str:
    """A trace's identity: its JSON (MetaSchedule's ``Trace.as_json``), plain, keys sorted.

    The same for a trace read back from the records file and for a candidate's
    ``sch.trace.as_json(remove_postproc=False)`` (what ``AddToDatabase`` writes).
    """
    return json.dumps(plain_json(trace_json), sort_keys=True)


def measured_traces(work_dir: Path) -> dict[int, set[str]]:
    """The trace keys measured (not failed) in a work folder, per workload index.

    A record line is ``[workload_index, [trace, run_secs, target, args_info]]``.
    """
    path = work_dir / RECORDS_FILE
    traces: dict[int, set[str]] = {}
    if not path.is_file():
        return traces
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        index, record = json.loads(line)
        run_secs = record[1]
        if run_secs and all(float(s) < FAILED_RUN_S for s in run_secs):
            traces.setdefault(index, set()).add(trace_key(record[0]))
    return traces


def _farm_search_class() -> type:
    """:class:`FarmSearch`'s TVM class, made on first use (importing TVM is slow)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

    @derived_object
    class _FarmSearch(PySearchStrategy):
        """MetaSchedule's search, minus recorded traces, up to a cap, until a deadline."""

        def __init__(self, inner: Any, sampler: Any, recorded: frozenset[str], cap: int,
                     expired: Callable[[], bool], timer: BatchTimer | None,
                     candidates: int, cold: Callable[[], bool]) -> None:
            self.inner = inner
            self.sampler = sampler
            self.recorded = recorded
            self.cap = cap
            self.expired = expired
            self.timer = timer
            self.candidates = candidates
            self.cold = cold
            self.sent = 0
            self.batch = 1
            self.held: list[Any] = []
            self.sent_keys: set[str] = set()

        def _initialize_with_tune_context(self, context: Any) -> None:
            self.inner._initialize_with_tune_context(context)
            self.sampler._initialize_with_tune_context(context)

        def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: Any,
                       database: Any = None, cost_model: Any = None) -> None:
            self.sent = 0
            self.held = []
            self.sent_keys = set()
            self.batch = max(1, num_trials_per_iter)
            self.inner.pre_tuning(min(max_trials, self.cap),
                                  max(num_trials_per_iter, self.candidates), design_spaces,
                                  database, cost_model)
            # ReplayTrace counts a whole batch per result set, short or not: its bound is
            # never the one that ends the task (the cap and the empty searches are).
            self.sampler.pre_tuning(self.cap * self.batch, self.batch, design_spaces,
                                    database, cost_model)

        def post_tuning(self) -> None:
            self.held = []
            self.inner.post_tuning()
            self.sampler.post_tuning()

        def generate_measure_candidates(self) -> list[Any] | None:
            for _ in range(EMPTY_SEARCHES):
                if self.sent >= self.cap or self.expired():
                    return None
                if self.timer is not None:
                    self.timer.sent()
                if not self.held and not self._search():
                    return None
                batch = self.held[: min(self.batch, self.cap - self.sent)]
                del self.held[: len(batch)]
                if self.timer is not None:
                    self.timer.searched(len(batch))
                if batch:
                    self.sent += len(batch)
                    return batch
            return None

        def _search(self) -> bool:
            """Search the next candidates into ``held``; False: the search has no more.

            While the cost model scores at random, the sampler proposes one
            batch; then the evolutionary search its candidates. Neither knows
            the other's picks, so a trace sent in this run is dropped as a
            recorded one is.
            """
            search = self.sampler if self.cold() else self.inner
            candidates = search.generate_measure_candidates()
            if candidates is None:
                if self.timer is not None:
                    self.timer.searched(0)
                return False
            self.held = []
            for c in candidates:
                key = trace_key(c.sch.trace.as_json(remove_postproc=False))
                if key not in self.recorded and key not in self.sent_keys:
                    self.sent_keys.add(key)
                    self.held.append(c)
            if not self.held:
                log.info("tuning_batch_already_measured", candidates=len(candidates))
            return True

        def notify_runner_results(self, measure_candidates: Any, results: Any) -> None:
            if self.timer is not None:
                self.timer.joined()
            self.inner.notify_runner_results(measure_candidates, results)
            self.sampler.notify_runner_results(measure_candidates, results)

        def clone(self) -> Any:
            return _FarmSearch(self.inner.clone(), self.sampler.clone(), self.recorded,
                               self.cap, self.expired, self.timer, self.candidates, self.cold)

    return _FarmSearch


_CLASS: list[type] = []


class BatchTimer(Protocol):
    """Told when a task's batch starts (its search), its search ends, and its results are in."""

    def sent(self) -> None:
        """The search for the task's next batch starts."""

    def searched(self, candidates: int) -> None:
        """The search for the task's next batch has ended: ``candidates`` go to be built."""

    def joined(self) -> None:
        """The results of the task's batch in flight are in."""


def FarmSearch(settings: SearchSettings, recorded: set[str], cap: int,  # noqa: N802
               expired: Callable[[], bool], timer: BatchTimer | None = None,
               cold: Callable[[], bool] = lambda: False) -> Any:
    """farm's search strategy for one task (a MetaSchedule ``SearchStrategy``).

    MetaSchedule's ``EvolutionarySearch`` with ``settings``, wrapped: each
    search proposes ``settings.candidates`` (or a batch, if larger), which are
    sent a batch at a time before the next search; a candidate whose trace is
    in ``recorded`` or was sent in this run is dropped before it is built (the
    search is asked again, up to 5 times, when all its candidates were), at
    most ``cap`` candidates are sent in this run, and none once ``expired()``
    says the time budget is spent (the candidates held are dropped). A
    ``None`` from the strategy ends the task for MetaSchedule's task
    scheduler; batches in flight still finish and are recorded.

    While ``cold()`` says the cost model scores at random, a search instead
    samples one batch from the design space (MetaSchedule's ``ReplayTrace``:
    no population, no genetic rounds, no cost model), about a hundredth of the
    evolution's time; the database's best are not seeded there, since only
    the evolution's mutations make use of them (picked unmutated, they are
    recorded traces). The first search after
    ``cold()`` turns False is the evolutionary one, from the best measured
    so far.

    Args:
        settings: the evolutionary search's sizes.
        recorded: trace keys (:func:`trace_key`) measured in earlier runs.
        cap: candidates this run may send for the task.
        expired: True once no more candidates may be sent.
        timer: told when each batch's search starts and its results are in
            (:meth:`farm.tuning.progress.TuneProgress.batch_sent`).
        cold: True while the round's cost model scores at random
            (:func:`farm.tuning.rounds.cost_model_cold`), or where an evolution
            would not fit the time left
            (:meth:`farm.tuning.progress.TuneProgress.evolution_fits`); asked
            before each search.
    """
    from tvm.s_tir import meta_schedule as ms

    if not _CLASS:
        _CLASS.append(_farm_search_class())
    inner = ms.search_strategy.EvolutionarySearch(
        population_size=settings.population_size,
        init_measured_ratio=settings.init_measured_ratio,
        init_min_unmeasured=settings.init_min_unmeasured,
        genetic_num_iters=settings.genetic_num_iters,
    )
    return _CLASS[0](inner, ms.search_strategy.ReplayTrace(), frozenset(recorded), cap,
                     expired, timer, settings.candidates, cold)
