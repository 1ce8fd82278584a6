"""What the picks' check costs, priced from this attempt's own measurements.

After the search, :func:`farm.tuning.verify.verify_picks` builds each
task's pick and default schedule once (one call of the tuning run's builder)
and runs both ``rounds`` times on the job's phones. A run there is one
candidate of MetaSchedule's ``RPCRunner``: a session of its own (tracker,
thread pool), the upload and load of its ``.so``, then ``repeat`` timed
repeats of ``number`` calls each, at least ``min_repeat_ms`` long. So a round
of the check costs, per task, the two schedules' timed runs (their records'
run times: :func:`farm.tuning.rate.trial_busy_s`) and twice the per-run
overhead measured in this attempt (the sessions' and uploads' seconds logged
by :class:`farm.tuning.rate.TimedSession` and
:class:`farm.tuning.rate.TimedUpload`), spread over the runner's workers;
the builds cost one build wave per ``builder_workers`` candidates, timed on
the tuning run's own builds.

Pricing the check per whole trial of the last batch (its search and build
included) kept back 3-10x too much: ``--for 240`` runs of the small CNN
stopped 62 s and 103 s before their budget (docs/benchmarks.md's history, issue 21).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from farm.jobs.params import TimingParams
from farm.tuning.rate import trial_busy_s

__all__ = ["CheckPrice", "round_s"]


def round_s(pairs: Mapping[int, tuple[list[float], list[float]]], timing: TimingParams,
            overhead_s: float, runners: int) -> float:
    """Seconds one round of the check takes: each pick and default run once.

    Args:
        pairs: per task (workload index), the run times (seconds per repeat) of
            its default schedule's and of its best record's measurement.
        timing: how each run is timed (the tuning's ``timing``).
        overhead_s: seconds a run costs beyond its timed repeats (session and upload).
        runners: the runner's workers (phones) the runs are spread over.

    >>> round_s({0: ([0.01], [0.005])}, TimingParams(number=2, repeat=1, min_repeat_ms=0),
    ...         1.0, 1)
    2.03
    """
    busy_s = sum(trial_busy_s(default, timing) + trial_busy_s(pick, timing) + 2 * overhead_s
                 for default, pick in pairs.values())
    return busy_s / max(runners, 1)


@dataclass(frozen=True)
class CheckPrice:
    """The check's price: its builds once, then its rounds.

    Attributes:
        build_s: seconds to build every pick and default once.
        round_s: seconds per round (:func:`round_s`).
        runs: runs per round (each pick and default once).
    """

    build_s: float
    round_s: float
    runs: int = 0

    @classmethod
    def of(cls, pairs: Mapping[int, tuple[list[float], list[float]]], timing: TimingParams,
           overhead_s: float, runners: int, build_wave_s: float | None,
           builders: int) -> CheckPrice:
        """Price the check of ``pairs`` (see :func:`round_s`).

        Args:
            pairs: as :func:`round_s` takes them; empty: nothing to check (0 s).
            timing: how each run is timed.
            overhead_s: seconds a run costs beyond its timed repeats.
            runners: the runner's workers.
            build_wave_s: seconds one build wave took (``builders`` candidates
                at once); None: none timed yet (0 s).
            builders: the builder's processes.

        >>> CheckPrice.of({0: ([0.01], [0.005]), 1: ([0.01], [0.005])},
        ...               TimingParams(number=2, repeat=1, min_repeat_ms=0), 1.0, 2, 3.0, 2)
        CheckPrice(build_s=6.0, round_s=2.03, runs=4)
        """
        if not pairs:
            return cls(0.0, 0.0)
        waves = math.ceil(2 * len(pairs) / max(builders, 1))
        return cls(waves * (build_wave_s or 0.0), round_s(pairs, timing, overhead_s, runners),
                   2 * len(pairs))

    def cost_s(self, rounds: int) -> float:
        """Seconds the check takes in ``rounds`` rounds (0: none, 0 s).

        >>> CheckPrice(4.0, 2.5).cost_s(2), CheckPrice(4.0, 2.5).cost_s(0)
        (9.0, 0.0)
        """
        return self.build_s + rounds * self.round_s if rounds > 0 else 0.0

    def rounds_in(self, left_s: float | None, rounds: int, fewest: int) -> int:
        """The rounds (at most ``rounds``) ``left_s`` holds; 0 where not even ``fewest`` fit.

        A search that overran the time kept for the check (a batch in flight
        ran past it) leaves the picks unchecked rather than the job past its
        budget: they keep their default schedule and the result counts them.

        Args:
            left_s: seconds left for the check (negative: overrun); None: no
                budget (``rounds``).
            rounds: the rounds asked.
            fewest: the fewest worth running.

        >>> p = CheckPrice(4.0, 2.5)
        >>> p.rounds_in(None, 3, 2), p.rounds_in(20.0, 3, 2), p.rounds_in(10.0, 3, 2)
        (3, 3, 2)
        >>> p.rounds_in(8.0, 3, 2), p.rounds_in(0.0, 3, 2), p.rounds_in(-50.0, 3, 2)
        (0, 0, 0)
        """
        if left_s is None:
            return rounds
        if left_s <= 0:
            return 0
        fits = rounds if self.round_s <= 0 else int((left_s - self.build_s) // self.round_s)
        fits = min(rounds, fits)
        return fits if fits >= min(fewest, rounds) else 0
