"""The throttle knob seen through GEMM timings, and compare_samples judging them.

One virtual phone's real RPC process (:func:`farm.virtual.testing.rpc_app`,
quiet where the host allows), one session and one loaded GEMM for the whole
module. Each try times the kernel alternately at the baseline's speed and at the
speed under test, one sample at a time, so both sets of samples see the same
host: a 2-core host shared with other work changes speed by 40% for seconds
at a time, more than the 10% the knob must show.

:class:`TestDefaultsDecide` counts the issue's rates at the statistics layer:
the phone's timings at the gemm spec's default timing are recorded once
(again, up to :data:`RECORDINGS` times, while a burst of host work spreads them),
at full speed, 0.95 and 0.9 in turn sample by sample (so all three see the
same host), and each try is a whole default measurement (warm-up, then
:func:`farm.sampling.take_samples` to the ``[results]`` rule) drawn
from those recordings, judged with the default threshold and alpha. Whole
measurements taken one after the other on this shared host see its other
work shift the speed by 3-5% for seconds in about one pair of ten, which is
the host's and not the phone's; ``bench/bench_detection.py`` measures that
way and reports the rates it gets.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from stored_results import NOW, finished_job

from farm.clock import FakeClock
from farm.config import ResultSettings, Schedule, Settings
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import LoadedGemm, load_gemm
from farm.jobs.params import (
    DeviceFacts,
    GemmParams,
    ThreadPoolParams,
    TimingParams,
    TrackerParams,
)
from farm.jobs.targets import target_for
from farm.kinds.gemm import GemmSpec
from farm.queue import Store
from farm.results.watch import RegressionWatch
from farm.sampling import SamplingRule, take_samples
from farm.stats import Comparison, Verdict, compare_samples, robust_cv
from farm.virtual.testing import RpcApp, rpc_app

#: Samples per side of one comparison.
SAMPLES = 25
#: Runs averaged into one sample: ~25 ms of a ~1 ms GEMM 256, five throttle periods.
NUMBER = 25
ONE_SAMPLE = TimingParams(number=NUMBER, repeat=1, min_repeat_ms=0)


@dataclass
class Bench:
    """The phone and its loaded GEMM."""

    app: RpcApp
    gemm: LoadedGemm

    def compare(self, baseline_speed: float, speed: float) -> Comparison:
        """Alternate samples at the two speeds; compare the second set with the first."""
        a: list[float] = []
        b: list[float] = []
        try:
            for _ in range(SAMPLES):
                self.app.set_speed(baseline_speed)
                a += self.gemm.time(ONE_SAMPLE)
                self.app.set_speed(speed)
                b += self.gemm.time(ONE_SAMPLE)
        finally:
            self.app.set_speed(1.0)
        return compare_samples(a, b)


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    """GEMM 256 (one thread) loaded on one virtual phone's RPC process."""
    root = tmp_path_factory.mktemp("throttle")
    with rpc_app(root, key="throttle", quiet=True) as app:
        tracker = TrackerParams(app.tracker_host, app.tracker_port, app.key,
                                session_timeout_s=900, serial="virtual", connect_timeout_s=60)
        params = GemmParams(n=256, bn=32, timing=ONE_SAMPLE,
                            threads=ThreadPoolParams(affinity_mode=0, num_threads=1))
        target = target_for(DeviceFacts(abi="x86_64", host_runtime=True, num_cores=2))
        yield Bench(app, load_gemm(params, target, tracker, CompileCache(root / "cache")))


class TestThrottleKnob:
    def test_half_speed_roughly_doubles_the_kernel_time(self, bench: Bench) -> None:
        """At factor 0.5 a GEMM takes about twice as long as at full speed."""
        comparison = bench.compare(1.0, 0.5)
        assert 1.6 < comparison.ratio < 2.5, comparison
        assert comparison.verdict is Verdict.SLOWER

    def test_factor_1_restores_the_speed(self, bench: Bench) -> None:
        """After 0.5, factor 1 gives the full speed again."""
        bench.app.set_speed(0.5)
        bench.app.set_speed(1.0)
        comparison = bench.compare(1.0, 1.0)
        assert 0.93 < comparison.ratio < 1.07, comparison


