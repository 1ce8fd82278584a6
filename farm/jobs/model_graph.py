"""An ONNX model as farm reads it: its inputs, its Relax module, its outputs on the host.

:func:`load_model` checks the file and resolves the input shapes; the Relax
import and the fused module MetaSchedule extracts tasks from are what the
build (:mod:`farm.jobs.model_build`) and a tuning job see; seeded random inputs
and onnxruntime's outputs on them are what a phone's outputs are checked against.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import SpecError
from farm.jobs.onnx_import import import_relax

#: ONNX element types (``onnx.TensorProto.DataType``) farm feeds random inputs to.
_ONNX_DTYPES = {1: "float32", 10: "float16", 11: "float64", 6: "int32", 7: "int64"}


@dataclass(frozen=True)
class ModelInput:
    """One graph input.

    Attributes:
        name: the ONNX input name.
        shape: concrete dimensions.
        dtype: numpy dtype name.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str


def load_model(
    path: Path, input_shapes: dict[str, tuple[int, ...]] | None = None, name: str | None = None
) -> tuple[Any, list[ModelInput]]:
    """Read and check an ONNX file and resolve its input shapes.

    Args:
        path: the ``.onnx`` file.
        input_shapes: name -> shape overriding the model's; needed for symbolic dims.
        name: the user's file name for errors (``path`` may be the store's digest).

    Returns:
        ``(onnx.ModelProto, list[ModelInput])``.

    Raises:
        SpecError: the file is missing, is not a valid ONNX model, or an input has
            a symbolic dimension and no shape was given.
    """
    import onnx

    name = name or path.name
    if not path.is_file():
        raise SpecError("params.model_path", f"{name} does not exist ({path})")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:
        raise SpecError(
            "params.model_path", f"{name} is not a valid ONNX model: {exc}"
        ) from exc
    initializers = {init.name for init in model.graph.initializer}
    overrides = dict(input_shapes or {})
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        dtype = _ONNX_DTYPES.get(tensor_type.elem_type)
        if dtype is None:
            raise SpecError("params.model_path",
                            f"input {value.name!r} of {name} has an unsupported type")
        if value.name in overrides:
            shape = tuple(int(d) for d in overrides.pop(value.name))
        else:
            dims = tensor_type.shape.dim
            if any(not d.HasField("dim_value") for d in dims):
                raise SpecError(
                    "params.input_shapes",
                    f"input {value.name!r} of {name} has a symbolic dimension; give its shape",
                )
            shape = tuple(int(d.dim_value) for d in dims)
        inputs.append(ModelInput(value.name, shape, dtype))
    if overrides:
        raise SpecError("params.input_shapes", f"{name} has no input {sorted(overrides)}")
    return model, inputs


def relax_module(model: Any, inputs: list[ModelInput], name: str = "model.onnx") -> Any:
    """The model as a Relax ``IRModule``, weights bound as constants, after the graph passes.

    A graph TVM's frontend refuses is imported simplified
    (:func:`farm.jobs.onnx_import.import_relax`, which also says why); every
    graph then goes through :func:`farm.jobs.graph_passes.optimize` (batch norm
    folded), so the build and a tuning job's task extraction see one graph.

    Args:
        model: an ``onnx.ModelProto`` from :func:`load_model`.
        inputs: its resolved inputs.
        name: the user's file name, for errors.

    Raises:
        CompileError: the frontend could not import the model, even simplified.
    """
    return import_relax(model, {i.name: list(i.shape) for i in inputs},
                        {i.name: i.dtype for i in inputs}, name).mod


def tunable_module(mod: Any, target: Any) -> Any:
    """``mod`` lowered to the fused TIR functions MetaSchedule extracts tasks from.

    These are the passes ``tvm.s_tir.meta_schedule.relax_integration.compile_relax``
    runs before ``MetaScheduleApplyDatabase`` (apache/tvm, its comment: "same
    preparation as extract_tasks, so database keys match"), for CPU targets
    with farm's additions (:func:`farm.jobs.cpu_schedules.build.fuse_passes`,
    the CPU build's own); tasks extracted from this module are the ones
    :func:`build_model` finds in a database.

    Args:
        mod: a Relax module from :func:`relax_module`.
        target: a ``tvm.target.Target``.

    Returns:
        The fused module; pass it to ``relax_integration.extract_tasks``.
    """
    from farm.jobs.cpu_schedules.build import fuse_passes

    with target:
        return fuse_passes(target)(mod)


def random_inputs(inputs: list[ModelInput], seed: int) -> dict[str, np.ndarray]:
    """Seeded random inputs: standard normal floats, small non-negative integers."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for item in inputs:
        if item.dtype.startswith("int"):
            out[item.name] = rng.integers(0, 4, size=item.shape).astype(item.dtype)
        else:
            out[item.name] = rng.standard_normal(item.shape).astype(item.dtype)
    return out


def reference_outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs for ``feeds`` on the host CPU."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]
