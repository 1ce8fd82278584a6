"""The settings that judge results: sampling, spread, two results compared, A/B jobs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from farm.config.base import Frozen


class ResultSettings(Frozen):
    """How a result's spread is judged (``farm.results``), and two results compared.

    Attributes:
        max_cv: a phone's samples whose coefficient of variation (standard
            deviation over mean) is above this fraction are noisy.
        rerun_noisy: a benchmark attempt re-runs a noisy phone's measurement
            once (its samples stored with repetition 1) before it reports.
        change_threshold: the smallest relative change of a phone's median
            timing that counts as slower or faster (0.05 = 5%;
            ``farmctl compare`` and the regression watch).
        alpha: the Mann-Whitney U p-value a change must be below to count.
        min_samples: timed samples a phone's measurement takes at least (after
            warm-up; more if the spec's ``repeat`` asks). 10: twice the 5 a side
            a Mann-Whitney test needs to reach alpha 0.01 at all, so a 5% change
            at a few % CV is found (docs/benchmarks.md, bench/bench_detection.py).
        max_samples: the cap: a measurement stops here even if its median's CI
            is still wider than ``target_ci_pct``.
        min_measure_s: a measurement's samples span this long at least,
            seconds (warm-up not counted): its median then survives a burst of
            host or phone load shorter than half of it, where 10 samples of a
            fast kernel (a quarter second) would all fall in one burst. MLPerf
            Inference's LoadGen likewise asks a minimum duration besides a
            minimum count.
        target_ci_pct: sampling stops once the 95% CI of the median
            is this narrow, % of the median. 4: the ratio of two such medians
            then has a CI of about +-2.8% (sqrt 2 of each half-width), inside a
            5% threshold with room for a small drift, so "no change" can be said.
        warmup_min_s: warm-up lasts at least this long, seconds (AndroidX
            Microbenchmark warms up for at least 250 ms; farm's samples pass
            through RPC, so longer).
        warmup_max_s: warm-up stops here even if the timing is not steady, seconds.
        warmup_steady_pct: warm-up ends when the median of the last 3 samples is
            within this % of the median of the 3 before
            (:mod:`farm.sampling`).
        watch_interval_s: how often farmd's regression watch looks for newly
            finished jobs of schedules with a baseline, seconds.
        watch_lookback_s: the regression watch compares finished jobs this
            recent (seconds) that have no verdict yet.
    """

    max_cv: float = Field(0.05, gt=0, le=10)
    rerun_noisy: bool = True
    change_threshold: float = Field(0.05, gt=0, lt=1)
    alpha: float = Field(0.01, gt=0, lt=1)
    min_samples: int = Field(10, ge=2, le=10_000)
    max_samples: int = Field(60, ge=2, le=10_000)
    target_ci_pct: float = Field(4.0, gt=0, le=100)
    min_measure_s: float = Field(1.0, ge=0, le=600)
    warmup_min_s: float = Field(1.0, ge=0, le=600)
    warmup_max_s: float = Field(10.0, gt=0, le=3600)
    warmup_steady_pct: float = Field(5.0, gt=0, le=100)
    watch_interval_s: float = Field(60.0, gt=0)
    watch_lookback_s: float = Field(86400.0, gt=0)

    @model_validator(mode="after")
    def _bounds_in_order(self) -> ResultSettings:
        if self.min_samples > self.max_samples:
            raise ValueError(f"min_samples ({self.min_samples}) is above max_samples "
                             f"({self.max_samples})")
        if self.warmup_min_s > self.warmup_max_s:
            raise ValueError(f"warmup_min_s ({self.warmup_min_s}) is above warmup_max_s "
                             f"({self.warmup_max_s})")
        return self


class AbSettings(Frozen):
    """How an A/B job (``farmctl enqueue ab``) times two builds on one phone, and when it stops.

    Each round times one sample of each build in one session (:mod:`farm.jobs.ab`);
    the verdict is judged on the rounds' ratios (:func:`farm.stats.compare_rounds`)
    against ``[results] change_threshold`` and ``alpha``.

    Attributes:
        min_rounds: rounds before the first look at the verdict.
        look_every: rounds between looks after the first; each look is a
            chance to decide wrongly, so looks are spaced.
        max_rounds: rounds at most per phone.
        max_phone_s: phone time at most per phone, seconds: the timed
            samples' wall time, warm-up included (thermal waits not). 120: a
            1 ms model at the spread of a virtual phone sharing a 2-core host
            decides in under 30 s (docs/benchmarks.md, ``bench/bench_ab.py``).
        min_sample_s: one sample of a build runs its kernel this long at
            least, seconds (the runs per sample are raised to reach it): many
            periods of a phone's DVFS and of a virtual phone's throttle.
        confidence: the level of the ratio's interval; 99% because the
            rounds are looked at again and again (:func:`farm.stats.compare_rounds`).
        order: ``abba``: A first in even rounds, B first in odd ones;
            ``random``: a seeded coin per round.
        snapshot_every_s: the phone's readings are taken (and the thermal
            gate passed) before the first round and then this often, seconds.
    """

    min_rounds: int = Field(20, ge=8, le=100_000)
    look_every: int = Field(10, ge=1, le=100_000)
    max_rounds: int = Field(5000, ge=8, le=1_000_000)
    max_phone_s: float = Field(120.0, gt=0, le=86_400)
    min_sample_s: float = Field(0.025, gt=0, le=60)
    confidence: float = Field(0.99, gt=0.5, lt=1)
    order: Literal["abba", "random"] = "abba"
    snapshot_every_s: float = Field(15.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _rounds_in_order(self) -> AbSettings:
        if self.min_rounds > self.max_rounds:
            raise ValueError(f"min_rounds ({self.min_rounds}) is above max_rounds "
                             f"({self.max_rounds})")
        return self
