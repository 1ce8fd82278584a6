"""The A/B rounds: calibration, order, looks, caps (scripted timers on a fake clock)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from farm.clock import FakeClock
from farm.config import AbSettings, ResultSettings
from farm.jobs.ab import AbRule, Rounds, run_rounds
from farm.sampling import SamplingRule
from farm.stats import Verdict, compare_rounds

SAMPLING = SamplingRule.of(ResultSettings())
RULE = AbRule.of(AbSettings(), ResultSettings())


class Phone:
    """Two builds on a phone whose speed drifts; every sample moves the fake clock by its time."""

    def __init__(self, clock: FakeClock, a_s: float, b_s: float, *, spread: float = 0.03,
                 drift: float = 0.0, seed: int = 0) -> None:
        self.clock = clock
        self.per_run = {"a": a_s, "b": b_s}
        self.spread = spread
        self.drift = drift  # relative slowdown per timed second
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[str, int]] = []
        self.elapsed_s = 0.0

    def timer(self, name: str) -> Callable[[int], float]:
        def time(number: int) -> float:
            self.calls.append((name, number))
            speed = 1.0 + self.drift * self.elapsed_s
            value = self.per_run[name] * speed * float(self.rng.lognormal(0.0, self.spread))
            self.elapsed_s += value * number
            self.clock.advance(value * number)
            return value
        return time


def rounds_of(phone: Phone, rule: AbRule = RULE) -> Rounds:
    return run_rounds(phone.timer("a"), phone.timer("b"), rule, SAMPLING, clock=phone.clock)


class TestRunRounds:
    def test_a_five_percent_slower_build_is_named_slower(self) -> None:
        """B at 1.05x A with a 3% spread per sample: slower, decided at a look, under the cap."""
        result = rounds_of(Phone(FakeClock(), 1e-3, 1.05e-3))
        assert result.comparison.verdict is Verdict.SLOWER
        assert result.stopped_by == "decided"
        assert result.decided_at is not None and result.decided_at >= RULE.min_rounds
        assert (result.decided_at - RULE.min_rounds) % RULE.look_every == 0
        assert result.phone_s < RULE.max_phone_s

    def test_the_same_build_is_no_change(self) -> None:
        """A against itself: no change."""
        result = rounds_of(Phone(FakeClock(), 1e-3, 1e-3))
        assert result.comparison.verdict is Verdict.NO_CHANGE

    def test_a_drifting_phone_does_not_make_a_change(self) -> None:
        """The phone slowing by 20% over the rounds (heat) is no change between equal builds."""
        result = rounds_of(Phone(FakeClock(), 1e-3, 1e-3, drift=0.05))
        assert result.comparison.verdict is Verdict.NO_CHANGE

    def test_samples_are_raised_to_the_least_sample_time(self) -> None:
        """A 1 ms kernel is timed min_sample_s / 1 ms runs a sample, the same for both builds."""
        phone = Phone(FakeClock(), 1e-3, 2e-3, spread=0.0)
        result = rounds_of(phone)
        assert result.number == math.ceil(RULE.min_sample_s / 1e-3)
        assert phone.calls[:2] == [("a", 1), ("b", 1)]
        assert {n for _, n in phone.calls[2:]} == {result.number}

    def test_abba_order(self) -> None:
        """Even rounds time A first, odd rounds B first."""
        phone = Phone(FakeClock(), 1e-3, 1e-3)
        result = rounds_of(phone)
        assert result.first[:4] == ["a", "b", "a", "b"]
        warm = 2 + 2 * result.warmup.runs
        assert [name for name, _ in phone.calls[warm:warm + 4]] == ["a", "b", "b", "a"]

    def test_a_noisy_phone_stops_at_the_phone_time_cap(self) -> None:
        """A 3% change under 60% spread cannot be decided: undecided, the cap named, time kept."""
        rule = AbRule.of(AbSettings(max_phone_s=5.0), ResultSettings())
        result = rounds_of(Phone(FakeClock(), 1e-3, 1.03e-3, spread=0.6), rule)
        assert result.comparison.verdict is Verdict.UNDECIDED
        assert result.stopped_by == "max_phone_s"
        assert "stopped at 5 s of phone time" in result.comparison.reason
        assert 5.0 <= result.phone_s < 5.0 + 2 * RULE.min_sample_s * 2
        assert result.decided_at is None

    def test_before_round_is_called_per_round(self) -> None:
        """The job's hook sees every round's index before it is timed."""
        phone = Phone(FakeClock(), 1e-3, 1e-3)
        seen: list[int] = []
        result = run_rounds(phone.timer("a"), phone.timer("b"), RULE, SAMPLING, clock=phone.clock,
                            before_round=seen.append)
        assert seen == list(range(len(result.a_s)))


class TestCompareRounds:
    def test_too_few_rounds_are_undecided(self) -> None:
        """Under the least rounds no verdict is named, whatever the ratio."""
        c = compare_rounds([1.0] * 5, [2.0] * 5)
        assert c.verdict is Verdict.UNDECIDED
        assert "needs 8" in c.reason

    def test_rounds_of_unequal_length_are_refused(self) -> None:
        """a and b must pair up."""
        with pytest.raises(ValueError, match="one length"):
            compare_rounds([1.0] * 9, [1.0] * 10)

    def test_equal_timings_are_no_change(self) -> None:
        """Every round the same: ratio 1, no change, p 1."""
        c = compare_rounds([1.0] * 10, [1.0] * 10)
        assert (c.verdict, c.ratio, c.p_value) == (Verdict.NO_CHANGE, 1.0, 1.0)

    def test_a_step_in_the_phones_speed_cancels(self) -> None:
        """The phone 10% slower from round 15 on, both builds alike: no change."""
        speed = [1.0] * 15 + [1.1] * 25
        rng = np.random.default_rng(3)
        a = [s * rng.lognormal(0, 0.02) for s in speed]
        b = [s * rng.lognormal(0, 0.02) for s in speed]
        assert compare_rounds(a, b).verdict is Verdict.NO_CHANGE

    def test_a_position_effect_cancels_in_pairs(self) -> None:
        """Whichever build runs second in a round is 6% faster: pairs of rounds see no change."""
        rng = np.random.default_rng(5)
        first = ["a" if i % 2 == 0 else "b" for i in range(40)]
        a = [float(rng.lognormal(0, 0.01)) * (1.0 if f == "a" else 0.94) for f in first]
        b = [float(rng.lognormal(0, 0.01)) * (0.94 if f == "a" else 1.0) for f in first]
        assert compare_rounds(a, b, first=first).verdict is Verdict.NO_CHANGE
        assert "20 pairs of rounds" in compare_rounds(a, b, first=first).reason
