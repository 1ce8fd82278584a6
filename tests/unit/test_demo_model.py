"""farm.demo_model: the demo's small ONNX CNN."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from farm.demo_model import INPUT_SHAPE, OUTPUT_SHAPE, write_small_cnn


class TestWriteSmallCnn:
    def test_same_seed_same_bytes(self, tmp_path: Path) -> None:
        """The weights are seeded, so two builds are byte-for-byte equal."""
        a = write_small_cnn(tmp_path / "a.onnx").read_bytes()
        b = write_small_cnn(tmp_path / "b.onnx").read_bytes()
        assert a == b
        assert write_small_cnn(tmp_path / "c.onnx", seed=8).read_bytes() != a

    def test_onnxruntime_runs_it(self, tmp_path: Path) -> None:
        """onnxruntime loads the IR 9 model and returns a [1, 10] output."""
        import onnxruntime

        path = write_small_cnn(tmp_path / "m.onnx")
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        x = np.ones(INPUT_SHAPE, dtype=np.float32)
        (y,) = session.run(None, {"x": x})
        assert y.shape == OUTPUT_SHAPE
        assert np.isfinite(y).all()
