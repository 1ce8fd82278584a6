"""ONNX models compiled by Relax and run in a VirtualMachine over RPC."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.errors import SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.model import run_model
from farm.jobs.params import DeviceFacts, ModelParams, TimingParams, TrackerParams
from farm.jobs.targets import target_for


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