class TestCompareSeesTheKnob:
    def test_ten_percent_slowdown_is_flagged_in_4_of_5_tries(self, bench: Bench) -> None:
        """With the knob at 0.9, compare_samples says SLOWER in at least 4 tries out of 5.

        Not 5 of 5: on the shared 2-core CI host one try's 25 samples a side were
        once swamped by other processes (a ratio under the 5 % threshold); the
        median ratio over the tries still has to be the knob's 1/0.9.
        """
        comparisons = [bench.compare(1.0, 0.9) for _ in range(5)]
        slower = [c for c in comparisons if c.verdict is Verdict.SLOWER]
        assert len(slower) >= 4, comparisons
        assert 1.05 < statistics.median(c.ratio for c in comparisons) < 1.2, comparisons

    def test_unchanged_runs_flag_nothing_in_19_of_20_tries(self, bench: Bench) -> None:
        """Two sets of samples at the same speed are called slower or faster in at most 1 of 20.

        UNDECIDED is no false alarm: it says the CI (25 samples on a loaded host)
        was too wide to show the ratio inside the threshold, and exits apart.
        """
        comparisons = [bench.compare(1.0, 1.0) for _ in range(20)]
        flagged = [c for c in comparisons if c.verdict in (Verdict.SLOWER, Verdict.FASTER)]
        assert len(flagged) <= 1, flagged



DEFAULTS = ResultSettings()
_SPEC = GemmSpec(n=256)
#: A gemm spec's default timing (``--number``, ``--samples``, ``--min-repeat-ms``).
DEFAULT_TIMING = TimingParams(_SPEC.number, _SPEC.repeat, _SPEC.min_repeat_ms)
#: Samples recorded at each speed.
RECORDED = 150
SPEEDS = (1.0, 0.95, 0.9)
#: Recordings the module may take until one is quiet (each ~3-5 s).
RECORDINGS = 3
#: A recording is quiet when every speed's robust CV is within this. Each try
#: judges 60 draws a side with ``max_cv``, and a side drawn from a recording
#: at robust CV c spreads past max_cv 5% in 0.02% of draws at c = 3%, 1.5% at
#: 3.5%, 7% at 4% and 24% at 4.5% (simulated, t-distributed recordings): at
#: 3% a miss of the 9 of 10 is the statistics', not the noise check's (two
#: runs of three at load 15-18 failed it with recordings admitted at 5%).
QUIET_CV = 0.6 * DEFAULTS.max_cv


def _spreads(recording: dict[float, np.ndarray]) -> str:
    return ", ".join(f"{speed:g}: {robust_cv(values):.1%}" for speed, values in recording.items())


def _record(bench: Bench) -> dict[float, np.ndarray]:
    """speed -> RECORDED samples (s) at the default timing, the speeds taken in turn."""
    one = replace(DEFAULT_TIMING, repeat=1)
    samples: dict[float, list[float]] = {speed: [] for speed in SPEEDS}
    try:
        for _ in range(RECORDED):
            for speed in SPEEDS:
                bench.app.set_speed(speed)
                samples[speed] += bench.gemm.time(one)
    finally:
        bench.app.set_speed(1.0)
    return {speed: np.asarray(values) for speed, values in samples.items()}


def _quiet(recording: dict[float, np.ndarray], speeds: tuple[float, ...]) -> bool:
    return max(robust_cv(recording[speed]) for speed in speeds) <= QUIET_CV


@dataclass
class Recorded:
    """The recordings taken: the last is quiet at every speed, or there were RECORDINGS."""

    recordings: list[dict[float, np.ndarray]]

    @property
    def samples(self) -> dict[float, np.ndarray]:
        """The last recording, quiet or not (for the tests that judge any spread)."""
        return self.recordings[-1]

    def quiet_samples(self, *speeds: float) -> dict[float, np.ndarray] | None:
        """The first recording quiet at ``speeds``, or None where none was."""
        for recording in self.recordings:
            if _quiet(recording, speeds):
                return recording
        return None

    def shown(self) -> str:
        """Each recording's robust CV by speed, and the host's load: for a failure's message."""
        return (f"load {os.getloadavg()[0]:.1f}; robust CV by speed: "
                + "; ".join(_spreads(recording) for recording in self.recordings))


@pytest.fixture(scope="module")
def recorded(bench: Bench) -> Recorded:
    """Up to RECORDINGS recordings, until one is quiet at every speed (QUIET_CV).

    A burst of the host's other work (another test file, a compile) spreads a
    recording for the seconds it lasts; the next one, a few seconds on, is
    mostly past it (measured on the 2-core VM at load 12-14, with 5 people's
    work on it: 4 of 10 recordings had a speed over 5%, in runs of 1-2).
    """
    recordings = [_record(bench)]
    while not _quiet(recordings[-1], SPEEDS) and len(recordings) < RECORDINGS:
        recordings.append(_record(bench))
    return Recorded(recordings)


