"""farm.stats: spread of one result, verdicts between two."""

from __future__ import annotations

import numpy as np
import pytest

from farm.stats import (
    Verdict,
    compare_samples,
    least_p_value,
    robust_cv,
    samples_for_alpha,
    spread,
)


def _timings(median: float, cv: float, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1.0 + cv * rng.standard_normal(n)))


def test_spread_of_known_samples() -> None:
    s = spread([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s.n == 5
    assert s.median == 3.0
    assert s.iqr == 2.0
    assert s.cv == pytest.approx(np.std([1, 2, 3, 4, 5], ddof=1) / 3.0)
    assert s.ci_low <= 3.0 <= s.ci_high
    assert s.ci_low < s.ci_high


def test_spread_of_one_sample_is_a_point() -> None:
    s = spread([0.25])
    assert (s.median, s.iqr, s.cv, s.ci_low, s.ci_high) == (0.25, 0.0, 0.0, 0.25, 0.25)


def test_noisy_is_judged_on_cv() -> None:
    assert spread(_timings(1.0, 0.10, 50, 1)).noisy(0.05)
    assert not spread(_timings(1.0, 0.01, 50, 1)).noisy(0.05)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")]])
def test_spread_refuses_bad_samples(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="samples"):
        spread(bad)


def test_ten_percent_slower_is_flagged() -> None:
    a = _timings(1.0, 0.02, 30, 1)
    b = _timings(1.1, 0.02, 30, 2)
    c = compare_samples(a, b)
    assert c.verdict is Verdict.SLOWER
    assert c.ci_low < c.ratio < c.ci_high
    assert 1.05 < c.ratio < 1.15
    assert c.p_value < 0.01
    assert compare_samples(b, a).verdict is Verdict.FASTER


def test_unchanged_runs_flag_nothing_in_19_of_20() -> None:
    flagged = sum(
        compare_samples(_timings(1.0, 0.03, 30, 2 * i), _timings(1.0, 0.03, 30, 2 * i + 1)).verdict
        is not Verdict.NO_CHANGE
        for i in range(20)
    )
    assert flagged <= 1


def test_a_significant_change_below_the_threshold_is_no_change() -> None:
    a = _timings(1.0, 0.001, 30, 1)
    b = _timings(1.02, 0.001, 30, 2)
    c = compare_samples(a, b)
    assert c.p_value < 0.01
    assert c.verdict is Verdict.NO_CHANGE


def test_compare_refuses_non_positive_timings() -> None:
    with pytest.raises(ValueError, match="above zero"):
        compare_samples([1.0, 0.0], [1.0, 1.0])


def test_three_against_three_is_undecided_never_no_change() -> None:
    """3 samples a side cannot reach p < 0.01, so the verdict says so rather than 'no change'."""
    for b in ([1.0, 1.01, 0.99], [1.2, 1.21, 1.19]):
        c = compare_samples([1.0, 1.01, 0.99], b)
        assert c.verdict is Verdict.UNDECIDED, c
        assert "cannot reach alpha 0.01" in c.reason and "5 a side" in c.reason


def test_least_p_value_of_the_exact_test() -> None:
    """2 / C(n_a + n_b, n_a): 0.1 for 3 against 3; 5 a side is the least that reaches 0.01."""
    assert least_p_value(3, 3) == pytest.approx(0.1)
    assert least_p_value(5, 5) == pytest.approx(2 / 252)
    assert samples_for_alpha(0.01) == 5 and samples_for_alpha(0.05) == 4


def test_a_ci_wider_than_the_threshold_is_undecided() -> None:
    """Unchanged but noisy (CV 20%, 10 a side): the CI reaches past 5%, so undecided."""
    c = compare_samples(_timings(1.0, 0.2, 10, 1), _timings(1.0, 0.2, 10, 2))
    assert c.verdict is Verdict.UNDECIDED, c
    assert "reaches past ±5%" in c.reason and "more samples" in c.reason


def test_no_change_only_when_the_ci_lies_inside_the_threshold() -> None:
    """Steady unchanged samples: 'no change', and the CI is inside 0.95..1.05."""
    c = compare_samples(_timings(1.0, 0.01, 20, 1), _timings(1.0, 0.01, 20, 2))
    assert c.verdict is Verdict.NO_CHANGE and c.ci_low >= 0.95 and c.ci_high <= 1.05, c


def test_a_five_percent_slowdown_is_slower_at_the_default_sample_count() -> None:
    """A 0.95 throttle (time ratio 1/0.95) at CV 2% and 10 samples a side is named slower."""
    slower = sum(compare_samples(_timings(1.0, 0.02, 10, 2 * i),
                                 _timings(1 / 0.95, 0.02, 10, 2 * i + 1)).verdict
                 is Verdict.SLOWER for i in range(10))
    assert slower >= 9


def test_a_change_between_noisy_samples_is_undecided() -> None:
    """15% slower but both sides spread 20% (a loaded host): undecided, naming the noise."""
    a, b = _timings(1.0, 0.2, 60, 1), _timings(1.15, 0.2, 60, 2)
    assert compare_samples(a, b).verdict is Verdict.SLOWER
    c = compare_samples(a, b, max_cv=0.05)
    assert c.verdict is Verdict.UNDECIDED and "noisy (robust CV A 16%, B 20%" in c.reason, c


def test_one_outlier_does_not_make_a_steady_phone_noisy() -> None:
    """A 1.5x hiccup in 40 steady samples: the robust CV stays near 1%, the change is named."""
    a = _timings(1.0, 0.01, 40, 1)
    a[7] *= 1.5
    assert robust_cv(a) < 0.02
    assert compare_samples(a, _timings(1 / 0.95, 0.01, 40, 2), max_cv=0.05).verdict \
        is Verdict.SLOWER
