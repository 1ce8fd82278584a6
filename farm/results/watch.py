"""The regression watch: each finished run of a schedule with a ``baseline``, judged per phone.

A ``[[schedules]]`` entry may name a baseline (:class:`farm.config.Schedule`):

- ``"previous"``: for each phone the job measured, the newest earlier
  succeeded job of the same spec that has samples of that phone. A schedule
  enqueues the same spec each time, so that is its previous run on the phone
  (a run enqueued by hand with the very same spec counts too: same workload,
  same phone).
- a job id: that job, for every run.

farmd calls :meth:`RegressionWatch.check` periodically (``[results]
watch_interval_s``). It looks at succeeded jobs of the watched specs that
finished in the last ``watch_lookback_s`` and have no verdict yet, compares
each phone with :func:`farm.stats.compare_samples` (same threshold
and alpha as ``farmctl compare``), writes one ``regressions`` row per phone
(once per job, :meth:`~farm.queue.regressions.RegressionOps.record_regressions`).

Two runs taken hours apart see the phone's drift, so a phone whose verdict is
anything but "no change" (slower, faster, or undecided: too few samples, or a
CI too wide to rule a change in or out) is written ``suspected`` and
``regression_suspected`` is logged; an A/B job of the baseline's build
against the new one on that phone then settles it
(:mod:`farm.results.confirm`): slower (``regression_found`` and
``farm_regressions_total{serial,workload}``, only after that commit), faster,
undecided, or ``phone`` when the builds run alike and the phone's speed
moved. A job no A/B job can time (a GEMM tuning) keeps the runs' verdict.
"no change" in the table always means the CI lay inside the threshold.
``farmctl results --regressions`` lists them with the confirming job.

A job that cannot be judged (no earlier run, no phone in common, a baseline
job that is missing or unfinished) is logged once and skipped until farmd
restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from farm.clock import Clock
from farm.config import Settings
from farm.errors import UserFault
from farm.metrics import FarmMetrics
from farm.queue.records import JobView
from farm.queue.regressions import SUSPECTED, RegressionView
from farm.queue.store import Store
from farm.results.rows import sample_rows
from farm.results.sides import Side, by_phone, load_side, side_of
from farm.schedules import validate_schedules
from farm.stats import Verdict, compare_samples

__all__ = ["PREVIOUS_LOOKBACK_JOBS", "RegressionWatch", "Watched"]

log = structlog.get_logger(__name__)

#: ``"previous"`` looks for a phone's earlier run among this many newest
#: earlier jobs of the kind (a schedule's runs are among the newest).
PREVIOUS_LOOKBACK_JOBS = 50


@dataclass(frozen=True)
class Watched:
    """A schedule's spec as the queue stores it, and its baseline (``"previous"`` or a job id)."""

    name: str
    spec: Mapping[str, Any]
    baseline: str | int


