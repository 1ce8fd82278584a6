"""The model zoo: ONNX models shaped like real exports, built offline with random weights.

Five models cover the operators farm's users bring (``python -m farm.zoo OUT_DIR``
writes them)::

    mobilenet_v2        x[batch,3,224,224]  Conv, depthwise Conv, Clip (ReLU6), Add, Gemm
    mobilenet_v3_small  x[batch,3,224,224]  HardSwish, HardSigmoid, SE blocks, Flatten
    resnet18            x[batch,3,112,112]  7x7 Conv, MaxPool, residual Add
    det_head            x[batch,3,160,160]  Resize (nearest), ConvTranspose, Sigmoid
    encoder_block       x[batch,128,256]    LayerNormalization, MatMul, Softmax, GELU (Erf)

Four exporter-shaped variants (:attr:`ZooModel.exporter` names the exporter
they imitate) keep what exporters leave for the compiler to clean up:
``BatchNormalization`` after every ``Conv``, HardSwish in three forms,
``Identity`` nodes, NHWC ``Transpose`` pairs, opsets 11-17::

    pp_lcnet            x[batch,3,224,224]  paddle2onnx, opset 15: Conv+BN+HardSwish, SE, Gemm
    dbnet               x[batch,3,320,320]  paddle2onnx, opset 11: Conv+BN, Add/Clip/Mul/Div,
                                            Resize, ConvTranspose+BN, Sigmoid
    text_direction      x[batch,48,192,3]   tf2onnx, opset 13: NHWC Transposes, 34 BN,
                                            x * HardSigmoid(x), ReduceMean, MatMul, Softmax
    mobilenet_v2_torch  x[batch,3,224,224]  torch.onnx, opset 17: mobilenet_v2 with BN
                                            unfolded and Identity nodes on Clip's bounds

Every input has the symbolic batch dimension ``batch``, so a job must give its
shape (:attr:`ZooModel.input_shapes`). ``computed_shape`` marks the models
with a ``Reshape`` whose shape is computed in the graph (``Shape`` ->
``Gather`` -> ``Unsqueeze``/``Concat``), as PyTorch and Paddle2ONNX write it,
or a ``Resize`` whose ``sizes`` is (``dbnet``).
Each has a ``small`` variant (same operators, fewer channels, smaller input)
for tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.zoo.cnn import mobilenet_v2, mobilenet_v2_torch, mobilenet_v3_small, resnet18
from farm.zoo.detect import det_head
from farm.zoo.paddle import dbnet, pp_lcnet
from farm.zoo.tf import text_direction
from farm.zoo.transformer import encoder_block

__all__ = ["MODELS", "SEED", "ZooModel", "write_model", "write_zoo"]

#: Seeds every zoo model's weights: the same seed writes the same bytes.
SEED = 21


@dataclass(frozen=True)
class ZooModel:
    """One zoo model.

    Attributes:
        name: file stem, e.g. ``"mobilenet_v2"``.
        build: ``(seed, small) -> (ModelProto, side)``.
        image: whether the input is an NCHW image (else ``[batch, seq, dim]`` or,
            for ``text_direction``, an NHWC image).
        computed_shape: whether a ``Reshape`` or a ``Resize`` takes a shape computed in
            the graph.
        exporter: the exporter a variant is shaped after (``"paddle2onnx"``,
            ``"tf2onnx"``, ``"torch.onnx"``); None for the zoo's own five models.
    """

    name: str
    build: Callable[[int, bool], tuple[Any, int]]
    image: bool
    computed_shape: bool
    exporter: str | None = None

    @property
    def variant(self) -> bool:
        """Whether this is an exporter-shaped variant rather than one of the five."""
        return self.exporter is not None

    def proto(self, small: bool = False, seed: int = SEED) -> Any:
        """The ``onnx.ModelProto``."""
        return self.build(seed, small)[0]

    def input_shapes(self, small: bool = False, batch: int = 1) -> dict[str, tuple[int, ...]]:
        """The concrete input shape for ``batch``: ``{"x": (batch, ...)}``."""
        model = self.proto(small)
        dims = model.graph.input[0].type.tensor_type.shape.dim
        return {"x": (batch, *(int(d.dim_value) for d in dims[1:]))}

    def file_name(self, small: bool = False) -> str:
        """``NAME.onnx`` or ``NAME_small.onnx``."""
        return f"{self.name}_small.onnx" if small else f"{self.name}.onnx"


MODELS: dict[str, ZooModel] = {m.name: m for m in (
    ZooModel("mobilenet_v2", mobilenet_v2, image=True, computed_shape=True),
    ZooModel("mobilenet_v3_small", mobilenet_v3_small, image=True, computed_shape=False),
    ZooModel("resnet18", resnet18, image=True, computed_shape=True),
    ZooModel("det_head", det_head, image=True, computed_shape=False),
    ZooModel("encoder_block", encoder_block, image=False, computed_shape=True),
    ZooModel("pp_lcnet", pp_lcnet, image=True, computed_shape=False, exporter="paddle2onnx"),
    ZooModel("dbnet", dbnet, image=True, computed_shape=True, exporter="paddle2onnx"),
    ZooModel("text_direction", text_direction, image=False, computed_shape=False,
             exporter="tf2onnx"),
    ZooModel("mobilenet_v2_torch", mobilenet_v2_torch, image=True, computed_shape=True,
             exporter="torch.onnx"),
)}


def write_model(model: ZooModel, out_dir: Path, small: bool = False) -> Path:
    """Write one zoo model to ``out_dir`` (created if missing); returns the file."""
    import onnx

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / model.file_name(small)
    onnx.save(model.proto(small), str(path))
    return path


def write_zoo(out_dir: Path, small: bool = False) -> list[Path]:
    """Write every zoo model to ``out_dir``; returns the files in :data:`MODELS` order."""
    return [write_model(m, out_dir, small) for m in MODELS.values()]
