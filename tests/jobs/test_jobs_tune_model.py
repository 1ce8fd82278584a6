"""MetaSchedule tuning of a small ONNX CNN over a real tracker and two RPC servers."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from farm.jobs.cache import CompileCache
from farm.jobs.model import load_model, random_inputs, reference_outputs, relax_module
from farm.jobs.params import DeviceFacts, ModelParams, TimingParams, TrackerParams, TuneParams
from farm.jobs.targets import target_for
from farm.jobs.tuning_db import RECORDS_FILE, count_trials, default_and_best_s
from farm.tuning.check_cost import CheckPrice
from farm.tuning.counters import TaskProgress
from farm.tuning.model import TUNED_LIBRARY, model_tasks, tune_model
from farm.tuning.progress import TuneProgress
from farm.tuning.rate import run_overhead_s
from farm.tuning.run import STARTING_PHASE


def traces(work_dir: Path) -> list[tuple[int, str]]:
    """(workload index, trace) of every record in the work folder."""
    lines = (work_dir / RECORDS_FILE).read_text().splitlines()
    return [(record[0], json.dumps(record[1][0])) for record in map(json.loads, lines)]


class PhaseTimes(TuneProgress):
    """The work folder's progress, noting when each phase began (seconds since opening)."""

    def __init__(self, work_dir: Path) -> None:
        super().__init__(work_dir)
        self.opened_s = time.monotonic()
        self.at_s: dict[str, float] = {}
        self.phases: list[tuple[str, float]] = []  # each phase set, in order, with when

    def set_phase(self, phase: str) -> None:
        """Note the phase's start, then record it."""
        self.at_s.setdefault(phase, time.monotonic() - self.opened_s)
        self.phases.append((phase, time.monotonic() - self.opened_s))
        super().set_phase(phase)

    def spans(self, phase: str) -> list[tuple[float, float]]:
        """When each time ``phase`` began and when the next phase did, seconds since opening."""
        return [(at_s, next(t for _, t in self.phases[i + 1:]))
                for i, (p, at_s) in enumerate(self.phases) if p == phase]

    def set_tasks(self, tasks: list[TaskProgress], budget_s: float | None = None) -> None:
        """Note the tuning's start (the tasks are extracted), then record it."""
        self.at_s.setdefault("tuning", time.monotonic() - self.opened_s)
        super().set_tasks(tasks, budget_s)


class TestTasks:
    def test_the_convolutions_are_the_heaviest_tasks(
        self, small_cnn: Path, host_facts: DeviceFacts
    ) -> None:
        """The CNN's tasks are extracted, its two convolutions first (most FLOPs)."""
        model, inputs = load_model(small_cnn)
        tasks = model_tasks(relax_module(model, inputs), target_for(host_facts))
        assert [i.name for i in inputs] == ["x"]
        assert len(tasks) >= 3
        assert all("conv2d" in t.name for t in tasks[:2])
        costs = [t.cost for t in tasks]
        assert costs == sorted(costs, reverse=True)


class TestXgboost:
    def test_metaschedule_xgb_model_trains_with_the_installed_xgboost(self) -> None:
        """MetaSchedule's XGBModel fits on a few measured trials and ranks unseen ones by
        their true score: the cost model tuning uses is XGBoost, not the random fallback."""
        from tvm.s_tir import meta_schedule as ms

        from farm.tuning.rounds import cost_model

        model = cost_model(40)
        model.early_stopping_rounds = 5  # the fit, not its length, is what is checked
        assert isinstance(model._inst, ms.cost_model.XGBModel._cls)  # farm's subclass of it
        assert model.num_warmup_samples == 8
        rng = np.random.default_rng(0)
        # 24 candidates of 4 feature rows each; the score grows with feature 0.
        xs = [rng.random((4, 8)).astype("float32") for _ in range(24)]
        ys = np.array([float(x[:, 0].sum()) for x in xs]) / 4
        model._train(xs=xs[:20], ys=ys[:20])
        assert model.booster is not None
        predicted = model._predict(xs=xs[20:])
        assert np.corrcoef(predicted, ys[20:])[0, 1] > 0.5


