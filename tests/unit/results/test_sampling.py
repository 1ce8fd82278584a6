"""farm.sampling: warm-up until steady, then samples until the median is known."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from farm.clock import FakeClock
from farm.config import ResultSettings
from farm.sampling import SamplingRule, interleaved_rounds, take_samples, warm_up

RULE = SamplingRule.of(ResultSettings())


def _phone(values: Iterator[float], clock: FakeClock) -> Callable[[int], list[float]]:
    """A timer that returns the next recorded timings and moves the clock by 10 runs each."""
    def time_batch(repeat: int) -> list[float]:
        out = [next(values) for _ in range(repeat)]
        clock.advance(10 * sum(out))
        return out
    return time_batch


def _steady(median_s: float, cv: float, seed: int) -> Iterator[float]:
    rng = np.random.default_rng(seed)
    while True:
        yield float(median_s * rng.lognormal(0.0, cv))


def test_a_cold_start_is_warmed_away() -> None:
    """A freshly provisioned phone 2x slow for its first 0.8 s: warm-up outlasts it, then stops.

    A slow phase longer than ``warmup_min_s`` that is itself steady cannot be
    told from the phone's speed by any steadiness rule; the minimum duration
    is what covers it (as in AndroidX Microbenchmark).
    """
    clock = FakeClock()

    def cold_then_steady() -> Iterator[float]:
        yield from (0.02 * (1 + 0.01 * (i % 3)) for i in range(4))  # 4 samples of 10 runs
        yield from _steady(0.01, 0.005, 1)

    time_batch = _phone(cold_then_steady(), clock)
    warm = warm_up(lambda: time_batch(1)[0], RULE, clock)
    assert warm.steady and 4 < warm.runs < 30, warm
    assert warm.seconds >= RULE.warmup_min_s
    assert max(time_batch(10)) < 0.0106  # what follows is the steady speed


def test_a_phone_that_never_settles_stops_at_the_bound_unsteady() -> None:
    """Timings that keep growing by 10% a sample: warm-up stops at warmup_max_s and says so."""
    clock = FakeClock()
    values = (0.001 * 1.1 ** i for i in range(10_000))
    time_batch = _phone(values, clock)
    warm = warm_up(lambda: time_batch(1)[0], RULE, clock)
    assert not warm.steady and RULE.warmup_max_s <= warm.seconds


def test_steady_samples_stop_at_the_minimum() -> None:
    """CV 0.5%, 0.1 s a sample: the minimum count and duration pin the median, and it stops."""
    clock = FakeClock()
    sampled = take_samples(_phone(_steady(0.01, 0.005, 2), clock), RULE, clock=clock)
    assert RULE.min_samples <= len(sampled.samples_s) <= RULE.min_samples * 3 // 2
    assert sampled.reached_target and sampled.seconds >= RULE.min_measure_s
    assert sampled.ci_pct <= RULE.target_ci_pct and sampled.warmup.steady


def test_noisier_samples_take_more_and_noisy_ones_stop_at_the_cap() -> None:
    """CV 5% needs more than the minimum; CV 30% never reaches the target and stops at the cap."""
    clock = FakeClock()
    some = take_samples(_phone(_steady(0.01, 0.05, 3), clock), RULE, clock=clock)
    assert RULE.min_samples < len(some.samples_s) < RULE.max_samples and some.reached_target
    noisy = take_samples(_phone(_steady(0.01, 0.3, 4), clock), RULE, clock=clock)
    assert len(noisy.samples_s) == RULE.max_samples and not noisy.reached_target


def test_the_spec_repeat_is_a_floor() -> None:
    """--samples above the cap: that many are taken, no fewer."""
    clock = FakeClock()
    sampled = take_samples(_phone(_steady(0.01, 0.005, 5), clock), RULE, at_least=100,
                           clock=clock)
    assert len(sampled.samples_s) == 100


def test_a_fast_kernel_is_sampled_for_the_minimum_duration() -> None:
    """1 ms samples: steady at once, yet sampled until min_measure_s (or the cap) has passed."""
    clock = FakeClock()
    sampled = take_samples(_phone(_steady(0.0001, 0.005, 6), clock), RULE, clock=clock)
    assert len(sampled.samples_s) == RULE.max_samples or sampled.seconds >= RULE.min_measure_s
    assert len(sampled.samples_s) > RULE.min_samples


def test_interleaved_rounds_see_a_changing_load_alike() -> None:
    """Two builds of the same 1 ms kernel on a host that slows 10% per timing: timed back to
    back their medians differ by a third; in interleaved rounds (turning order) they agree."""
    calls = [0]

    def kernel() -> list[float]:
        calls[0] += 1
        return [1e-3 * (1 + 0.1 * (calls[0] - 1))]

    blocks = {name: [kernel()[0] for _ in range(4)] for name in ("untuned", "tuned")}
    assert np.median(blocks["tuned"]) / np.median(blocks["untuned"]) > 1.3
    calls[0] = 0
    rounds = interleaved_rounds({"untuned": kernel, "tuned": kernel}, 4)
    assert [len(v) for v in rounds.values()] == [4, 4]
    assert np.median(rounds["tuned"]) == np.median(rounds["untuned"])


def test_a_rule_split_over_rounds_takes_about_one_measurement() -> None:
    """Split over 3 rounds, the default rule's samples and least durations add up to about
    one measurement's (each round at least 2 samples); its bounds stay as they are."""
    per_round = RULE.per_round(3)
    assert 3 * per_round.min_samples >= RULE.min_samples
    assert per_round.min_samples < RULE.min_samples and per_round.min_samples >= 2
    assert 3 * per_round.max_samples >= RULE.max_samples > per_round.max_samples
    assert 3 * per_round.min_measure_s == pytest.approx(RULE.min_measure_s)
    assert 3 * per_round.warmup_min_s == pytest.approx(RULE.warmup_min_s)
    assert per_round.warmup_max_s == RULE.warmup_max_s
    assert SamplingRule(2, 3, 4.0, 0, 0, 0.5, 5.0).per_round(3).min_samples == 2
