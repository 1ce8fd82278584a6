"""A/B: two builds of one workload timed in turns, in one session on one phone, until they decide.

Two runs of a benchmark taken minutes apart see different phones: heat,
the governor's clocks, other load on the CPU. Judged by each side's spread
(:func:`farm.stats.compare_samples`), such drift makes a real 10% slowdown
"undecided". Timed in alternating rounds in one session instead, the drift
hits both builds alike and cancels in each round's ratio, which is what
FAI-PEP, Chromium's Pinpoint and Mozilla's perf sheriffs do on shared
devices, and what Kalibera and Jones ("Rigorous Benchmarking in Reasonable
Time", ISMM 2013) give the statistics for.

:func:`run_ab` builds both on the host before a session is opened (a model
may compile for minutes), uploads and loads both in one session, checks both
against numpy or onnxruntime, and hands their timers to :func:`run_rounds`:

1. calibrate: one run of each; the runs per sample are raised so one sample
   lasts ``min_sample_s`` (the same count for both builds);
2. warm up both in turns until their timing is steady (:func:`farm.sampling.warm_up`);
3. rounds: one sample of each, A first in even rounds and B first in odd ones
   (ABBA), or by a seeded coin; after ``min_rounds`` and every
   ``look_every`` rounds the verdict is looked at
   (:func:`farm.stats.compare_rounds`) and the rounds stop once it is
   decided, or at ``max_rounds`` or ``max_phone_s`` of phone time (undecided,
   with the cap named).

Everything here works on plain parameters; the ``ab`` job kind
(:mod:`farm.kinds.ab`) maps its spec to them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import structlog

from farm.clock import Clock, SystemClock
from farm.jobs.params import DeviceKind, GemmParams, ModelParams, TimingParams, TrackerParams
from farm.sampling import SamplingRule, WarmUp, warm_up
from farm.stats import Comparison, Verdict, compare_rounds

if TYPE_CHECKING:
    from farm.config import AbSettings, ResultSettings
    from farm.jobs.cache import CompileCache
    from farm.jobs.session import ThreadPoolApplied

__all__ = ["AbResult", "AbRule", "Build", "Rounds", "run_ab", "run_rounds"]

log = structlog.get_logger(__name__)

#: A build of either side: a GEMM or an ONNX model (with or without tuning records).
Build = GemmParams | ModelParams
#: Times one sample of ``number`` runs, returns mean seconds per run.
Timer = Callable[[int], float]


@dataclass(frozen=True)
class AbRule:
    """When the rounds stop and how a verdict is named; :meth:`of` the config.

    Attributes:
        threshold: the smallest relative change that counts (0.05 = 5%).
        alpha: the signed-rank p-value a change must be below.
        confidence: the ratio interval's level.
        min_rounds: rounds before the first look.
        look_every: rounds between looks.
        max_rounds: rounds at most.
        max_phone_s: phone time at most, seconds.
        min_sample_s: one sample's duration at least, seconds.
        order: ``"abba"`` or ``"random"``.
        seed: the coin's seed for ``random``.
    """

    threshold: float
    alpha: float
    confidence: float
    min_rounds: int
    look_every: int
    max_rounds: int
    max_phone_s: float
    min_sample_s: float
    order: str = "abba"
    seed: int = 0

    @classmethod
    def of(cls, ab: AbSettings, results: ResultSettings) -> AbRule:
        """The rule ``[ab]`` and ``[results]`` set."""
        return cls(results.change_threshold, results.alpha, ab.confidence, ab.min_rounds,
                   ab.look_every, ab.max_rounds, ab.max_phone_s, ab.min_sample_s, ab.order)

    def first(self, index: int, coin: random.Random) -> str:
        """Which build round ``index`` times first: ``"a"`` or ``"b"``."""
        if self.order == "random":
            return "a" if coin.random() < 0.5 else "b"
        return "a" if index % 2 == 0 else "b"


@dataclass(frozen=True)
class Rounds:
    """The rounds of one phone and what they decided.

    Attributes:
        a_s, b_s: each round's sample of A and of B, mean seconds per run.
        first: per round, the build timed first (``"a"`` or ``"b"``).
        comparison: the verdict on all rounds (B against A).
        number: runs per sample.
        phone_s: wall time of every timed sample, warm-up and calibration
            included, seconds.
        stopped_by: ``"decided"``, ``"max_phone_s"`` or ``"max_rounds"``.
        looks: how often the verdict was looked at.
        decided_at: the round count at which it was decided; None if not.
        warmup: the warm-up of both builds in turns.
    """

    a_s: list[float]
    b_s: list[float]
    first: list[str]
    comparison: Comparison
    number: int
    phone_s: float
    stopped_by: str
    looks: int
    decided_at: int | None
    warmup: WarmUp


def run_rounds(time_a: Timer, time_b: Timer, rule: AbRule, sampling: SamplingRule, *,
               clock: Clock | None = None,
               before_round: Callable[[int], None] | None = None) -> Rounds:
    """Calibrate, warm up, then time A and B in rounds until the verdict is decided or a cap.

    Args:
        time_a: times one sample of A (see :data:`Timer`).
        time_b: times one sample of B.
        rule: the looks and caps.
        sampling: the warm-up bounds (``[results]``).
        clock: the phone-time clock; the system's by default.
        before_round: called with each round's index before it is timed (the
            job takes the phone's readings there); its time is not phone time.

    Raises:
        What the timers and ``before_round`` raise.
    """
    clock = clock or SystemClock()
    phone_s = 0.0

    def timed(timer: Timer, number: int) -> float:
        nonlocal phone_s
        start = clock.monotonic()
        try:
            return timer(number)
        finally:
            phone_s += clock.monotonic() - start

    once = min(timed(time_a, 1), timed(time_b, 1))
    number = max(1, math.ceil(rule.min_sample_s / once)) if once > 0 else 1
    warmup = warm_up(lambda: timed(time_a, number) + timed(time_b, number), sampling, clock)
    coin = random.Random(rule.seed)  # noqa: S311 - an order, not a secret
    a_s: list[float] = []
    b_s: list[float] = []
    first: list[str] = []
    looks = 0
    while True:
        index = len(a_s)
        if before_round is not None:
            before_round(index)
        order = rule.first(index, coin)
        if order == "a":
            a, b = timed(time_a, number), timed(time_b, number)
        else:
            b, a = timed(time_b, number), timed(time_a, number)
        a_s.append(a)
        b_s.append(b)
        first.append(order)
        count = index + 1
        look = count >= rule.min_rounds and (count - rule.min_rounds) % rule.look_every == 0
        capped = ("max_rounds" if count >= rule.max_rounds
                  else "max_phone_s" if phone_s >= rule.max_phone_s else None)
        if not (look or capped):
            continue
        looks += 1
        comparison = compare_rounds(a_s, b_s, first=first, threshold=rule.threshold,
                                    alpha=rule.alpha, confidence=rule.confidence)
        if comparison.verdict is not Verdict.UNDECIDED:
            return Rounds(a_s, b_s, first, comparison, number, phone_s, "decided", looks, count,
                          warmup)
        if capped:
            cap = (f"{rule.max_rounds} rounds" if capped == "max_rounds"
                   else f"{rule.max_phone_s:g} s of phone time")
            comparison = replace(comparison, reason=f"{comparison.reason}; stopped at {cap}")
            return Rounds(a_s, b_s, first, comparison, number, phone_s, capped, looks, None,
                          warmup)


@dataclass(frozen=True)
class AbResult:
    """One phone's A/B.

    Attributes:
        rounds: the rounds and the verdict.
        library_a, library_b: the cached ``.so`` of each build.
        max_abs_err_a, max_abs_err_b: each build's largest difference from
            numpy (GEMM) or onnxruntime (model).
        threads: thread pool settings in force (None off the CPU).
        target: the compile target dict.
    """

    rounds: Rounds
    library_a: str
    library_b: str
    max_abs_err_a: float
    max_abs_err_b: float
    threads: ThreadPoolApplied | None
    target: dict[str, Any]

    @property
    def same_library(self) -> bool:
        """Both sides ran the very same library: any difference is the phone's noise."""
        return self.library_a == self.library_b