@pytest.mark.slow
class TestTuneModel:
    def test_tuning_measures_each_task_resumes_and_matches_onnxruntime(
        self, small_cnn: Path, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """Two tasks tuned together get their trials measured on the cluster; a resumed run
        with a larger budget measures only new traces, keeping the records; a run with
        nothing left measures nothing; the tuned library gives onnxruntime's output."""
        work_dir = tmp_path / "tune"
        params = TuneParams(
            gemm=None, model=ModelParams(model_path=small_cnn), trials=2, max_tasks=2,
            work_dir=work_dir, trials_per_iter=2, runner_workers=2, seed=1,
            timing=TimingParams(number=2, repeat=1, min_repeat_ms=5),
        )
        target = target_for(host_facts)
        cache = CompileCache(tmp_path / "cache")
        first = tune_model(params, target, tracker, cache)
        # Two of the model's tasks tuned; the model's own count is kept beside them.
        assert [t.trials_measured for t in first.tasks] == [1, 1] and first.model_tasks > 2
        assert None not in (first.first_trial_s, first.trials_per_phone_hour,
                            first.limit_per_phone_hour)
        records = (work_dir / RECORDS_FILE).read_bytes()

        more = replace(params, trials=4)
        result = tune_model(more, target, tracker, cache)
        assert result.trials_measured_before == 2
        assert [t.trials for t in result.tasks] == [2, 2]
        assert [t.trials_measured for t in result.tasks] == [2, 2]
        assert all(0 < t.best_s < 1 for t in result.tasks)
        assert len({t.workload_index for t in result.tasks}) == 2
        assert result.trials_measured == result.trials_requested == 4
        assert (work_dir / RECORDS_FILE).read_bytes().startswith(records)
        measured = traces(work_dir)
        assert len(set(measured)) == len(measured) == 4, "a recorded trial was measured again"
        counters = TuneProgress(work_dir).counters
        assert (counters.trials_asked, counters.trials_measured, counters.tasks_done,
                counters.model_tasks) == (4, 4, 2, first.model_tasks)
        assert [t.name for t in counters.tasks] == [t.name for t in result.tasks]

        records = (work_dir / RECORDS_FILE).read_bytes()
        again = tune_model(more, target, tracker, cache)
        assert again.trials_measured_before == 4
        assert (work_dir / RECORDS_FILE).read_bytes() == records
        assert count_trials(work_dir)[0] == 4

        # 1000 trials asked with 2 s of a time budget left: the budget counts from the
        # attempt's start (extraction included), no step begins once it is spent, no batch
        # is sent that would end past it, and the picks' check runs only in what is left:
        # tuning ends within the budget plus one batch and the builders' start if begun
        # within it (plus the estimates' error: 2 s, and a tenth of the batch on a host
        # loaded enough to stretch it: CI run26 had a 2-trial batch take 20.7 s and ended
        # 1.6 s past the bound without it). The records it had are kept and the model is
        # built with them.
        spent = TuneProgress(work_dir).counters.tuning_s
        progress = PhaseTimes(work_dir)
        timed = tune_model(replace(more, trials=1000, for_s=spent + 2.0), target, tracker, cache,
                           progress)
        assert timed.stopped_by == "time"
        assert 4 <= timed.trials_measured < timed.trials_requested == 1000
        tuning_end_s = progress.at_s["compiling"]
        assert timed.tuning_s - spent == pytest.approx(tuning_end_s, abs=0.5), progress.at_s
        assert all(at_s <= max(2.0, progress.at_s["tuning"]) + 0.5
                   for at_s, _ in progress.spans(STARTING_PHASE)), progress.phases
        assert tuning_end_s <= max(2.0, progress.at_s["tuning"]) + 1.1 * (
            progress.last_batch_s or 0) + sum(end - at for at, end in progress.spans(
                STARTING_PHASE)) + 2, progress.phases
        # It stopped for time: less was left than a batch and the shortest check would take.
        batch_s = progress.last_batch_s or 0.0
        reserve_s = CheckPrice.of(default_and_best_s(work_dir), more.timing,  # a batch per wave:
                                  run_overhead_s(work_dir), 1, batch_s, 1).cost_s(2)  # errs long
        assert timed.tuning_s - spent >= 2.0 - batch_s - reserve_s
        assert timed.picks_checked is not None and timed.picks_unchecked is not None
        assert (work_dir / RECORDS_FILE).read_bytes().startswith(records)

        import tvm
        from tvm import relax

        assert result.tuned_library == str(work_dir / TUNED_LIBRARY)
        feeds = random_inputs(result.inputs, seed=0)
        vm = relax.VirtualMachine(tvm.runtime.load_module(result.tuned_library), tvm.cpu())
        got = vm["main"](tvm.runtime.tensor(feeds["x"], tvm.cpu())).numpy()
        [want] = reference_outputs(small_cnn, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
