"""The model zoo: files as exporters write them, importing into TVM and matching onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from farm.jobs.model import load_model, random_inputs, reference_outputs, relax_module
from farm.zoo import MODELS, ZooModel, write_model
from farm.zoo.__main__ import main as zoo_main


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("zoo")
    assert zoo_main([str(out), "--small"]) == 0
    return out


@pytest.mark.parametrize("cores", [None, 1], ids=["any-cores", "one-core"])
@pytest.mark.parametrize("zoo", MODELS.values(), ids=list(MODELS))
def test_imports_into_tvm_and_matches_onnxruntime(zoo: ZooModel, zoo_dir: Path,
                                                  cores: int | None) -> None:
    """The small variant compiles with farm's CPU build and agrees with onnxruntime, also
    for a one-core target (a virtual phone's: no parallel loop in farm's schedules)."""
    import tvm
    from tvm import relax

    from farm.jobs.cpu_schedules.build import compile_cpu

    path = zoo_dir / zoo.file_name(small=True)
    model, inputs = load_model(path, zoo.input_shapes(small=True))
    target = {"kind": "llvm", **({} if cores is None else {"num-cores": cores})}
    executable = compile_cpu(relax_module(model, inputs), tvm.target.Target(target), None)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    feeds = random_inputs(inputs, seed=1)
    got = vm["main"](*[tvm.runtime.tensor(feeds[i.name]) for i in inputs]).numpy()
    want = reference_outputs(path, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want))))


@pytest.mark.parametrize("zoo", MODELS.values(), ids=list(MODELS))
def test_written_as_exporters_write(zoo: ZooModel, zoo_dir: Path) -> None:
    """IR 9, opset 17, a symbolic batch, and Shape ops exactly where computed_shape says."""
    model = onnx.load(str(zoo_dir / zoo.file_name(small=True)))
    assert model.ir_version == 9
    assert model.opset_import[0].version == 17
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    ops = {node.op_type for node in model.graph.node}
    assert ("Shape" in ops) == zoo.computed_shape


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    """A model written twice is byte-for-byte the same (its compiled library is cached)."""
    zoo = MODELS["det_head"]
    first = write_model(zoo, tmp_path / "a", small=True).read_bytes()
    assert write_model(zoo, tmp_path / "b", small=True).read_bytes() == first


def test_operators_of_the_issue() -> None:
    """The zoo covers the operators real exports bring."""
    ops = {node.op_type for zoo in MODELS.values() for node in zoo.proto(small=True).graph.node}
    assert {"HardSwish", "HardSigmoid", "Resize", "ConvTranspose", "LayerNormalization",
            "Softmax", "Erf", "MatMul", "Gather", "Concat", "Reshape"} <= ops