def _gemm_timer(loaded: Any) -> Timer:
    def time(number: int) -> float:
        return loaded.time(TimingParams(number=number, repeat=1, min_repeat_ms=0))[0]
    return time


def _model_timer(loaded: Any) -> Timer:
    def time(number: int) -> float:
        return loaded.time(number, 1)[0]
    return time


def run_ab(a: Build, b: Build, target: dict[str, Any], tracker: TrackerParams,
           cache: CompileCache, rule: AbRule, sampling: SamplingRule, *,
           before_round: Callable[[int], None] | None = None) -> AbResult:
    """Build both, load both in one session on the phone of ``tracker.key``, time them in rounds.

    Args:
        a: the baseline build.
        b: the build compared with it (both GEMMs or both models).
        target: the phone's target dict.
        tracker: where the session comes from.
        cache: the compile cache.
        rule: the rounds' looks and caps.
        sampling: the warm-up bounds.
        before_round: as :func:`run_rounds`.

    Raises:
        SpecError: one side is a GEMM and the other a model.
        SpecError, ToolMissing, CompileError: a build cannot be made (never retried).
        CompileError: a build's output differs from numpy or onnxruntime.
        SessionError, TrackerUnreachable: the session failed (retried elsewhere).
    """
    from farm.errors import SpecError
    from farm.jobs.gemm import build_gemm, load_gemm
    from farm.jobs.model import load_prepared, prepare_model
    from farm.jobs.session import apply_thread_pool, open_session

    if isinstance(a, GemmParams) and isinstance(b, GemmParams):
        libraries = (build_gemm(a, target, cache), build_gemm(b, target, cache))
        remote = open_session(tracker)
        threads = (apply_thread_pool(remote, a.threads, tracker)
                   if a.device is DeviceKind.CPU else None)
        first = load_gemm(a, target, tracker, cache, remote=remote)
        # One library loaded twice in a session takes the RPC server down: the same build
        # is loaded once and timed as both sides.
        gemms = [first, first if libraries[0] == libraries[1] else
                 load_gemm(b, target, tracker, cache, remote=remote)]
        timers = [_gemm_timer(g) for g in gemms]
        errors = [g.max_abs_err for g in gemms]
    elif isinstance(a, ModelParams) and isinstance(b, ModelParams):
        prepared = [prepare_model(a, target, cache), prepare_model(b, target, cache)]
        libraries = (prepared[0].library, prepared[1].library)
        remote = open_session(tracker)
        threads = (apply_thread_pool(remote, a.threads, tracker)
                   if a.device is DeviceKind.CPU else None)
        first_model = load_prepared(prepared[0], a, target, remote, tracker)
        models = [first_model, first_model if libraries[0] == libraries[1] else
                  load_prepared(prepared[1], b, target, remote, tracker)]
        timers = [_model_timer(m) for m in models]
        errors = [m.max_abs_err for m in models]
    else:
        raise SpecError("params.b", "A and B must both be GEMMs or both be models")
    rounds = run_rounds(timers[0], timers[1], rule, sampling, before_round=before_round)
    c = rounds.comparison
    log.info("ab_measured", serial=tracker.serial, verdict=c.verdict.value, ratio=c.ratio,
             ci_low=c.ci_low, ci_high=c.ci_high, rounds=len(rounds.a_s),
             phone_s=round(rounds.phone_s, 2), stopped_by=rounds.stopped_by)
    return AbResult(rounds, str(libraries[0]), str(libraries[1]), errors[0], errors[1], threads,
                    target)
