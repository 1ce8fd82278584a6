"""How much of a model tuning's time budget the picks' check gets (farm.tuning.check_cost,
farm.tuning.run.check_price)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from farm.clock import FakeClock
from farm.jobs.params import TimingParams, TuneParams
from farm.jobs.tuning_db import RECORDS_FILE, default_and_best_s
from farm.tuning.check_cost import CheckPrice
from farm.tuning.counters import TaskProgress
from farm.tuning.progress import TuneProgress
from farm.tuning.rate import MEASURE_UNTIL_FILE, UPLOADS_FILE, read_measure_until, run_overhead_s
from farm.tuning.rounds import tune_in_rounds
from farm.tuning.run import MIN_CHECK_ROUNDS, _expired, check_price
from farm.tuning.tail import TailPrice

TIMING = TimingParams(number=3, repeat=3, min_repeat_ms=20)


def _records(work_dir: Path, records: list[tuple[int, list[float]]]) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / RECORDS_FILE).write_text("".join(
        json.dumps([index, [[], secs, {}, []]]) + "\n" for index, secs in records))


class TestCheckPrice:
    def test_a_round_is_the_picks_and_defaults_timed_runs_and_their_overhead(self) -> None:
        """2 tasks on 1 phone: per run 3 repeats of at least 20 ms (3 x 10 ms = 30 ms for the
        defaults, the 20 ms floor for the 1 ms picks) plus 0.5 s of session and upload."""
        pairs = {0: ([0.01] * 3, [0.001] * 3), 1: ([0.01] * 3, [0.001] * 3)}
        price = CheckPrice.of(pairs, TIMING, 0.5, runners=1, build_wave_s=4.0, builders=2)
        assert price.round_s == pytest.approx(2 * (0.09 + 0.06 + 1.0))
        assert price.build_s == 8.0  # 4 candidates on 2 processes: 2 waves
        assert price.cost_s(2) == pytest.approx(8.0 + 4 * 1.15)
        halved = CheckPrice.of(pairs, TIMING, 0.5, runners=2, build_wave_s=4.0, builders=2)
        assert halved.round_s == pytest.approx(price.round_s / 2)  # two phones share the runs
        assert CheckPrice.of({}, TIMING, 0.5, 1, 4.0, 2).cost_s(3) == 0.0  # no pick to check

    def test_the_check_runs_the_rounds_the_budget_left_holds(self) -> None:
        """All rounds without a budget or with time to spare; fewer when less is left; none
        below the fewest that judge a spread, or once the budget is spent."""
        price = CheckPrice(build_s=6.0, round_s=12.0)
        assert price.rounds_in(None, 3, MIN_CHECK_ROUNDS) == 3
        assert price.rounds_in(100.0, 3, MIN_CHECK_ROUNDS) == 3
        assert price.rounds_in(30.0, 3, MIN_CHECK_ROUNDS) == MIN_CHECK_ROUNDS == 2
        assert price.rounds_in(29.0, 3, MIN_CHECK_ROUNDS) == 0  # the builds come first
        assert price.rounds_in(0.0, 3, MIN_CHECK_ROUNDS) == 0
        assert CheckPrice(0.0, 0.0).rounds_in(-5.0, 3, MIN_CHECK_ROUNDS) == 0
        assert CheckPrice(0.0, 0.0).rounds_in(1.0, 3, MIN_CHECK_ROUNDS) == 3  # nothing to price

    def test_a_search_that_overran_leaves_the_picks_unchecked(self) -> None:
        """A search whose batch in flight ran past the time kept for the check gets no check,
        however cheap (the 2.9 s check of MobileNetV3-small's 2 picks once ran 50 s past its
        300 s budget): the job ends within its budget and the picks keep their default."""
        price = CheckPrice(build_s=1.4, round_s=0.8)
        assert price.rounds_in(-50.0, 3, MIN_CHECK_ROUNDS) == 0
        assert price.rounds_in(2.0, 3, MIN_CHECK_ROUNDS) == 0  # 1.4 s + 2 x 0.8 s: 3 s
        assert price.rounds_in(3.0, 3, MIN_CHECK_ROUNDS) == MIN_CHECK_ROUNDS


class TestPricedFromTheWorkFolder:
    def test_tasks_whose_best_is_their_default_cost_nothing(self, tmp_path: Path) -> None:
        """Task 0's best is a searched candidate (checked: its first record is the default),
        task 1's best is its first record (not checked), failed runs are not records."""
        _records(tmp_path, [(0, [0.004]), (1, [0.001]), (0, [0.002]), (1, [0.003]),
                            (0, [1e10])])
        assert default_and_best_s(tmp_path) == {0: ([0.004], [0.002])}

    def test_overhead_is_the_logged_sessions_and_uploads(self, tmp_path: Path) -> None:
        (tmp_path / UPLOADS_FILE).write_text(
            '{"session_s": 0.2}\n{"upload_s": 0.5}\n{"session_s": 0.4}\n{"upload_s": 0.7}\n{"up')
        assert run_overhead_s(tmp_path) == pytest.approx(0.3 + 0.6)
        assert run_overhead_s(tmp_path / "none") == 0.0

    def test_check_price_of_a_run(self, tmp_path: Path) -> None:
        """The price tune_all keeps back: the old one (a whole trial of the last batch per
        measurement: 2 tasks x 2 schedules x 2 rounds x 20 s / 4 trials = 40 s) was 10x this."""
        _records(tmp_path, [(0, [0.01] * 3), (0, [0.005] * 3), (7, [0.01] * 3),
                            (7, [0.005] * 3)])
        (tmp_path / UPLOADS_FILE).write_text('{"session_s": 0.25}\n{"upload_s": 0.25}\n')
        params = TuneParams(gemm=None, trials=4, work_dir=tmp_path, timing=TIMING, runner_workers=1,
                            builder_workers=4)

        class Builder:
            wave_s = 1.5

        planned = [type("P", (), {"index": 0})(), type("P", (), {"index": 7})()]
        price = check_price(planned, params, Builder())  # type: ignore[arg-type]
        assert price.build_s == 1.5  # 4 candidates, one wave
        assert price.round_s == pytest.approx(2 * (0.09 + 0.06 + 1.0))
        assert price.cost_s(2) == pytest.approx(1.5 + 4.6)
        assert check_price(planned[:1], params, None).round_s == pytest.approx(1.15)


