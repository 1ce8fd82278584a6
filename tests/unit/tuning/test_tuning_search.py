"""How a model's tuning budget is spent: the plan of trials per task, search sizes, XGBoost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tvm

from farm.jobs.params import TimingParams
from farm.jobs.tuning_db import RECORDS_FILE
from farm.tuning.rate import UPLOADS_FILE, limit_per_phone_hour, trial_busy_s
from farm.tuning.search import (
    SEARCH_CANDIDATES,
    SEARCHES_PER_TASK,
    FarmSearch,
    SearchSettings,
    measured_traces,
    plan_trials,
    search_settings,
    trace_key,
)
from farm.tuning.space import tune_space


class TestPlan:
    def test_heavier_task_gets_more_trials(self) -> None:
        """A task with 3x the FLOPs gets about 3x the trials beyond the first batch."""
        plan, batch = plan_trials([3e6, 1e6], 100, 8)
        assert batch == 8
        assert sum(plan) == 100
        assert plan[0] > plan[1] >= 8
        assert plan == [8 + 63, 8 + 21]

    def test_every_task_gets_a_floor_of_at_most_a_quarter_of_the_budget(self) -> None:
        """A task of negligible cost still gets trials, a batch where a quarter of the budget
        holds a batch each, fewer where it does not; the rest goes by cost."""
        plan, batch = plan_trials([1e9, 1.0, 0.0], 30, 16)
        assert plan == [26, 2, 2] and batch == 16
        plan, batch = plan_trials([1e9, 1.0, 0.0], 100, 16)
        assert plan == [84, 8, 8] and batch == 16
        plan, _ = plan_trials([1e9, 1.0, 0.0], 1000, 16)
        assert plan[1:] == [16, 16]

    def test_many_tasks_leave_most_trials_to_the_costly_ones(self) -> None:
        """MobileNetV3-small's 53 tasks and 1,000 trials in batches of 32: the floors take a
        fifth of the budget (a batch of 18 each took 954 trials), the rest goes by cost: a
        task of 10x another's cost gets 10x its trials beyond the floor."""
        costs = [10.0] * 3 + [1.0] * 50
        plan, batch = plan_trials(costs, 1000, 32)
        assert sum(plan) == 1000 and batch == 32
        floor = 1000 // (4 * 53)
        assert min(plan) >= floor == 4
        assert abs((plan[0] - floor) - 10 * (plan[3] - floor)) <= 10, plan

    def test_tiny_budget_keeps_the_heaviest_tasks(self) -> None:
        """2 trials over 4 tasks: one trial each to the two heaviest, none to the rest."""
        assert plan_trials([4.0, 3.0, 2.0, 1.0], 2, 8) == ([1, 1, 0, 0], 1)

    def test_cap_per_task_and_no_cost_known(self) -> None:
        """``trials_per_task`` caps every share; tasks without FLOPs share evenly."""
        plan, _ = plan_trials([10.0, 1.0], 100, 4, trials_per_task=20)
        assert plan == [20, 20]
        assert plan_trials([0.0, 0.0], 10, 2) == ([5, 5], 2)
        assert plan_trials([], 10, 2) == ([], 2)


class TestSearchSettings:
    def test_population_grows_with_the_budget_up_to_256(self) -> None:
        """Small budgets get a small population; 128 trials or more get 256 in 3 genetic
        rounds, half MetaSchedule's 512 (whose 4 rounds farm used from 512 trials)."""
        small, mid, large = search_settings(4), search_settings(40), search_settings(2000)
        assert small.population_size == 64 and small.genetic_num_iters == 2
        assert small.population_size < mid.population_size < large.population_size == 256
        assert (large.init_measured_ratio, large.genetic_num_iters) == (0.3, 3)

    def test_a_task_of_many_trials_has_a_search_propose_several_batches(self) -> None:
        """A search proposes an eighth of the task's trials, SEARCH_CANDIDATES (64,
        MetaSchedule's own per-search default) at most, one at least: a task of 128 trials
        or fewer is searched batch by batch as before."""
        assert (SEARCH_CANDIDATES, SEARCHES_PER_TASK) == (64, 8)
        assert search_settings(2000).candidates == search_settings(512).candidates == 64
        assert search_settings(200).candidates == 25
        assert search_settings(120).candidates == 15
        assert search_settings(0).candidates == 1


def record_line(index: int, trace: list[object], run_secs: list[float]) -> str:
    return json.dumps([index, [trace, run_secs, {"kind": "llvm"}, []]])