class RegressionWatch:
    """Judges finished runs of schedules that name a baseline; see the module doc.

    Args:
        store: the queue.
        settings: ``schedules`` (which to watch) and ``results`` (threshold,
            alpha, lookback).
        clock: the time of the verdicts and of the lookback.
        metrics: where slower phones are counted; None counts nothing.

    Raises:
        ConfigError: a schedule's spec is invalid (as :func:`validate_schedules`).
    """

    def __init__(self, store: Store, settings: Settings, clock: Clock,
                 metrics: FarmMetrics | None = None) -> None:
        from farm.results.confirm import Confirmations

        self.confirmations = Confirmations(store, settings.data_dir, clock, metrics)
        self.store = store
        self.results = settings.results
        self.clock = clock
        self.metrics = metrics
        specs = validate_schedules(settings.schedules)
        self.watched = [
            Watched(schedule.name or str(index), spec, schedule.baseline)
            for index, (schedule, spec) in enumerate(zip(settings.schedules, specs, strict=True))
            if schedule.baseline is not None
        ]
        self._skipped: set[int] = set()  # jobs that could not be judged; logged once

    def check(self) -> list[RegressionView]:
        """Judge every finished, unjudged run of a watched schedule, settle suspected ones.

        Returns:
            The rows written (``no change``, or ``suspected`` with an A/B job
            enqueued to settle it) and the rows settled by an ended A/B job.
        """
        if not self.watched:
            return []
        now = self.clock.now()
        since = now - timedelta(seconds=self.results.watch_lookback_s)
        kind_specs = [(str(w.spec["kind"]), dict(w.spec)) for w in self.watched]
        written: list[RegressionView] = []
        for job in self.store.unjudged_jobs(kind_specs, since):
            if job.id in self._skipped:
                continue
            watched = next(w for w in self.watched if dict(w.spec) == job.spec)
            written += self._judge(job, watched, now)
        return written + self.confirmations.check()

    def _judge(self, job: JobView, watched: Watched, now: datetime) -> list[RegressionView]:
        if watched.baseline == job.id:
            return self._skip(job, watched, "it is the schedule's baseline")
        try:
            new = side_of(self.store, f"job {job.id}", [job])
            baselines = self._baselines(job, watched, new)
        except UserFault as exc:
            return self._skip(job, watched, str(exc))
        rows = []
        reasons = {}
        confirmable = self.confirmations.can_confirm(job)
        for serial, (baseline_job_id, baseline_timings) in sorted(baselines.items()):
            try:
                c = compare_samples(baseline_timings, new.timings[serial],
                                    threshold=self.results.change_threshold,
                                    alpha=self.results.alpha, max_cv=self.results.max_cv)
            except ValueError as exc:  # a timing of 0 or less: not a measurement
                return self._skip(job, watched, f"{serial}: {exc}")
            verdict = c.verdict.value
            if c.verdict is not Verdict.NO_CHANGE and confirmable:
                verdict = SUSPECTED  # an A/B job of the two builds settles it
            rows.append(RegressionView(0, job.id, baseline_job_id, serial, c.ratio, c.ci_low,
                                       c.ci_high, c.p_value, verdict, now))
            reasons[serial] = f"{c.verdict.value}: {c.reason}"
        if not rows:
            return self._skip(job, watched, "no phone of it has a baseline run")
        if not self.store.record_regressions(job.id, rows):
            return []  # another farmd judged it first
        for row in rows:
            fields = {"job_id": job.id, "baseline_job_id": row.baseline_job_id,
                      "serial": row.serial, "workload": new.workload, "schedule": watched.name,
                      "ratio": row.ratio, "reason": reasons[row.serial]}
            if row.verdict == SUSPECTED:
                log.warning("regression_suspected", **fields)
            elif row.verdict == Verdict.SLOWER.value:  # a job no A/B job can time
                log.warning("regression_found", **fields)
                if self.metrics is not None:
                    self.metrics.count_regression(row.serial, new.workload)
            elif row.verdict == Verdict.UNDECIDED.value:
                log.warning("regression_undecided", **fields)
        log.info("regression_checked", job_id=job.id, schedule=watched.name,
                 phones=len(rows), slower=sum(r.verdict == Verdict.SLOWER.value for r in rows))
        return rows

    def _baselines(self, job: JobView, watched: Watched,
                   new: Side) -> dict[str, tuple[int, tuple[float, ...]]]:
        """serial -> (baseline job id, its timings) for each phone of ``new`` that has one.

        Raises:
            UserFault: a fixed baseline job is missing, unfinished or of another workload.
        """
        serials = set(new.timings)
        if not isinstance(watched.baseline, int):
            earlier = self.store.earlier_jobs(job, PREVIOUS_LOOKBACK_JOBS)
            phones = by_phone(sample_rows(self.store, job_ids=[j.id for j in earlier]))
            order = {j.id: i for i, j in enumerate(earlier)}  # newest first
            found = {}
            for serial in serials & set(phones):
                newest = min(phones[serial], key=order.__getitem__)
                found[serial] = (newest, tuple(phones[serial][newest]))
            return found
        base = load_side(self.store, str(watched.baseline))
        if base.workload != new.workload:
            raise UserFault(f"baseline job {watched.baseline} measures {base.workload!r}, "
                            f"not {new.workload!r}")
        return {s: (watched.baseline, base.timings[s]) for s in serials & set(base.timings)}

    def _skip(self, job: JobView, watched: Watched, reason: str) -> list[RegressionView]:
        self._skipped.add(job.id)
        log.info("regression_not_checked", job_id=job.id, schedule=watched.name, reason=reason)
        return []