class TestRounds:
    def test_rounds_make_up_for_failed_trials_but_stop_once_the_tasks_ran_dry(
            self, tmp_path: Path) -> None:
        """A round whose trials failed is followed by another (up to max_rounds); a round whose
        searches sent nothing (every candidate measured before: the small CNN's max pool at
        89 of 250 trials) is the last, where 3 more rounds of empty searches took 28 s."""
        params = TuneParams(gemm=None, trials=10, work_dir=tmp_path, max_rounds=4)
        progress = TuneProgress(tmp_path)
        sent = iter([True, None, False, True])
        rounds = tune_in_rounds(params, 10, lambda: 0, lambda _left: next(sent), progress)
        assert rounds == 3
        assert progress.counters.rounds == 3
        assert tune_in_rounds(params, 10, lambda: 0, lambda _left: None, progress) == 4


class TestDeadline:
    @staticmethod
    def _progress(work_dir: Path, clock: FakeClock) -> TuneProgress:
        """100 s of budget; a tail of 2 timing runs of 10 samples at 0.5 s and 0.5 s more
        (10 s each) and 4 s to hand the key back: 24 s."""
        progress = TuneProgress(work_dir, clock)
        progress.set_tail(TailPrice(builds=1, runs=2, samples=10, sample_least_s=0.5,
                                    release_s=4.0))
        progress.set_run_s(0.5)
        progress.set_tasks([TaskProgress("conv", 0, 100, 0)], budget_s=100.0)
        return progress

    def test_the_batch_in_flight_is_cut_where_the_check_and_tail_begin(
            self, tmp_path: Path) -> None:
        """The runner measures until the budget's end less the check's 6 s and the tail's
        24 s: at 10 s into a 100 s budget, 60 s from now."""
        clock = FakeClock()
        progress = self._progress(tmp_path, clock)
        clock.advance(10)
        params = TuneParams(gemm=None, trials=100, work_dir=tmp_path, for_s=100.0)
        before = time.time()
        assert not _expired(params, progress, 6.0)
        until = read_measure_until(str(tmp_path / MEASURE_UNTIL_FILE))
        assert until is not None and before + 60.0 <= until <= time.time() + 60.0

    def test_a_first_batch_is_priced_as_the_default_schedules(self, tmp_path: Path) -> None:
        """Before any batch is timed, one costs what the default schedules' measurement took
        (18 s here): with 45 s left, 6 s of check and 24 s of tail, no batch is sent, where
        priced 0 s one was, and its job ended 11 s past a 60 s budget."""
        clock = FakeClock()
        progress = self._progress(tmp_path, clock)
        clock.advance(55)
        params = TuneParams(gemm=None, trials=100, work_dir=tmp_path, for_s=100.0)
        assert not _expired(params, progress, 6.0)
        assert _expired(params, progress, 6.0, untimed_batch_s=18.0)
        assert not _expired(params, progress, 6.0, untimed_batch_s=14.0)
        progress.batch_sent("conv")
        clock.advance(1)
        progress.batch_joined("conv")  # once a batch is timed, its time prices the next
        assert not _expired(params, progress, 6.0, untimed_batch_s=18.0)


class TestCutCandidates:
    def test_a_candidate_the_budget_cut_is_not_recorded(self) -> None:
        """Of a batch measured, failed on its own and cut at the budget's end, MetaSchedule's
        AddToDatabase gets the first two: the cut one was not measured (a resumed job
        measures it), so it is neither a failed trial nor a record of the fleet's."""
        import tvm
        from tvm import te
        from tvm.s_tir import meta_schedule as ms

        from farm.tuning.rate import BUDGET_SPENT
        from farm.tuning.rounds import _measured_only

        class AddToDatabase:
            args: tuple[object, ...] = ()

            def apply(self, *args: object) -> None:
                self.args = args

        x = te.placeholder((4,), name="x")
        func = te.create_prim_func([x, te.compute((4,), lambda i: x[i] + 1.0, name="y")])
        candidates = [ms.MeasureCandidate(tvm.s_tir.Schedule(func),
                                          ms.arg_info.ArgInfo.from_prim_func(func))] * 3
        runs = [ms.runner.RunnerResult([0.1], None),
                ms.runner.RunnerResult(None, "RPCRunner: An exception occurred\n" + BUDGET_SPENT),
                ms.runner.RunnerResult(None, "RPCRunner: Timeout, killed after 10 seconds")]
        inner = AddToDatabase()
        _measured_only(inner).apply(ms.task_scheduler.RoundRobin(), 0, candidates,
                                    [ms.builder.BuilderResult(None, None)] * 3, runs)
        _, task_id, kept, built, ran = inner.args
        assert task_id == 0 and len(kept) == len(built) == 2  # type: ignore[arg-type]
        assert [r.error_msg for r in ran] == [None, runs[2].error_msg]  # type: ignore[attr-defined]
