"""What a tune job does after its search and check, priced: the tuned build and its timing.

A model's tune job ends with its result, not with its search: after the
picks' check (:mod:`farm.tuning.check_cost`) the model is compiled with the
records (:func:`farm.tuning.result.compile_tuned`), then each phone times
the untuned and the tuned build in ``jobs.tune_timing_rounds`` interleaved
rounds (:mod:`farm.kinds.tune_model`), each run warmed up and sampled by the
``[results]`` rule (:mod:`farm.sampling`). On the small CNN and one virtual
phone these took 30 s and 50 s after a 245 s and a 27 s search: 11% and 65%
of the job (docs/benchmarks.md's history, issue 21), which an ETA of the search alone
left out.

Priced from this attempt's measurements: the build as each task's kernel
built one after another (a build process's seconds per candidate), each
timing run as its samples (the most a round takes, and the fewest of the
warm-up), each lasting ``min_repeat_ms`` and a call on the phone more (priced
at a candidate's session and upload in the tuning). The build is priced at
the least (the model has kernels besides the tuned tasks, and the build links
them: 8.4 s against 1.4 s priced on the small CNN), and the warm-up lasts until
the timing is steady (up to ``warmup_max_s``, a loaded host's runs took 12 s
against 8.4 s priced, an idle one's 4 s to 6 s); once the timing runs,
:class:`Stages` prices the runs left at the runs done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # farm.sampling loads numpy and scipy: not on farmctl's listing path
    from farm.sampling import SamplingRule

__all__ = ["Stages", "TailPrice"]


@dataclass(frozen=True)
class TailPrice:
    """The tuned build and the timing runs that follow the search, counted.

    Attributes:
        builds: models compiled after the check (the tuned build: 1; 0: none).
        runs: timing runs (each phone, each round, the untuned and the tuned build).
        samples: calls on the phone a timing run makes: its samples at most and
            the fewest of its warm-up (two windows of :data:`farm.sampling.WARMUP_WINDOW`).
        sample_least_s: seconds a sample lasts at the least (``time_evaluator``'s
            ``min_repeat_ms``: the small CNN's 0.05 ms runs are repeated for 100 ms).
        release_s: seconds the devices take to serve their own keys again after the
            tuning, priced as serving the job's key took at its start (6 s of a
            54 s job on one virtual phone).
    """

    builds: int = 0
    runs: int = 0
    samples: int = 0
    sample_least_s: float = 0.0
    release_s: float = 0.0

    @classmethod
    def of(cls, phones: int, rounds: int, rule: SamplingRule, min_repeat_s: float) -> TailPrice:
        """The tail of a model's tune job on ``phones`` phones, ``rounds`` timing rounds each.

        Args:
            phones: the job's phones (each times both builds, one after another).
            rounds: ``jobs.tune_timing_rounds``.
            rule: the ``[results]`` sampling rule.
            min_repeat_s: the least seconds a timed repeat (a sample) lasts.

        >>> from farm.sampling import SamplingRule
        >>> TailPrice.of(1, 2, SamplingRule(10, 60, 4.0, 1.0, 1.0, 10.0, 5.0), 0.1)
        TailPrice(builds=1, runs=4, samples=36, sample_least_s=0.1)
        """
        from farm.sampling import WARMUP_WINDOW

        per_round = rule.per_round(rounds)
        return cls(1, max(phones, 0) * 2 * max(rounds, 1),
                   per_round.max_samples + 2 * WARMUP_WINDOW, max(0.0, min_repeat_s))

    def build_s(self, kernels: int, build_one_s: float) -> float:
        """Seconds the builds take: ``kernels`` built one after another, ``build_one_s`` each.

        >>> TailPrice(1, 4, 36).build_s(4, 0.5)
        2.0
        """
        return self.builds * kernels * build_one_s

    def run_s(self, sample_s: float) -> float:
        """Seconds a timing run takes: its samples, each its least and ``sample_s`` more.

        >>> TailPrice(1, 4, 36, 0.1).run_s(0.15)
        9.0
        """
        return self.samples * (self.sample_least_s + sample_s)


class Stages:
    """Where a tune job is after its search, priced to its result; not thread-safe.

    The stages (:data:`STAGES`) follow each other; the timing's is entered
    again at the end of each run, so that the runs left are priced at the
    runs done (a run's samples on a loaded phone cost what they cost).

    Attributes:
        stage: the stage now.
        tail: what follows the check, counted (none: a helper attempt, a GEMM).
        run_s: seconds a candidate's run on a phone costs beyond its timed
            repeats (a session and an upload), over the phones; 0: none timed.
        builders: the builder's processes.
    """

    #: In order: the search, the picks' check, the tuned build, the timing on each phone.
    STAGES = ("search", "check", "build", "timing")

    def __init__(self) -> None:
        self.stage = "search"
        self.tail = TailPrice()
        self.run_s = 0.0
        self.builders = 1
        self._at = 0.0
        self._runs_s: list[float] = []

    def enter(self, stage: str, now: float) -> None:
        """Go on to ``stage`` at ``now`` (monotonic seconds); in the timing, a run has ended."""
        if stage not in self.STAGES:
            raise ValueError(f"stage {stage!r} is none of {self.STAGES}")
        if stage == "timing" and self.stage == "timing":
            self._runs_s.append(now - self._at)
        self.stage, self._at = stage, now

    def since_s(self, now: float) -> float:
        """Seconds since the stage now began (the timing's: since its last run's end)."""
        return now - self._at

    def left_s(self, now: float, kernels: int, build_s: float, sample_s: float | None) -> float:
        """Seconds from the check's end (or from now, in the stages after) to the job's result.

        Args:
            now: monotonic seconds.
            kernels: the kernels the tuned build compiles (its tasks).
            build_s: seconds a candidate's build takes in a batch (over the builders).
            sample_s: seconds a call on the phone takes where no run was timed
                (:attr:`run_s` first); None: unknown (0 s).

        >>> stages = Stages()
        >>> stages.tail, stages.builders = TailPrice(1, 4, 36), 2
        >>> stages.left_s(0.0, 2, 0.25, 0.25)  # 2 kernels at 0.5 s, 4 runs at 9 s
        37.0
        >>> stages.enter("timing", 0.0); stages.enter("timing", 12.0)
        >>> stages.left_s(15.0, 2, 0.25, 0.25)  # 3 runs left at 12 s, 3 s into one
        33.0
        """
        if self._runs_s:
            run_s = sum(self._runs_s) / len(self._runs_s)
        else:
            run_s = self.tail.run_s(self.run_s or sample_s or 0.0)
        runs_left = max(0, self.tail.runs - len(self._runs_s))
        if self.stage == "timing":
            if not runs_left:
                return 0.0
            return max(0.0, run_s - self.since_s(now)) + (runs_left - 1) * run_s
        tail_build_s = self.tail.build_s(kernels, build_s * self.builders)
        if self.stage == "build":
            tail_build_s = max(0.0, tail_build_s - self.since_s(now))
        return tail_build_s + self.tail.release_s + runs_left * run_s
