"""Tunings that start from the fleet's tuning records (a real store, tracker and RPC servers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from farm.jobs.cache import CompileCache
from farm.jobs.params import DeviceFacts, ModelParams, TimingParams, TrackerParams, TuneParams
from farm.jobs.targets import target_for
from farm.jobs.tuning_db import RECORDS_FILE
from farm.queue import Store
from farm.tuning.fleet_records import best_records, keep_work_dir
from farm.tuning.model import ModelTuneResult, tune_model
from farm.tuning.progress import TuneProgress
from farm.tuning.seed import write_database

MODEL = "Pixel 7"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def conv_then_pointwise(path: Path) -> Path:
    """A model whose first layer is the small CNN's (Conv 3->8 3x3 pad 1, ReLU on 1x3x16x16),
    followed by a layer the small CNN lacks (Conv 8->4 1x1, ReLU): one shared kernel."""
    rng = np.random.default_rng(3)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32),
                                       name)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("Relu", ["c2"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv_then_pointwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [weight("w1", (8, 3, 3, 3)), weight("b1", (8,)), weight("w2", (4, 8, 1, 1)),
         weight("b2", (4,))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def lines(work_dir: Path) -> list[list]:
    """The work folder's record lines ``[workload_index, record]``."""
    return [json.loads(x) for x in (work_dir / RECORDS_FILE).read_text().splitlines()]


@pytest.mark.slow
class TestFleetRecords:
    def test_a_second_tune_measures_nothing_and_a_sharing_model_starts_from_the_best(
        self, small_cnn: Path, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """The first tune's records are kept in the store; a second tune of the same model on the
        same device model (a new work folder, as a new job) gets them, has every task at budget
        and runs no tuning round; a model sharing the heavier kernel starts that task from the
        stored record, measures only its missing trial and the other task's, and the tuned
        build of each uses the records."""
        target = target_for(host_facts)
        cache = CompileCache(tmp_path / "cache")
        timing = TimingParams(number=2, repeat=1, min_repeat_ms=5)
        with Store(f"sqlite:///{tmp_path / 'farm.db'}") as store:
            fleet = best_records(store, MODEL)

            def tune(model: Path, folder: str, trials: int) -> ModelTuneResult:
                params = TuneParams(gemm=None, model=ModelParams(model_path=model), trials=trials,
                                    max_tasks=2, work_dir=tmp_path / folder, trials_per_iter=2,
                                    runner_workers=2, seed=1, timing=timing)
                result = tune_model(params, target, tracker, cache, fleet=fleet)
                keep_work_dir(store, params.work_dir, MODEL, None, None,
                              lambda i: f"task {i}", T0)
                return result

            first = tune(small_cnn, "first", 2)
            assert (first.trials_from_fleet, first.trials_measured) == (0, 2)
            stored = {json.dumps(r[1][0]) for r in lines(tmp_path / "first")}

            second = tune(small_cnn, "second", 2)
            assert second.trials_from_fleet == second.trials_measured_before == 2
            assert second.stopped_by == "trials"
            assert TuneProgress(tmp_path / "second").counters.rounds == 0, "a round ran"
            # The "under a minute of tuning time": with no round, the tuning phase
            # is the seeding and the counting alone.
            assert second.tuning_s < 60.0, second.tuning_s
            assert {json.dumps(r[1][0]) for r in lines(tmp_path / "second")} == stored
            assert [t.best_s for t in second.tasks] == [t.best_s for t in first.tasks]
            assert Path(second.tuned_library).is_file()

            # 3 trials over the two tasks: 2 for the shared convolution (the heavier), 1 for
            # the pointwise one; the shared task has 1 stored record and measures 1 more.
            other = tune(conv_then_pointwise(tmp_path / "other.onnx"), "other", 3)
            shared, new = other.tasks
            assert shared.name == first.tasks[0].name == "fused_conv2d_add_relu"
            assert (shared.trials, new.trials) == (2, 1)
            assert other.trials_from_fleet == 1
            assert (shared.trials_measured, new.trials_measured) == (2, 1)
            [stored_conv] = [r[1] for r in lines(tmp_path / "first")
                             if r[0] == first.tasks[0].workload_index]
            records = lines(tmp_path / "other")
            assert records[0] == [shared.workload_index, stored_conv], \
                "the shared task did not start from the stored record"
            assert shared.best_s <= first.tasks[0].best_s
            assert len({json.dumps(r[1][0]) for r in records}) == len(records) == 3
            # kept once each: 2 of the first tune, 1 more of the shared task, 1 pointwise
            assert sum(s.trials for s in store.tuning_record_summaries(MODEL)) == 4
            write_database(tmp_path / "export", *store.fleet_database(MODEL))

        from tvm.s_tir import meta_schedule as ms

        exported = ms.database.JSONDatabase(work_dir=str(tmp_path / "export"))
        assert len(exported.get_all_tuning_records()) == 4  # farmctl records export loads