class TestRecorded:
    def test_measured_traces_per_workload_skip_failed(self, tmp_path: Path) -> None:
        """Measured traces are keyed per workload; a failed measurement is not recorded as
        measured (it may be tried again)."""
        lines = [record_line(0, [["A", [1]]], [1e-3]), record_line(0, [["B", [2]]], [1e10]),
                 record_line(1, [["A", [1]]], [2e-3])]
        (tmp_path / RECORDS_FILE).write_text("\n".join(lines) + "\n")
        traces = measured_traces(tmp_path)
        assert traces == {0: {trace_key([["A", [1]]])}, 1: {trace_key([["A", [1]]])}}

    def test_a_live_trace_has_the_key_of_its_line_in_the_records_file(self,
                                                                      tmp_path: Path) -> None:
        """A candidate's trace (Split's flags as booleans) and the same trace read back from
        MetaSchedule's records file (flags as 0/1) have one key, so a resume skips it."""
        from tvm import te
        from tvm.s_tir import Schedule
        from tvm.s_tir import meta_schedule as ms

        a = te.placeholder((64,), name="a")
        b = te.compute((64,), lambda i: a[i] * 2.0, name="b")
        mod = te.create_prim_func([a, b])
        sch = Schedule(mod)
        (loop,) = sch.get_loops(sch.get_sblock("b"))
        sch.split(loop, sch.sample_perfect_tile(loop, n=2))
        database = ms.database.JSONDatabase(work_dir=str(tmp_path))
        workload = database.commit_workload(sch.mod)
        database.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, workload, [1e-3], None, None))
        [line] = (tmp_path / RECORDS_FILE).read_text().splitlines()
        live = sch.trace.as_json(remove_postproc=False)
        split = next(inst for inst in live[0] if str(inst[0]) == "Split")
        assert any(isinstance(flag, bool) for flag in split[2])  # the file writes 0/1
        assert trace_key(live) == trace_key(json.loads(line)[1][0])
        assert measured_traces(tmp_path) == {0: {trace_key(live)}}

    def test_a_candidates_booleans_match_the_records_integers(self, tmp_path: Path) -> None:
        """A candidate's trace says ``Split`` attributes as booleans, the records file as 0 and
        1: the same trace has one key, so a resumed run does not measure it again."""
        split = [["Split", ["l1", "None", 8], [True, False], ["l2", "l3"]]]
        (tmp_path / RECORDS_FILE).write_text(record_line(0, [[["Split", ["l1", "None", 8],
                                                               [1, 0], ["l2", "l3"]]], []],
                                                         [1e-3]) + "\n")
        assert measured_traces(tmp_path) == {0: {trace_key([split, []])}}
        assert trace_key([split, []]) != trace_key([[["Split", ["l1", "None", 8], [0, 0],
                                                      ["l2", "l3"]]], []])


class TestRate:
    def test_limit_is_run_time_plus_upload(self, tmp_path: Path) -> None:
        """Each trial keeps a phone busy for its timed repeats and its upload: 2 repeats of
        at least 5 ms and 0.99 s of upload make 1 s, 3600 trials per phone-hour."""
        timing = TimingParams(number=2, repeat=2, min_repeat_ms=5)
        assert trial_busy_s([1e-3, 1e-3], timing) == 0.01
        lines = [record_line(0, [], [1e-3, 1e-3]), record_line(0, [], [1e10])]
        (tmp_path / RECORDS_FILE).write_text("\n".join(lines) + "\n")
        assert limit_per_phone_hour(tmp_path, timing) == 360000.0
        (tmp_path / UPLOADS_FILE).write_text('{"upload_s": 0.99}\n{"upload_s": 0.9')
        assert limit_per_phone_hour(tmp_path, timing) == 3600.0



