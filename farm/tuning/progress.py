"""A tuning job's counters, kept in its work folder so they add up across attempts.

The file and its form are :mod:`farm.tuning.counters`'s; :class:`TuneProgress` keeps
them as the attempt goes, and prices ``eta_s`` at each change (:mod:`farm.tuning.eta`,
:mod:`farm.tuning.tail`).

Each change is written at once (``farm.privacy.write_private``: atomic, 0600), so a
farmd or child killed with -9 loses at most the change it was making; the file
is private (0600) like the rest of the data folder. The attempt (counting
farmd's recoveries of its devices, :mod:`farm.kinds.serve_keys`) and the
tuning thread both update it, so every update holds one lock.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

from farm import logs
from farm.clock import Clock, SystemClock
from farm.privacy import write_private
from farm.tuning.batches import BatchTimes
from farm.tuning.counters import PROGRESS_FILE, TaskProgress, TuneCounters
from farm.tuning.eta import estimate_eta_s, search_left_s, seconds_per_trial
from farm.tuning.tail import Stages, TailPrice

__all__ = ["TuneProgress"]

log = logs.get_logger(__name__)


class TuneProgress:
    """The counters of one work folder, persisted on every change (thread-safe).

    Opening it starts the attempt's clock (``first_trial_s`` counts from here).

    Args:
        work_dir: the tuning work folder (created if missing).
        clock: measures this attempt's rate of measured trials for ``eta_s``.
    """

    def __init__(self, work_dir: Path, clock: Clock | None = None) -> None:
        self.path = Path(work_dir) / PROGRESS_FILE
        self._lock = threading.Lock()
        self._clock = clock or SystemClock()
        self._opened_s = self._clock.monotonic()
        self._counters = self._load()
        # This attempt's tuning: its start, the trials measured then, and
        # (seconds since its start, trials measured since) after each batch.
        self._rate_from: tuple[float, int] | None = None
        self._points: list[tuple[float, int]] = []
        self._tuning_before_s = self._counters.tuning_s
        self._budget_s: float | None = None
        # This attempt's batches (farm.tuning.batches), and the seconds last kept back
        # for the picks' check (:meth:`expired`) and what the whole check costs
        # (:meth:`set_check_s`; None: the reserve), for the ETA.
        self._batches = BatchTimes()
        self._reserve_s = 0.0
        self._check_s: float | None = None
        self._check_runs = 0
        self._check_builds = 0
        # The stage the job is in, and what follows the check, priced (farm.tuning.tail).
        self._stages = Stages()

    @property
    def counters(self) -> TuneCounters:
        """The counters now."""
        with self._lock:
            return self._counters

    def add(self, *, attempts: int = 0, rounds: int = 0, batches: int = 0) -> TuneCounters:
        """Add to the counters and persist them; return the new counters."""
        with self._lock:
            c = self._counters
            return self._store(replace(c, attempts=c.attempts + attempts, rounds=c.rounds + rounds,
                                       batches=c.batches + batches))

    def add_relaunch(self, serial: str) -> None:
        """Record that ``serial``'s app was relaunched."""
        with self._lock:
            c = self._counters
            self._store(replace(c, app_relaunches=(*c.app_relaunches, serial)))

    def set_phase(self, phase: str) -> None:
        """Say what the attempt does now, e.g. ``"extracting tasks"``; the ETA as of now."""
        with self._lock:
            counters = replace(self._counters, phase=phase)
            self._store(replace(counters, eta_s=self._eta_s(counters, self._clock.monotonic())))

    def set_model_tasks(self, count: int) -> None:
        """How many tasks the model has, of which :meth:`set_tasks` lists those tuned."""
        with self._lock:
            self._store(replace(self._counters, model_tasks=count))

    def finish(self, phase: str) -> None:
        """The job's result is made: the last ``phase`` (``"done: ..."``), nothing left."""
        with self._lock:
            self._store(replace(self._counters, phase=phase, eta_s=0.0))

    def set_tail(self, tail: TailPrice) -> None:
        """What the job does after the check until its result (none: a helper, a GEMM)."""
        with self._lock:
            self._stages.tail = tail

    def set_run_s(self, run_s: float, builders: int = 1) -> None:
        """This attempt's seconds per candidate's run on a phone, and its builder's processes.

        Args:
            run_s: seconds a run costs beyond its timed repeats (a session and an
                upload: :func:`farm.tuning.rate.run_overhead_s`), over the phones.
            builders: the builder's processes (a candidate's build in one process
                takes this many times a batch's build seconds per candidate).
        """
        with self._lock:
            self._stages.run_s = max(0.0, run_s)
            self._stages.builders = max(1, builders)

    def set_rate(self, trials_per_phone_hour: float | None,
                 limit_per_phone_hour: float | None) -> None:
        """Record this attempt's throughput and its measurement-bound limit."""
        with self._lock:
            self._store(replace(self._counters, trials_per_phone_hour=trials_per_phone_hour,
                                limit_per_phone_hour=limit_per_phone_hour))

    def set_tasks(self, tasks: list[TaskProgress], budget_s: float | None = None) -> None:
        """Start this attempt's tuning of ``tasks``: replace the task list, restart the rate.

        Args:
            tasks: the tasks with their trials asked and measured so far.
            budget_s: tuning seconds allowed over all attempts; None: no limit.
        """
        with self._lock:
            now = self._clock.monotonic()
            self._rate_from = (now, sum(min(t.trials_measured, t.trials_asked) for t in tasks))
            self._points = [(0.0, 0)]
            self._budget_s = budget_s
            counters = replace(self._counters, tasks=tuple(tasks), phase="tuning",
                               first_trial_s=None, trials_per_phone_hour=None,
                               limit_per_phone_hour=None)
            self._store(replace(counters, eta_s=self._eta_s(counters, now)))

    #: Whether this attempt makes the tuned build once its tasks are tuned; a
    #: helper attempt of a job (farm.tuning.work_progress.TaskWorkProgress) does not.
    builds = True

    def tasks_to_tune(self, names: list[str]) -> list[str]:
        """Of the :meth:`set_tasks` tasks ``names``, those this attempt tunes: all of them.

        A progress that shares the job's tasks with other attempts on other
        hosts (:class:`farm.tuning.work_progress.TaskWorkProgress`) answers those it holds.
        """
        return list(names)

    def take_over(self) -> list[str]:
        """Once this attempt's tasks are tuned: the tasks it must tune next (none here).

        A progress that shares the job's tasks waits there for the other
        attempts' tasks and answers those whose holder stopped.
        """
        return []

    def tuning_s(self) -> float:
        """Seconds spent tuning over all attempts, this one's so far included."""
        with self._lock:
            return self._tuning_s(self._clock.monotonic())

    def start_round(self, warm_after: int | None) -> None:
        """A MetaSchedule round starts; its cost model predicts after ``warm_after`` results.

        Searches cost more once it does (:meth:`BatchTimes.start_round`).
        """
        with self._lock:
            self._batches.start_round(warm_after)

    def batch_sent(self, task: str) -> None:
        """A batch of ``task`` starts: its search begins (:meth:`BatchTimes.sent`)."""
        with self._lock:
            self._batches.sent(task, self._clock.monotonic())

    def batch_searched(self, task: str, candidates: int = 0) -> None:
        """The search for ``task``'s batch has ended: ``candidates`` go to be built and run.

        The ETA is priced again here and at each build's end, not only at a
        batch's results: the round robin searches and builds every task once
        before its first results, 40 s of a 275 s job on the small CNN that
        showed no ETA.
        """
        with self._lock:
            now = self._clock.monotonic()
            self._batches.searched(task, candidates, now)
            self._store(replace(self._counters, eta_s=self._eta_s(self._counters, now)))

    def batch_built(self) -> None:
        """The batch last searched is built (:meth:`BatchTimes.built`); the ETA again."""
        with self._lock:
            now = self._clock.monotonic()
            self._batches.built(now)
            self._store(replace(self._counters, eta_s=self._eta_s(self._counters, now)))

    def batch_joined(self, task: str) -> None:
        """The results of ``task``'s batch in flight are in (:meth:`BatchTimes.joined`)."""
        with self._lock:
            self._batches.joined(task, self._clock.monotonic())

    def set_check_s(self, check_s: float, runs: int = 0, builds: int = 0) -> None:
        """What the picks' check after the search costs (all its rounds), for the ETA.

        The ETA takes the more of ``check_s`` and ``builds`` at this attempt's
        seconds per candidate's build plus ``runs`` at its seconds per measured
        trial less its build (each run of the check is a candidate's session,
        upload and run):
        priced from the fastest build wave and the logged sessions, a small
        CNN's check was priced 6.6 s and took 20.3 s; by its runs alone, 14.3 s
        for 26 s (its 8 builds took 9.3 s).

        Args:
            check_s: seconds (:meth:`farm.tuning.check_cost.CheckPrice.cost_s`).
            runs: the check's runs, all rounds (0: none known).
            builds: the candidates it builds (each pick and default once).
        """
        with self._lock:
            self._check_s = max(0.0, check_s)
            self._check_runs = max(0, runs)
            self._check_builds = max(0, builds)

    @property
    def candidates_sent(self) -> int:
        """Candidates this attempt's searches sent to be built and run."""
        with self._lock:
            return self._batches.candidates_sent

    @property
    def last_batch_s(self) -> float | None:
        """Seconds a batch takes now: the longest of this attempt's last 4; None before one.

        Each from its search's start to its results (:meth:`batch_sent`,
        :meth:`batch_joined`): MetaSchedule's task scheduler searches for one
        task while another's batch runs, so the time between two batches'
        ends can be a fraction of a batch. The longest of the last few,
        since the search slows as the records grow and as the host is loaded.
        """
        with self._lock:
            return self._batches.last_batch_s

    def started_before(self, seconds: float) -> None:
        """Count this attempt from ``seconds`` before opening (its start in the queue).

        An attempt starts when the queue hands it its devices; its process, the
        devices' gates and the key's serving come before this progress is
        opened, and a time budget counts them (``tuning_s``, ``first_trial_s``).
        Call it once, before :meth:`set_tasks`.
        """
        with self._lock:
            self._opened_s -= max(0.0, seconds)

    def tail_s(self) -> float:
        """Seconds what follows the picks' check takes, priced now (:meth:`set_tail`; 0: none).

        The tuned build (every kernel of the model, not only the tuned tasks':
        the build links them all) and each phone's timing of both builds.
        """
        with self._lock:
            return self._tail_s(self._counters, self._clock.monotonic())

    def _tail_s(self, counters: TuneCounters, now: float) -> float:
        kernels = max(len(counters.tasks), counters.model_tasks or 0)
        return self._stages.left_s(now, kernels, self._batches.build_s, self._batches.measure_s)

    def budget_left_s(self) -> float | None:
        """Seconds left of the :meth:`set_tasks` budget (negative: overrun); None: no budget."""
        if self._budget_s is None:
            return None
        return self._budget_s - self.tuning_s()

    def expired(self, reserve_s: float = 0.0) -> bool:
        """Whether no further batch fits the time budget given to :meth:`set_tasks`.

        A batch is sent only while more time is left than the last batch took
        plus ``reserve_s`` (kept for the picks' check) and what follows the check
        (:meth:`tail_s`: the tuned build and its timing), so the job ends within
        its budget and not one batch past it.

        Args:
            reserve_s: seconds kept back for the picks' check.
        """
        self._reserve_s = reserve_s
        left_s = self.budget_left_s()
        return left_s is not None and left_s <= (self.last_batch_s or 0.0) + reserve_s + (
            self.tail_s())

    def evolution_fits(self) -> bool:
        """Whether an evolutionary search still fits the time budget (True: no budget).

        As :meth:`expired`, with the last reserve it was given, but the next
        batch priced with the round's first evolution (:attr:`BatchTimes.evolution_s`).
        """
        left_s = self.budget_left_s()
        with self._lock:
            evolution_s = self._batches.evolution_s
        return left_s is None or evolution_s <= 0 or left_s > (
            (self.last_batch_s or 0.0) + evolution_s + self._reserve_s + self.tail_s())

    def update_task(self, name: str, trials_measured: int, best_s: float) -> None:
        """Record a task's measured trials and best run time (inf: none), and the new ETA."""
        with self._lock:
            now = self._clock.monotonic()
            c = self._counters
            tasks = tuple(
                replace(t, trials_measured=trials_measured,
                        best_s=best_s if 0 < best_s < float("inf") else None)
                if t.name == name else t for t in c.tasks)
            updated = replace(c, tasks=tasks)
            if self._rate_from is not None:
                done = updated.trials_measured - self._rate_from[1]
                if done > self._points[-1][1]:
                    self._points.append((now - self._rate_from[0], done))
                if done > 0 and updated.first_trial_s is None:
                    updated = replace(updated, first_trial_s=now - self._opened_s)
            updated = replace(updated, tuning_s=self._tuning_s(now))
            self._store(replace(updated, eta_s=self._eta_s(updated, now)))

    def _tuning_s(self, now: float) -> float:
        return self._tuning_before_s + now - self._opened_s

    def enter_stage(self, stage: str) -> None:
        """The job goes on to ``stage``; the ETA priced again from it.

        Args:
            stage: one of :data:`farm.tuning.tail.Stages.STAGES`: ``"search"``
                (at the start, again when an attempt takes over another's
                tasks), ``"check"`` (the search has ended), ``"build"`` or
                ``"timing"``, entered again at the end of each timing run.
        """
        with self._lock:
            now = self._clock.monotonic()
            self._stages.enter(stage, now)
            self._store(replace(self._counters, eta_s=self._eta_s(self._counters, now)))

    def _check_s_now(self) -> float:
        """The picks' check: its price, or its builds and runs at this attempt's seconds.

        A run of the check costs what a measured candidate costs less its
        build (:attr:`BatchTimes.measure_s` counts both); its builds are
        priced apart. Priced at a whole candidate each, a 300-trial run's
        24 runs and 8 builds were priced 16 s and took 10 s.
        """
        if self._check_s is None:
            return self._reserve_s
        build_s = self._batches.build_s
        run_s = max(0.0, (self._batches.measure_s or 0.0) - build_s)
        return max(self._check_s, self._check_builds * build_s + self._check_runs * run_s)

    def _eta_s(self, counters: TuneCounters, now: float) -> float | None:
        if self._rate_from is None:
            return None
        costs = [self._batches.task_cost(t.name, t.trials_asked - t.trials_measured)
                 for t in counters.tasks]
        stages = self._stages
        tail_s = self._tail_s(counters, now)
        if stages.stage in ("build", "timing"):
            return tail_s
        check_s = self._check_s_now()
        if stages.stage == "check":
            return max(0.0, check_s - stages.since_s(now)) + tail_s
        left_s = None if self._budget_s is None else self._budget_s - self._tuning_s(now)
        trials_left = counters.trials_asked - counters.trials_measured
        default_s = seconds_per_trial(self._points)  # the default schedules' rate at first
        # Before a batch's results, a candidate costs its build and its run (the default
        # schedules' rate is that of single builds in a cold builder: 1.3 s a trial against
        # 0.4 s later on the small CNN); unknown before a batch was built.
        first_s = self._batches.build_s + stages.run_s if self._batches.build_s > 0 else None
        search_s = estimate_eta_s(
            search_left_s(costs, self._batches.batch_n, first_s, gap_s=self._batches.gap_s),
            left_s, check_s=check_s, batch_s=self._batches.last_batch_s,
            at_least_s=max(trials_left, 0) * (default_s or 0.0))
        return None if search_s is None else search_s + tail_s

    def _store(self, counters: TuneCounters) -> TuneCounters:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_private(self.path, json.dumps(counters.to_dict()))
        self._counters = counters
        return counters

    def _load(self) -> TuneCounters:
        try:
            return TuneCounters.from_dict(json.loads(self.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return TuneCounters()
        except (OSError, ValueError) as exc:
            # A torn or foreign file must not fail the job: the trials themselves
            # are in MetaSchedule's database, only these counters restart.
            log.warning("tuning_progress_unreadable", path=str(self.path), reason=str(exc))
            return TuneCounters()
