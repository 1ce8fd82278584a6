"""The model zoo: files as exporters write them, importing into TVM and matching onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from farm.jobs.model import load_model, random_inputs, reference_outputs, relax_module
from farm.jobs.params import ModelParams
from farm.zoo import MODELS, ZooModel, write_model
from farm.zoo.__main__ import main as zoo_main
from farm.zoo.graph import Graph

#: The zoo's own five models and the exporter-shaped variants.
OWN = {name: zoo for name, zoo in MODELS.items() if not zoo.variant}
VARIANTS = {name: zoo for name, zoo in MODELS.items() if zoo.variant}


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("zoo")
    assert zoo_main([str(out), "--small"]) == 0
    return out


def _run_cpu_build(path: Path, zoo: ZooModel, cores: int | None,
                   feeds_seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The model job's import and default CPU build run on this host, and onnxruntime's output."""
    import tvm
    from tvm import relax

    from farm.jobs.cpu_schedules.build import compile_cpu

    model, inputs = load_model(path, zoo.input_shapes(small=True))
    target = {"kind": "llvm", **({} if cores is None else {"num-cores": cores})}
    executable = compile_cpu(relax_module(model, inputs), tvm.target.Target(target), None)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    feeds = random_inputs(inputs, seed=feeds_seed)
    got = vm["main"](*[tvm.runtime.tensor(feeds[i.name]) for i in inputs]).numpy()
    return got, reference_outputs(path, feeds)[0]


@pytest.mark.parametrize("cores", [None, 1], ids=["any-cores", "one-core"])
@pytest.mark.parametrize("zoo", OWN.values(), ids=list(OWN))
def test_imports_into_tvm_and_matches_onnxruntime(zoo: ZooModel, zoo_dir: Path,
                                                  cores: int | None) -> None:
    """The small variant compiles with farm's CPU build and agrees with onnxruntime, also
    for a one-core target (a virtual phone's: no parallel loop in farm's schedules)."""
    got, want = _run_cpu_build(zoo_dir / zoo.file_name(small=True), zoo, cores)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want))))


@pytest.mark.parametrize("zoo", VARIANTS.values(), ids=list(VARIANTS))
def test_variant_matches_onnxruntime_at_the_model_jobs_tolerance(zoo: ZooModel,
                                                                 zoo_dir: Path) -> None:
    """An exporter-shaped variant (small) goes through the model job's import and default CPU
    build for a phone's one core and agrees with onnxruntime within the job's default rtol/atol."""
    path = zoo_dir / zoo.file_name(small=True)
    got, want = _run_cpu_build(path, zoo, cores=1)
    defaults = ModelParams(path, zoo.input_shapes(small=True))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=defaults.rtol, atol=defaults.atol)


#: Per variant: its opset and operators its exporter writes that the zoo's own five lack.
EXPORTER_SHAPES = {
    "pp_lcnet": (15, {"BatchNormalization", "HardSwish", "HardSigmoid", "Flatten", "Gemm"}),
    "dbnet": (11, {"BatchNormalization", "Clip", "Div", "Resize", "ConvTranspose", "Sigmoid"}),
    "text_direction": (13, {"BatchNormalization", "Transpose", "HardSigmoid", "ReduceMean"}),
    "mobilenet_v2_torch": (17, {"BatchNormalization", "Identity", "Clip", "Reshape"}),
}


@pytest.mark.parametrize("zoo", MODELS.values(), ids=list(MODELS))
def test_written_as_exporters_write(zoo: ZooModel, zoo_dir: Path) -> None:
    """IR 9, the exporter's opset (17 for the zoo's own), a symbolic batch, the exporter's
    operators, and Shape ops exactly where computed_shape says."""
    model = onnx.load(str(zoo_dir / zoo.file_name(small=True)))
    assert model.ir_version == 9
    opset, exporter_ops = EXPORTER_SHAPES.get(zoo.name, (17, set()))
    assert model.opset_import[0].version == opset
    assert exporter_ops <= {node.op_type for node in model.graph.node}
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


def test_variants_listed_as_such() -> None:
    """Each exporter-shaped variant names its exporter; the zoo's own five name none."""
    assert set(VARIANTS) == set(EXPORTER_SHAPES)
    assert {zoo.exporter for zoo in VARIANTS.values()} == {"paddle2onnx", "tf2onnx",
                                                           "torch.onnx"}
    assert list(OWN) == ["mobilenet_v2", "mobilenet_v3_small", "resnet18", "det_head",
                         "encoder_block"]


def test_pp_lcnet_has_paddleclas_counts() -> None:
    """The full PP-LCNet variant has PaddleClas's export's 32 Conv, 27 BN and 28 HardSwish,
    and every BatchNormalization reads a Conv that has no bias (BN left unfolded)."""
    graph = MODELS["pp_lcnet"].proto().graph
    ops = [node.op_type for node in graph.node]
    assert (ops.count("Conv"), ops.count("BatchNormalization"), ops.count("HardSwish")) == (
        32, 27, 28)
    producers = {node.output[0]: node for node in graph.node}
    for node in graph.node:
        if node.op_type == "BatchNormalization":
            conv = producers[node.input[0]]
            assert conv.op_type == "Conv" and len(conv.input) == 2


def test_dbnet_resizes_both_ways_opset_11_writes() -> None:
    """DBNet's small variant has Resize by scales and Resize to computed sizes beside an
    empty scales tensor, the form TVM's converter refused until the import left it out."""
    graph = MODELS["dbnet"].proto(small=True).graph
    empty = {init.name for init in graph.initializer if 0 in init.dims}
    resizes = [node for node in graph.node if node.op_type == "Resize"]
    by_sizes = [node for node in resizes if len(node.input) == 4]
    assert by_sizes and len(by_sizes) < len(resizes)
    assert all(node.input[2] in empty for node in by_sizes)


@pytest.mark.parametrize("form", ["clip", "hardsigmoid"])
def test_hardswish_forms_compute_hardswish(form: str, tmp_path: Path) -> None:
    """The exporters' spelled-out HardSwish forms give onnxruntime's HardSwish op's values."""
    x = np.linspace(-5.0, 5.0, 41, dtype=np.float32).reshape(1, 41)
    outputs = {}
    for name in ("op", form):
        g = Graph(seed=0, opset=14)
        out = g.hardswish("x", name)
        path = tmp_path / f"{name}.onnx"
        onnx.save(g.model([1, 41], out, [1, 41], "hardswish"), str(path))
        outputs[name] = reference_outputs(path, {"x": x})[0]
    np.testing.assert_allclose(outputs[form], outputs["op"], rtol=1e-6, atol=1e-6)
    assert float(outputs["op"][0, 0]) == 0.0 and float(outputs["op"][0, -1]) == 5.0
