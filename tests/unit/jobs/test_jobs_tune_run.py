"""How much of a model tuning's time budget the picks' check gets (farm.jobs.tune_run)."""

from __future__ import annotations

from farm.jobs.tune_run import MIN_CHECK_ROUNDS, check_reserve_s, check_rounds


class TestCheckBudget:
    def test_the_reserve_is_the_check_at_the_last_batchs_cost_per_trial(self) -> None:
        """3 tasks, a pick and a default each, 2 rounds, at 2 s a trial (8 s for 4): 24 s."""
        assert check_reserve_s(3, 2, 8.0, 4) == 24.0
        assert check_reserve_s(3, 2, None, 4) == 0.0

    def test_the_check_runs_the_rounds_the_budget_left_holds(self) -> None:
        """All rounds without a budget or with time to spare; fewer when less is left; none
        below the fewest that judge a spread, or once the budget is spent."""
        assert check_rounds(None, 3, 3, 8.0, 4) == 3
        assert check_rounds(100.0, 3, 3, 8.0, 4) == 3  # 12 s a round
        assert check_rounds(30.0, 3, 3, 8.0, 4) == MIN_CHECK_ROUNDS == 2
        assert check_rounds(20.0, 3, 3, 8.0, 4) == 0
        assert check_rounds(0.0, 3, 3, 8.0, 4) == 0
        assert check_rounds(-5.0, 3, 3, None, 4) == 0
        assert check_rounds(1.0, 3, 3, None, 4) == 3  # no batch yet: nothing to go by
