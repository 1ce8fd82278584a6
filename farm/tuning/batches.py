"""What each batch of a tuning run cost, told by MetaSchedule's task scheduler as it goes.

The task scheduler runs in one thread: for a task it searches a batch
(``sent`` to ``searched``), builds it (to ``built``), sends it to the runner
and goes on with the next task; it joins a batch's results (``joined``) only
when it comes back to that task (after a round over all tasks, at first),
then updates the cost model before the next search. So a batch's own time
runs from its search's start to its results, less the other tasks' searches
and builds meanwhile (:meth:`BatchTimes.joined`); the time from a batch's
results to the next search is the scheduler's gap (:attr:`BatchTimes.gap_s`).
:class:`farm.tuning.progress.TuneProgress` keeps one :class:`BatchTimes`
per attempt, under its lock, for the time budget's stop and the ETA
(:func:`farm.tuning.eta.search_left_s`).

A search costs more once MetaSchedule's ``XGBModel`` predicts: until it holds
``num_warmup_samples`` results of the round it scores candidates at random
(``XGBModel.predict``, apache/tvm
``python/tvm/s_tir/meta_schedule/cost_model/xgb_model.py``), and farm's search
then only samples a batch (:func:`farm.tuning.search.FarmSearch`): 0.08 s
against 6.3-6.7 s for the small CNN's convs evolved at random scores, which
took 18 to 25 s once the model predicted (9 to 11 s before, docs/benchmarks.md's
history). So each search is noted cold or warm (:meth:`BatchTimes.start_round`), and a
task is priced from its warm searches, or its cold ones grown (:func:`growth`).
"""

from __future__ import annotations

import statistics

from farm.tuning.eta import (
    FIRST_BATCH_GROWTH,
    RECENT_BATCHES,
    SAMPLED_GROWTH,
    TaskCost,
    dry_left,
)

__all__ = ["BatchTimes", "growth", "later_s", "recent_s"]

#: The last searches kept to tell a batch's own time (more than tasks in a round rarely matter).
_SEARCHES_KEPT = 256


def later_s(seconds: list[float]) -> float | None:
    """The mean of the last :data:`RECENT_BATCHES` of ``seconds`` after the first; None: only one.

    >>> later_s([4.0, 8.0, 6.0]), later_s([4.0]) is None
    (7.0, True)
    """
    later = seconds[1:][-RECENT_BATCHES:]
    return sum(later) / len(later) if later else None


def recent_s(seconds: list[float]) -> float | None:
    """The mean of the last :data:`RECENT_BATCHES` of ``seconds``; None: none.

    >>> recent_s([4.0, 8.0, 6.0, 2.0, 4.0]), recent_s([]) is None
    (5.0, True)
    """
    recent = seconds[-RECENT_BATCHES:]
    return sum(recent) / len(recent) if recent else None


def growth(per_task: list[tuple[list[float], list[float]]],
           prior: float = FIRST_BATCH_GROWTH) -> float:
    """How many times its cold searches a task's warm searches cost: the tasks' median.

    Each task's ratio is its recent warm searches' mean (:func:`recent_s`) over
    its cold ones' mean, and ``prior`` counts as one more task: the first task
    with a warm search has one, whose seconds swing 2x with the host's load
    (taken alone, a 300-trial run's ETA went from -15% to +45% at its quarter).

    Args:
        per_task: each task's (cold searches, warm searches), seconds, in order.
        prior: the ratio taken before any task shows one
            (:data:`farm.tuning.eta.FIRST_BATCH_GROWTH`, or
            :data:`farm.tuning.eta.SAMPLED_GROWTH` where cold searches only sample).

    >>> growth([([4.0], [8.0]), ([2.0], [2.0, 2.0]), ([5.0], [])])
    1.5
    >>> growth([([5.0], [])]), growth([([2.0], [5.0])]), growth([([2.0, 4.0], [9.0])])
    (1.5, 2.0, 2.25)
    """
    ratios = [warm / (sum(cold) / len(cold)) for cold, warm_s in per_task
              if cold and sum(cold) > 0 and (warm := recent_s(warm_s)) is not None]
    return statistics.median([prior, *ratios])