class TestFarmSearch:
    @staticmethod
    def _strategy(expired: list[bool], cold: list[bool] | None = None,
                  model: Any = None) -> tuple[Any, list[int]]:
        """The TuneContext of a 64x64x64 matmul with FarmSearch proposing 12 per search,
        pre-tuned for batches of 4 and a cap of 10, cold while ``cold[0]`` (never: None);
        and what it told: each batch's size from its timer, a 0 for each call of its cost
        model (``model``, if given, instead).

        The context is kept: its search holds a plain pointer to it."""
        from tvm import te
        from tvm.ir.utils import derived_object
        from tvm.s_tir import meta_schedule as ms

        from farm.jobs.tvmscript import TENSOR_INTRIN, import_light

        import_light(TENSOR_INTRIN)  # what TuneContext imports, in seconds
        a, b = te.placeholder((64, 64), name="a"), te.placeholder((64, 64), name="b")
        k = te.reduce_axis((0, 64), name="k")
        c = te.compute((64, 64), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
        told: list[int] = []

        class Timer:
            def sent(self) -> None: ...

            def searched(self, candidates: int) -> None:
                told.append(candidates)

            def joined(self) -> None: ...

        @derived_object
        class Scores(ms.cost_model.RandomModel._cls):  # type: ignore[name-defined,misc]
            """Random scores, each call told (the evolution asks them per search)."""

            def predict(self, context: Any, candidates: list[Any]) -> Any:
                told.append(0)
                return super().predict(context, candidates)

        settings = SearchSettings(16, 0.0, 16, 1, candidates=12)
        target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
        context = ms.TuneContext(
            mod=te.create_prim_func([a, b, c]), target=target,
            space_generator=tune_space(target),
            search_strategy=FarmSearch(settings, set(), 10, lambda: expired[0], Timer(),
                                       (lambda: False) if cold is None else lambda: cold[0]),
            task_name="matmul", rand_state=3, num_threads=1)
        context.pre_tuning(max_trials=100, num_trials_per_iter=4,
                           design_spaces=context.generate_design_space(),
                           database=ms.database.MemoryDatabase(),
                           cost_model=Scores(seed=0) if model is None else model)
        return context, told

    def test_one_search_is_sent_a_batch_at_a_time_up_to_the_cap(self) -> None:
        """One search proposes 12 candidates; they go out in batches of 4, distinct, the
        third cut to the cap's 2, then nothing."""
        context, told = self._strategy([False])
        strategy = context.search_strategy
        batches = [strategy.generate_measure_candidates() for _ in range(3)]
        assert [len(b) for b in batches] == [n for n in told if n] == [4, 4, 2]
        assert told[told.index(4):] == [4, 4, 2], "the cost model was asked after one search"
        keys = {trace_key(c.sch.trace.as_json(remove_postproc=False))
                for b in batches for c in b}
        assert len(keys) == 10
        assert strategy.generate_measure_candidates() is None

    def test_held_candidates_are_dropped_once_the_budget_is_spent(self) -> None:
        """Once ``expired()`` says so, the candidates held from the last search are not sent."""
        expired = [False]
        context, told = self._strategy(expired)
        strategy = context.search_strategy
        assert len(strategy.generate_measure_candidates()) == 4
        expired[0] = True
        assert strategy.generate_measure_candidates() is None
        assert [n for n in told if n] == [4]

    def test_a_cold_cost_model_gets_a_sampled_batch_and_a_warm_one_the_evolution(self) -> None:
        """While the cost model scores at random a search samples one batch of 4 without
        asking it; once it predicts, the next search is the evolution (the model asked, 12
        proposed); no candidate goes out twice, and the cap still holds."""
        cold = [True]
        context, told = self._strategy([False], cold)
        strategy = context.search_strategy
        first = strategy.generate_measure_candidates()
        assert len(first) == 4
        assert told == [4], "a cold search asked the cost model"
        cold[0] = False
        later = [strategy.generate_measure_candidates() for _ in range(2)]
        assert [len(b) for b in later] == [4, 2]
        assert 0 in told[1:], "the warm search did not ask the cost model"
        keys = {trace_key(c.sch.trace.as_json(remove_postproc=False))
                for b in (first, *later) for c in b}
        assert len(keys) == 10
        assert strategy.generate_measure_candidates() is None


class TestCostModel:
    def test_xgboost_is_trained_and_predicts_from_its_warm_up_on(self) -> None:
        """farm's XGBModel (warm-up 8 for 80 trials) is cold after 4 results, untrained (no
        XGBoost fit thrown away before it predicts), and warm, trained, from the 8th on."""
        from tvm.s_tir import meta_schedule as ms

        from farm.tuning.rounds import cost_model, cost_model_cold

        model = cost_model(80)
        cold = cost_model_cold(model)
        assert model.num_warmup_samples == 8
        context, _ = TestFarmSearch._strategy([False], [True], model)
        strategy = context.search_strategy
        for n, warm in ((4, False), (8, True)):
            candidates = strategy.generate_measure_candidates()
            results = [ms.runner.RunnerResult([1e-3 * (i + 1)], None)
                       for i in range(len(candidates))]
            model.update(context, candidates, results)
            strategy.notify_runner_results(candidates, results)
            assert model.data_size == n
            assert (model.booster is not None, cold()) == (warm, not warm)
        assert cost_model_cold("random")() and not cost_model_cold("xgb")()
