"""``farmctl enqueue ab``: sides refused at enqueue in one line naming A or B, nothing stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
from exported_models import write_computed_reshape
from stored_results import finished_job, timings

from farm.queue import Store


def _other_inputs(path: Path) -> Path:
    """The computed-reshape export, its input renamed: another model's inputs."""
    model = onnx.load(str(write_computed_reshape(path)))
    model.graph.input[0].name = "pixels"
    for node in model.graph.node:
        node.input[:] = ["pixels" if name == "images" else name for name in node.input]
    onnx.save(model, str(path))
    return path


class TestRefusedSides:
    def test_models_taking_other_inputs_are_refused(self, farmctl: Any, store: Store,
                                                    tmp_path: Path) -> None:
        """Both sides run on one input: a B that takes another is refused, naming both."""
        a = write_computed_reshape(tmp_path / "a.onnx")
        b = _other_inputs(tmp_path / "b.onnx")
        result = farmctl("enqueue", "ab", str(a), str(b), "--wait-for-device")
        assert result.exit_code == 2, result.output  # a symbolic batch needs its shape
        assert "A: model a.onnx: input 'images' has symbolic dimension" in result.output
        result = farmctl("enqueue", "ab", str(a), str(b), "--input-shape", "images=1,3,8,8",
                         "--wait-for-device")
        assert result.exit_code == 2, result.output
        assert "B: model b.onnx: b.onnx has no input 'images'" in result.output
        assert "images" in result.output and "pixels" in result.output
        assert "Traceback" not in result.output
        assert store.list_jobs(limit=10) == []

    def test_two_exports_with_a_shape_are_queued(self, farmctl: Any, store: Store,
                                                 tmp_path: Path) -> None:
        """Two exports of one input, given the batch's shape: queued with it on both sides."""
        a = write_computed_reshape(tmp_path / "a.onnx")
        b = write_computed_reshape(tmp_path / "b.onnx", seed=1)
        result = farmctl("enqueue", "ab", str(a), str(b), "--input-shape", "images=1,3,8,8",
                         "--wait-for-device")
        assert result.exit_code == 0, result.output
        [job] = store.list_jobs(limit=10)
        params = job.spec["params"]
        assert params["a"]["model"]["input_shapes"] == params["b"]["model"]["input_shapes"] == {
            "images": [1, 3, 8, 8]}
        assert (params["a"]["model"]["name"], params["b"]["model"]["name"]) == ("a.onnx", "b.onnx")

    def test_a_gemm_against_a_model_is_refused(self, farmctl: Any, store: Store,
                                               tmp_path: Path) -> None:
        """A GEMM is compared with a GEMM, a model with a model."""
        model = write_computed_reshape(tmp_path / "m.onnx")
        result = farmctl("enqueue", "ab", "gemm:n=256", str(model), "--wait-for-device")
        assert result.exit_code == 2, result.output
        assert "compare a GEMM with a GEMM, a model with a model" in result.output
        assert store.list_jobs(limit=10) == []

    def test_a_job_side_must_have_finished_and_have_a_build(self, farmctl: Any,
                                                             store: Store) -> None:
        """An unknown job, and a gemm job's ':untuned', are refused naming the side."""
        gemm = finished_job(store, "P1", timings(1))
        missing = farmctl("enqueue", "ab", "999", str(gemm), "--wait-for-device")
        assert missing.exit_code == 2 and "A: no job 999" in missing.output
        untuned = farmctl("enqueue", "ab", str(gemm), f"{gemm}:untuned", "--wait-for-device")
        assert untuned.exit_code == 2, untuned.output
        assert f"B: job {gemm}:untuned is a gemm job" in untuned.output
        assert [j.id for j in store.list_jobs(limit=10)] == [gemm]