def _measure(pool: np.ndarray, seed: int) -> list[float]:
    """One default measurement (warm-up, then samples to the rule) drawn from ``pool``."""
    rng = np.random.default_rng(seed)
    clock = FakeClock()

    def time_batch(repeat: int) -> list[float]:
        drawn = [float(v) for v in rng.choice(pool, repeat)]
        clock.advance(DEFAULT_TIMING.number * sum(drawn))
        return drawn

    return take_samples(time_batch, SamplingRule.of(DEFAULTS), at_least=DEFAULT_TIMING.repeat,
                        clock=clock).samples_s


def _judge(a: list[float], b: list[float]) -> Comparison:
    return compare_samples(a, b, threshold=DEFAULTS.change_threshold, alpha=DEFAULTS.alpha,
                           max_cv=DEFAULTS.max_cv)


class TestDefaultsDecide:
    def test_a_five_percent_slowdown_is_slower_in_9_of_10(self, recorded: Recorded) -> None:
        """A measurement at 0.95 against one at full speed: SLOWER in at least 9 of 10 tries.

        On a quiet phone (the issue's words). Where the host spread every
        recording wider than :data:`QUIET_CV`, the defaults' promise is the
        other one: each try is SLOWER or undecided, never "no change" nor
        "faster".
        """
        quiet = recorded.quiet_samples(1.0, 0.95)
        pool = quiet if quiet is not None else recorded.samples
        tries = [_judge(_measure(pool[1.0], 2 * i), _measure(pool[0.95], 2 * i + 1))
                 for i in range(10)]
        if quiet is not None:
            assert sum(c.verdict is Verdict.SLOWER for c in tries) >= 9, (recorded.shown(), tries)
        else:
            wrong = [c for c in tries if c.verdict in (Verdict.NO_CHANGE, Verdict.FASTER)]
            assert not wrong, (recorded.shown(), wrong)

    def test_unchanged_runs_are_slower_in_at_most_1_of_20(self, recorded: Recorded) -> None:
        """Two measurements at full speed: SLOWER in at most 1 of 20 tries, FASTER too."""
        full = recorded.samples[1.0]
        tries = [_judge(_measure(full, 100 + 2 * i), _measure(full, 101 + 2 * i))
                 for i in range(20)]
        assert sum(c.verdict is Verdict.SLOWER for c in tries) <= 1, tries
        assert sum(c.verdict is Verdict.FASTER for c in tries) <= 1, tries

    def test_the_defaults_take_enough_samples_to_reach_alpha(self, recorded: Recorded) -> None:
        """Every default measurement has at least min_samples, and no more than the cap."""
        counts = [len(_measure(recorded.samples[speed], seed))
                  for seed, speed in enumerate(SPEEDS)]
        assert min(counts) >= DEFAULTS.min_samples and max(counts) <= DEFAULTS.max_samples

    def test_three_against_three_is_undecided(self, bench: Bench) -> None:
        """The spec's 3 samples alone, a 0.9 throttle between: undecided, never 'no change'."""
        a = bench.gemm.time(DEFAULT_TIMING)
        bench.app.set_speed(0.9)
        try:
            b = bench.gemm.time(DEFAULT_TIMING)
        finally:
            bench.app.set_speed(1.0)
        assert (len(a), len(b)) == (3, 3)
        comparison = _judge(a, b)
        assert comparison.verdict is Verdict.UNDECIDED and "cannot reach alpha" in comparison.reason

    def test_the_watch_flags_a_ten_percent_slowdown_between_two_scheduled_runs(
            self, recorded: Recorded, tmp_path: Path) -> None:
        """Two nightly runs at the defaults, the second at 0.9: the watch suspects the phone.

        Suspected, not slower: the two runs are one build, so the watch enqueues
        an A/B job of the two to tell the phone's slowdown from the build's
        (tests/unit/results/test_watch.py settles such rows).
        """
        quiet = recorded.quiet_samples(1.0, 0.9) or recorded.samples
        spec = {"kind": "gemm", "params": {"n": 64}, "devices": {"serials": ["P1"]}}
        settings = Settings(schedules=(Schedule(cron="0 1 * * *", spec=spec, name="nightly",
                                                baseline="previous"),))
        hour = timedelta(hours=1)
        with Store(f"sqlite:///{tmp_path / 'farm.db'}") as store:
            finished_job(store, "P1", _measure(quiet[1.0], 7), now=NOW)
            night2 = finished_job(store, "P1", _measure(quiet[0.9], 8), now=NOW + hour)
            rows = RegressionWatch(store, settings, FakeClock(start=NOW + 3 * hour)).check()
        assert [(r.job_id, r.verdict) for r in rows] == [(night2, "suspected")], rows
        assert 1.05 < rows[0].ratio < 1.2, rows