class BatchTimes:
    """One attempt's batches, each event given its time (monotonic seconds); not thread-safe."""

    def __init__(self) -> None:
        # When each task's batch in flight was sent; each joined batch's own seconds.
        self._sent_s: dict[str, float] = {}
        self._batch_s: list[float] = []
        # When each task's search (and build) in flight ended, and the last searches
        # with their builds (start, end); whose build runs now.
        self._searched_s: dict[str, float] = {}
        self._searches: list[tuple[float, float]] = []
        self._building: str | None = None
        # Per task: its measured batches' (seconds, candidates), and its batch in
        # flight's (search seconds, candidates); the largest batch sent.
        self._task_measure: dict[str, list[tuple[float, int]]] = {}
        self._in_flight: dict[str, tuple[float, int]] = {}
        self.batch_n = 0
        # Each task's searches' seconds, cold (before the cost model predicts) or warm;
        # whether each batch in flight was sent warm; the cost model's warm-up
        # (None: unknown) and the candidates measured in this round.
        self._cold_searches: dict[str, list[float]] = {}
        self._warm_searches: dict[str, list[float]] = {}
        self._sent_warm: dict[str, bool] = {}
        self._warm_after: int | None = None
        self._round_measured = 0
        # Each task's searches' yields (candidates, 0 included), and all candidates sent.
        self._yields: dict[str, list[int]] = {}
        self.candidates_sent = 0
        # When the last batch's results came in; the scheduler's last gaps.
        self._joined_at: float | None = None
        self._gaps_s: list[float] = []
        # The last builds' seconds per candidate.
        self._build_s: list[float] = []

    def start_round(self, warm_after: int | None) -> None:
        """A round of MetaSchedule starts, with a cost model new to it.

        Args:
            warm_after: the results the cost model needs before it predicts
                (:func:`farm.tuning.rounds.warmup_samples`; 0: a random model, which
                never does, each search costs alike); None: unknown, and a
                task's first search is its only cold one.
        """
        self._warm_after = warm_after
        self._round_measured = 0

    def sent(self, task: str, now: float) -> None:
        """A batch of ``task`` starts: its search begins.

        The time since the last batch's results came in (if any) is the task
        scheduler's gap between batches: MetaSchedule updates the cost model
        and farm checkpoints the records after each batch, 1 to 7 s each on
        the small CNN, which no batch's own time counts.
        """
        self._sent_s[task] = now
        self._sent_warm[task] = (
            task in self._cold_searches or task in self._warm_searches
            if self._warm_after is None else self._round_measured >= self._warm_after)
        if self._joined_at is not None:
            self._gaps_s = [*self._gaps_s[-RECENT_BATCHES + 1:], now - self._joined_at]
            self._joined_at = None

    def searched(self, task: str, candidates: int, now: float) -> None:
        """The search for ``task``'s batch has ended: ``candidates`` go to be built and run."""
        sent_s = self._sent_s.get(task)
        if sent_s is None:
            return
        self._searched_s[task] = now
        self._searches = [*self._searches[-_SEARCHES_KEPT:], (sent_s, now)]
        self._yields.setdefault(task, []).append(candidates)
        self.candidates_sent += candidates
        searches = self._warm_searches if self._sent_warm.get(task) else self._cold_searches
        searches.setdefault(task, []).append(now - sent_s)
        self._in_flight[task] = (now - sent_s, candidates)
        self.batch_n = max(self.batch_n, candidates)
        self._building = task

    def built(self, now: float) -> None:
        """The batch last searched is built (MetaSchedule builds it before the next search).

        Its build, in the task scheduler's thread, is the batch's own time and
        not that of a batch waiting for its results meanwhile: in the round
        robin over the small CNN's 4 tasks, the first task's batch counted the
        others' builds too and priced its trials at 1.8 s each, 0.6 s later on.
        """
        task, self._building = self._building, None
        if task is not None and task in self._searched_s and self._searches:
            candidates = self._in_flight.get(task, (0.0, 0))[1]
            if candidates > 0:
                self._build_s = [*self._build_s[-RECENT_BATCHES + 1:],
                                 (now - self._searched_s[task]) / candidates]
            self._searched_s[task] = now
            self._searches[-1] = (self._searches[-1][0], now)

    def joined(self, task: str, now: float) -> None:
        """The results of ``task``'s batch in flight are in: note how long it took.

        Its own time: from its search's start to its results, less the other
        tasks' searches (and builds, :meth:`built`) after its own ended. Counted
        in, the first batch of the small CNN's 4 tasks took 160 s (its own
        search and measurement about 40 s) and stopped a ``--for 240`` run
        100 s early.
        """
        sent_s = self._sent_s.pop(task, None)
        searched_s = self._searched_s.pop(task, None)
        if sent_s is None:
            return
        others_s = 0.0 if searched_s is None else sum(
            max(0.0, min(end, now) - max(start, searched_s)) for start, end in self._searches)
        self._batch_s.append(now - sent_s - others_s)
        self._joined_at = now
        search_s, candidates = self._in_flight.pop(task, (0.0, 0))
        self._round_measured += candidates
        if candidates > 0:
            self._task_measure.setdefault(task, []).append(
                (max(0.0, now - sent_s - others_s - search_s), candidates))

    @property
    def last_batch_s(self) -> float | None:
        """The longest own time of the last 4 batches (the search slows); None before one."""
        return max(self._batch_s[-RECENT_BATCHES:], default=None)

    @property
    def evolution_s(self) -> float:
        """Seconds the round's first evolutionary search costs beyond a sampled one; else 0.

        Once the next search would be the round's first warm one (its results
        reached the cost model's warm-up, no warm search ended yet), it is priced
        at the sampled ones' mean grown :data:`farm.tuning.eta.SAMPLED_GROWTH`:
        a search is not cut, and a 20-30 s evolution started near the end of the
        small CNN's ``--for 60`` tune (bench/bench_tune_speed.py) ended its
        tuning at 74.3 s. Where it does not fit, the search samples instead
        (:func:`farm.tuning.search.FarmSearch`): stopping there ended resnet18's
        GPU ``--for 240`` tune at 118 s, its GPU samples grown to minutes.
        """
        cold = [s for searches in self._cold_searches.values() for s in searches]
        if (not self._batch_s or not self._warm_after or self._warm_searches or not cold
                or self._round_measured < self._warm_after):
            return 0.0
        return sum(cold) / len(cold) * (SAMPLED_GROWTH - 1)

    @property
    def build_s(self) -> float:
        """Seconds a candidate's build took in the last batches (0: none built yet)."""
        return sum(self._build_s) / len(self._build_s) if self._build_s else 0.0

    @property
    def gap_s(self) -> float:
        """The scheduler's mean recent gap from a batch's results to the next search (0: none)."""
        return sum(self._gaps_s) / len(self._gaps_s) if self._gaps_s else 0.0

    @property
    def measure_s(self) -> float | None:
        """Seconds a candidate took from its search's end to its result, the last batches'."""
        measured = [(s, n) for v in self._task_measure.values() for s, n in v[-RECENT_BATCHES:]]
        count = sum(n for _, n in measured)
        return sum(s for s, _ in measured) / count if count else None

    def task_cost(self, task: str, trials_left: int) -> TaskCost:
        """What ``task``'s search has left and what its batches will cost.

        A task whose last batch came short is running dry (:func:`dry_left`).
        Its searches: its recent warm ones (the cost model predicting); else its cold
        ones at the run's :func:`growth` (from :data:`farm.tuning.eta.SAMPLED_GROWTH`
        where the warm-up is known: its cold searches only sampled). Its recent
        measurements after its first batch, else the mean of the tasks' first measurements (there a
        batch's runs hid behind the next tasks' searches, a candidate costing
        its build alone, and the last task's absorbed them all: the small CNN's
        matmul read 0.86 s a candidate, later 0.3 s). Until every task searched
        has its first batch's results, no measurement: the runs of the round
        robin are paid by its end, and a candidate costs its build and its run
        (:meth:`farm.tuning.progress.TuneProgress.set_run_s`); the mean of
        the first results in read -17% to -28% of a job's time left.
        """
        cold = self._cold_searches.get(task, [])
        search_s = recent_s(self._warm_searches.get(task, []))
        if search_s is None and cold:
            search_s = sum(cold) / len(cold) * growth(
                [(c, self._warm_searches.get(t, [])) for t, c in self._cold_searches.items()],
                SAMPLED_GROWTH if self._warm_after else FIRST_BATCH_GROWTH)
        measured = [s / n for s, n in self._task_measure.get(task, []) if n > 0]
        measure_s = later_s(measured)
        searched = self._cold_searches.keys() | self._warm_searches.keys()
        in_round_robin = any(t not in self._task_measure for t in searched)
        if measure_s is None and measured and not in_round_robin:  # each task's first batch
            firsts = [s / n for s, n in (v[0] for v in self._task_measure.values()) if n > 0]
            measure_s = sum(firsts) / len(firsts)
        in_flight = self._in_flight.get(task, (0.0, 0))[1]
        dry = dry_left(self._yields.get(task, []), self.batch_n)
        if dry is None or trials_left <= self.batch_n:  # a last short batch ends a task too
            return TaskCost(max(trials_left, 0), in_flight, search_s, measure_s)
        return TaskCost(min(max(trials_left, 0), in_flight + dry[0]), in_flight, search_s,
                        measure_s, dry[1])
