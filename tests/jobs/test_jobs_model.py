"""ONNX models compiled by Relax and run in a VirtualMachine over RPC."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.errors import SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.model import build_model, load_model, relax_module, run_model, tunable_module
from farm.jobs.params import DeviceFacts, ModelParams, TimingParams, TrackerParams
from farm.jobs.targets import target_for
from farm.jobs.tuning_db import RECORDS_FILE


class TestRunModel:
    def test_output_matches_onnxruntime(
        self, small_cnn: Path, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """The phone's output equals onnxruntime's within tolerance, with one sample per repeat."""
        params = ModelParams(small_cnn, timing=TimingParams(number=3, repeat=3, min_repeat_ms=1))
        result = run_model(params, target_for(host_facts), tracker, CompileCache(tmp_path / "c"))
        assert result.max_abs_err < 1e-4
        assert len(result.samples_s) == 3
        assert result.mean_s > 0
        assert [(i.name, i.shape) for i in result.inputs] == [("x", (1, 3, 16, 16))]
        # Load and first run are timed apart from the samples (a cold first call is no sample).
        assert result.load_s is not None and 0 < result.load_s < 60
        assert result.first_run_s is not None and 0 < result.first_run_s < 60

    def test_a_file_that_is_not_onnx_is_refused_with_the_field(
        self, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """A corrupt model file is the user's error, naming params.model_path."""
        bad = tmp_path / "bad.onnx"
        bad.write_bytes(b"\x00not a protobuf at all\xff" * 10)
        with pytest.raises(SpecError) as info:
            run_model(ModelParams(bad), target_for(host_facts), tracker, CompileCache(tmp_path))
        assert info.value.field == "params.model_path"

    def test_a_shape_for_an_unknown_input_is_refused(
        self, small_cnn: Path, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """Input shapes must name inputs the model has."""
        params = ModelParams(small_cnn, input_shapes={"nope": (1, 2)})
        with pytest.raises(SpecError) as info:
            run_model(params, target_for(host_facts), tracker, CompileCache(tmp_path))
        assert info.value.field == "params.input_shapes"


class TestTunedModel:
    def test_a_tuning_database_is_applied_and_the_output_still_matches(
        self, tuned_cnn: tuple[Path, Path], tracker: TrackerParams, host_facts: DeviceFacts,
        tmp_path: Path,
    ) -> None:
        """With database_dir every task's recorded schedule is compiled in; onnxruntime agrees."""
        model_path, database_dir = tuned_cnn
        cache = CompileCache(tmp_path / "c")
        timing = TimingParams(number=2, repeat=2, min_repeat_ms=1)
        tuned = ModelParams(model_path, timing=timing, database_dir=database_dir)
        result = run_model(tuned, target_for(host_facts), tracker, cache)
        assert result.max_abs_err < 1e-4
        untuned = run_model(ModelParams(model_path, timing=timing), target_for(host_facts),
                            tracker, cache)
        assert untuned.library != result.library, "the database is part of the cache key"
        records = (database_dir / RECORDS_FILE).read_text().splitlines()
        # 7 tasks: the depthwise conv pads its input per channel block inside its own
        # loop (farm.jobs.cpu_schedules.legalize), no copy kernel of its own.
        assert _scheduled_functions(database_dir, model_path, host_facts) == len(records) == 7

    def test_an_empty_database_is_refused_with_the_field(
        self, small_cnn: Path, tmp_path: Path, host_facts: DeviceFacts
    ) -> None:
        """A folder without tuning records is the user's error, naming params.tuned."""
        params = ModelParams(small_cnn, database_dir=tmp_path / "empty")
        with pytest.raises(SpecError) as info:
            build_model(params, target_for(host_facts), CompileCache(tmp_path / "c"))
        assert info.value.field == "params.tuned"


def _scheduled_functions(database_dir: Path, model_path: Path, facts: DeviceFacts) -> int:
    """How many fused TIR functions MetaScheduleApplyDatabase replaced from the database."""
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    model, inputs = load_model(model_path)
    target = tvm.target.Target(target_for(facts))
    mod = tunable_module(relax_module(model, inputs), target)
    database = ms.database.JSONDatabase(work_dir=str(database_dir))
    with target, database, tvm.transform.PassContext(opt_level=3):
        applied = relax.transform.MetaScheduleApplyDatabase()(mod)
    return sum(
        1 for func in applied.functions.values()
        if isinstance(func, tvm.tirx.PrimFunc) and func.attrs.get("tirx.is_scheduled")
    )
