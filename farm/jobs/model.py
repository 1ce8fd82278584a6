"""Whole-model benchmark: an ONNX file compiled by TVM Relax and run on the phone.

The model goes through ``tvm.relax.frontend.onnx.from_onnx`` (weights bound as
constants), ``tvm.compile`` for the target, and ``export_library`` into the
compile cache keyed by the file's SHA-256 and the input shapes. Given a tuning
database (``ModelParams.database_dir``, a MetaSchedule ``JSONDatabase`` folder), the
model is compiled by MetaSchedule's ``compile_relax`` instead, which applies the
best recorded schedule of each fused TIR function (``MetaScheduleApplyDatabase``);
the database's digest joins the cache key. On the phone it
runs in ``relax.VirtualMachine`` over the RPC session; the output on a seeded
random input is checked against onnxruntime on the host, and the VM's
``invoke_stateful("main")`` is timed with ``time_evaluator`` (the RPC pattern of
apache/tvm ``docs/how_to/tutorials/cross_compilation_and_rpc.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from farm.clock import SystemClock
from farm.errors import CompileError, SessionError, SpecError
from farm.jobs.cache import CacheKey, CompileCache
from farm.jobs.cpu_schedules import CPU_SCHEDULES_VERSION
from farm.jobs.graph_passes import GRAPH_PASSES_VERSION
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.onnx_import import IMPORT_NOTE_FILE, import_relax
from farm.jobs.params import DeviceKind, ModelParams, TrackerParams
from farm.jobs.profile import KERNELS_FILE, KernelProfile, kernel_calls, profile_kernels
from farm.jobs.session import (
    ThreadPoolApplied,
    apply_thread_pool,
    load,
    open_session,
    upload,
)
from farm.jobs.targets import runtime_device_name
from farm.jobs.tuning_db import (
    RECORDS_FILE,
    WORKLOADS_FILE,
    applied_database,
    open_database,
    repair_work_dir,
)
from farm.jobs.tvm_errors import reason_of
from farm.sampling import SamplingRule, WarmUp, take_samples

log = structlog.get_logger(__name__)

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


@dataclass(frozen=True)
class ModelResult:
    """One model benchmark on one phone.

    Attributes:
        model: the model file's name.
        model_sha256: hex digest of the file.
        inputs: the graph inputs as run.
        device: processor that ran it.
        target: the compile target dict.
        samples_s: every ``time_evaluator`` repeat, mean seconds per inference.
        mean_s: mean of ``samples_s``.
        max_abs_err: largest difference from onnxruntime over all outputs.
        threads: thread pool settings in force (None for GPU runs).
        library: the cached ``.so`` that ran.
        imported: how the model was imported (:attr:`farm.jobs.onnx_import.Imported.note`):
            ``"imported after simplification: <why>"`` when TVM's frontend refused the
            original graph, ``"graph passes: <what each did>"`` when a graph pass
            (:mod:`farm.jobs.graph_passes`) changed it, both joined by ``"; "``, else None.
        warmup: the warm-up runs thrown away before ``samples_s``; None when
            not warmed up (as :class:`farm.jobs.gemm.GemmResult`).
        ci_pct: width of the 95% CI of the samples' median, % of it, or None.
        load_s: seconds to load the uploaded library on the phone and set up its
            Relax VM, as the host saw it (one RPC round trip included).
        first_run_s: seconds of the first inference, cold caches and first
            allocations included (what an app's first call costs), as the host saw it.
        profile: per-kernel times on the phone (:mod:`farm.jobs.profile`) when
            ``ModelParams.profile`` asked for them, else None.
        outputs: the phone's outputs, in the graph's order, when the user gave
            the inputs (``ModelParams.inputs``), else None.
        peak_memory_kb: peak resident memory (KiB) of the process that ran the
            session, read after the timed runs while it was open; None where
            the device kind has no such reading.
    """

    model: str
    model_sha256: str
    inputs: list[ModelInput]
    device: str
    target: dict[str, Any]
    samples_s: list[float]
    mean_s: float
    max_abs_err: float
    threads: ThreadPoolApplied | None
    library: str
    imported: str | None = None
    warmup: WarmUp | None = None
    ci_pct: float | None = None
    load_s: float | None = None
    first_run_s: float | None = None
    profile: KernelProfile | None = None
    outputs: list[np.ndarray] | None = field(default=None, repr=False)
    peak_memory_kb: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return asdict(self)


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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


def database_digest(database_dir: Path) -> str:
    """SHA-256 over a MetaSchedule JSON database's two files (repaired first).

    Raises:
        SpecError: the folder holds no tuning record (``params.tuned``).
    """
    repair_work_dir(database_dir)
    records = database_dir / RECORDS_FILE
    if not records.is_file() or not records.stat().st_size:
        raise SpecError("params.tuned", f"no tuning records in {database_dir}")
    digest = hashlib.sha256()
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        digest.update((database_dir / name).read_bytes())
    return digest.hexdigest()


def _compile(mod: Any, target_obj: Any, device: DeviceKind, database_dir: Path | None) -> Any:
    """Relax module -> executable: the tuned schedules of ``database_dir`` applied, or defaults.

    CPU builds go through :func:`farm.jobs.cpu_schedules.build.compile_cpu` (tuning
    records first, farm's default CPU schedules for the rest), with or without a database.
    """
    import tvm
    from tvm import relax

    if device is DeviceKind.CPU:
        # Tuning records first, farm's default CPU schedules for every other function.
        from farm.jobs.cpu_schedules.build import compile_cpu

        return compile_cpu(mod, target_obj, database_dir)
    if database_dir is not None:
        from tvm.s_tir import meta_schedule as ms

        # compile_relax fuses, applies the database (MetaScheduleApplyDatabase in a
        # PassContext with the target and the database), schedules what the database
        # lacks with dlight on GPUs, and builds.
        database = open_database(database_dir, allow_missing=False)
        return ms.relax_integration.compile_relax(database, mod, target_obj, params=None)
    # GPU kernels need thread bindings; dlight's default GPU schedules add them.
    from tvm.s_tir import dlight

    mod = relax.get_pipeline("zero")(mod)
    with target_obj:
        mod = dlight.ApplyDefaultSchedule(
            dlight.gpu.Matmul(),
            dlight.gpu.GEMV(),
            dlight.gpu.Reduction(),
            dlight.gpu.GeneralReduction(),
            dlight.gpu.Fallback(),
        )(mod)
    return tvm.compile(mod, target=target_obj)


def build_model(
    params: ModelParams, target: dict[str, Any], cache: CompileCache, linker: Linker | None = None
) -> tuple[Path, list[ModelInput]]:
    """Compile the model for ``target``, once per (file content, shapes, target, database).

    With ``params.database_dir`` the best schedule of every task found in that
    MetaSchedule database is applied; tasks it lacks keep the default schedule.
    A tune job's work folder gives only the records its check kept
    (:func:`farm.jobs.tuning_db.applied_database`).

    Args:
        params: the model file, input shapes and tuning database.
        target: target dict from :func:`farm.jobs.targets.target_for`.
        cache: where built libraries are kept.
        linker: how to link; resolved from the target when None.

    Returns:
        The cached ``.so`` and the inputs it takes.

    Raises:
        SpecError: the file or the shapes are invalid, or the database holds no record.
        ToolMissing: the NDK (or a host compiler) is missing.
        CompileError: TVM could not import (even simplified) or compile the model.
    """
    linker = linker or linker_for(target)
    name = params.shown_name
    model, inputs = load_model(params.model_path, params.input_shapes, name)
    digest = _sha256(params.model_path)
    database_dir = params.database_dir
    if database_dir is not None:
        database_digest(database_dir)  # a folder with no record at all is the user's error
        # The records that beat the default schedules when checked (tune_verify).
        database_dir = applied_database(database_dir)
    schedule = f"relax default {params.device.value}"
    if params.device is DeviceKind.CPU:
        schedule = f"farm cpu defaults {CPU_SCHEDULES_VERSION}"
    if database_dir is not None:
        schedule = f"metaschedule database sha256={database_digest(database_dir)}"
        if params.device is DeviceKind.CPU:
            schedule += f" + farm cpu defaults {CPU_SCHEDULES_VERSION}"
    if params.profile:  # its own entry: older entries lack the kernel library
        schedule += " + kernel library"
    schedule += f" + graph passes {GRAPH_PASSES_VERSION}"

    def build(out: Path) -> None:
        import tvm

        imported = import_relax(model, {i.name: list(i.shape) for i in inputs},
                                {i.name: i.dtype for i in inputs}, name)
        if imported.note:
            (out.parent / IMPORT_NOTE_FILE).write_text(imported.note)
        try:
            target_obj = tvm.target.Target(target)
            executable = _compile(imported.mod, target_obj, params.device, database_dir)
            executable.export_library(str(out), fcompile=linker)
            if params.profile:  # the kernels alone, for time_evaluator (farm.jobs.profile)
                executable.mod.imports[0].export_library(str(out.parent / KERNELS_FILE),
                                                         fcompile=linker)
        except (RuntimeError, ValueError, TypeError, KeyError, NotImplementedError) as exc:
            # TVM's errors derive from these builtins; the frontend raises the last two
            # for unsupported operators.
            raise CompileError(name, reason_of(exc)) from exc

    key = CacheKey(
        # By content, not the user's name: one build however the file was named.
        workload=f"onnx {params.model_path.name} sha256={digest} "
                 f"inputs={[(i.name, i.shape) for i in inputs]}",
        schedule=schedule,
        target=target,
        tvm_version=tvm_version(),
    )
    return cache.get_or_build(key, build), inputs


def import_note(library: Path) -> str | None:
    """How the cached ``library``'s model was imported (simplified, graph passes), or None."""
    note = library.parent / IMPORT_NOTE_FILE
    return note.read_text() if note.is_file() else None


def tvm_version() -> str:
    """``tvm.__version__``."""
    import tvm

    return str(tvm.__version__)


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


def _flatten(value: Any) -> list[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [array for item in value for array in _flatten(item)]


@dataclass(frozen=True)
class PreparedModel:
    """A model built on the host, with the inputs it runs on and onnxruntime's outputs for them.

    Attributes:
        library: the cached ``.so``.
        inputs: the graph inputs it takes.
        imported: the import note (:func:`import_note`), or None.
        feeds: input name -> the array it runs on (the user's, else seeded random ones).
        expected: onnxruntime's outputs on ``feeds``, from the original file
            (never the simplified one), in the graph's order.
    """

    library: Path
    inputs: list[ModelInput]
    imported: str | None
    feeds: dict[str, np.ndarray] = field(repr=False)
    expected: list[np.ndarray] = field(repr=False)


def prepare_model(params: ModelParams, target: dict[str, Any],
                  cache: CompileCache) -> PreparedModel:
    """Build (or reuse) the model and compute the outputs it must match; no phone is touched.

    Raises:
        SpecError, ToolMissing, CompileError: the job cannot be built (never retried).
    """
    linker = linker_for(target)
    library, inputs = build_model(params, target, cache, linker)
    # The user's own inputs (checked at enqueue, farm.jobs.model_io), else seeded random ones.
    feeds = dict(params.inputs) if params.inputs is not None else random_inputs(inputs,
                                                                                params.seed)
    expected = reference_outputs(params.model_path, feeds)
    return PreparedModel(library, inputs, import_note(library), feeds, expected)


@dataclass
class LoadedModel:
    """A model loaded in a Relax VM on the phone, its outputs checked, ready to be timed.

    Create it with :func:`load_prepared`; :meth:`time` may be called many
    times in the session (an A/B job times two of them in turns).

    Attributes:
        prepared: what was built on the host.
        phone: the serial (or ``key:<tracker key>``) to name in errors.
        load_s: seconds to load the library and set up its VM, as the host saw it.
        first_run_s: seconds of the first inference, as the host saw it.
        outputs: the phone's outputs of the first inference, in the graph's order.
        max_abs_err: largest difference from onnxruntime over all outputs.
        dev: the session's device the VM runs on.
    """

    prepared: PreparedModel
    phone: str
    load_s: float
    first_run_s: float
    outputs: list[np.ndarray] = field(repr=False)
    max_abs_err: float
    dev: Any = field(repr=False)
    _vm: Any = field(repr=False)

    def time(self, number: int, repeat: int, min_repeat_ms: int = 0) -> list[float]:
        """``repeat`` samples of ``number`` inferences each, mean seconds per inference.

        Raises:
            SessionError: the session failed.
        """
        try:
            evaluator = self._vm.time_evaluator("invoke_stateful", self.dev, number=number,
                                                repeat=repeat, min_repeat_ms=min_repeat_ms)
            return [float(s) for s in evaluator("main").results]
        except (RuntimeError, OSError) as exc:
            raise SessionError(self.phone, f"model run failed: {exc}") from exc


def load_prepared(prepared: PreparedModel, params: ModelParams, target: dict[str, Any],
                  remote: Any, tracker: TrackerParams) -> LoadedModel:
    """Upload and load ``prepared`` over the open session, run it once and check its outputs.

    Raises:
        CompileError: the output differs from onnxruntime beyond rtol/atol.
        SessionError: the session failed.
    """
    import tvm
    from tvm import relax

    phone = tracker.serial or f"key:{tracker.key}"
    clock = SystemClock()
    remote_name = f"model-{prepared.library.parent.name[:16]}.so"
    upload(remote, prepared.library, remote_name, tracker)
    start_s = clock.monotonic()
    module = load(remote, remote_name, tracker)
    try:
        dev = remote.device(runtime_device_name(target), 0)
        vm = relax.VirtualMachine(module, dev)
        load_s = clock.monotonic() - start_s
        args = [tvm.runtime.tensor(prepared.feeds[i.name], dev) for i in prepared.inputs]
        start_s = clock.monotonic()
        returned = vm["main"](*args)
        dev.sync()
        first_run_s = clock.monotonic() - start_s
        outputs = _flatten(returned)
        vm.set_input("main", *args)
    except (RuntimeError, OSError) as exc:
        raise SessionError(phone, f"model run failed: {exc}") from exc
    expected = prepared.expected
    if len(outputs) != len(expected):
        raise CompileError(
            params.shown_name, f"{len(outputs)} outputs, onnxruntime gives {len(expected)}"
        )
    max_abs_err = 0.0
    for got, want in zip(outputs, expected, strict=True):
        max_abs_err = max(max_abs_err, float(np.max(np.abs(got.astype("float64") - want))))
        if got.shape != want.shape or not np.allclose(
            got, want, rtol=params.rtol, atol=params.atol
        ):
            raise CompileError(
                params.shown_name,
                f"output differs from onnxruntime on {phone}: max |error| {max_abs_err:g}",
            )
    return LoadedModel(prepared, phone, load_s, first_run_s, outputs, max_abs_err, dev, vm)


def run_model(
    params: ModelParams, target: dict[str, Any], tracker: TrackerParams, cache: CompileCache,
    *, sampling: SamplingRule | None = None, peak_memory: Callable[[], int | None] | None = None,
) -> ModelResult:
    """Build (or reuse), upload, check and time the model on the phone serving ``tracker.key``.

    Args:
        params: model file, shapes, tolerances, timing and thread pool settings.
        target: target dict for the phone.
        tracker: where to get the RPC session.
        cache: the compile cache.
        sampling: warm up, then sample until the median is known, at least
            ``params.timing.repeat`` (:func:`farm.sampling.take_samples`);
            None takes exactly ``repeat``, unwarmed.
        peak_memory: reads the peak resident memory (KiB) of the process serving
            the session (:class:`farm.runner.app_memory.AppMemory` bound to the
            phone); called after the timed runs, before the session closes (a
            server that forks per session keeps that peak only in its child).

    Returns:
        The result with every raw sample.

    Raises:
        SpecError, ToolMissing, CompileError: the job cannot be built (never retried).
        CompileError: the output differs from onnxruntime beyond rtol/atol.
        SessionError, TrackerUnreachable: the session failed (retried elsewhere).
    """
    prepared = prepare_model(params, target, cache)
    remote = open_session(tracker)
    phone = tracker.serial or f"key:{tracker.key}"
    threads = None
    if params.device is DeviceKind.CPU:
        threads = apply_thread_pool(remote, params.threads, tracker)
    loaded = load_prepared(prepared, params, target, remote, tracker)
    timing = params.timing

    def time(repeat: int) -> list[float]:
        return loaded.time(timing.number, repeat, timing.min_repeat_ms)

    warmup = ci_pct = None
    if sampling is None:
        samples_s = time(timing.repeat)
    else:
        sampled = take_samples(time, sampling, at_least=timing.repeat)
        samples_s, warmup, ci_pct = sampled.samples_s, sampled.warmup, sampled.ci_pct
    try:
        peak_memory_kb = peak_memory() if peak_memory is not None else None
        profile = (_profile(params, target, remote, prepared.library, loaded.dev,
                            prepared.inputs, float(np.mean(samples_s)), tracker)
                   if params.profile else None)
    except (RuntimeError, OSError) as exc:
        raise SessionError(phone, f"model run failed: {exc}") from exc
    mean_s = float(np.mean(samples_s))
    log.info("model_measured", serial=tracker.serial, model=params.shown_name, mean_s=mean_s)
    return ModelResult(
        model=params.shown_name,
        model_sha256=_sha256(params.model_path),
        inputs=prepared.inputs,
        device=params.device.value,
        target=target,
        samples_s=samples_s,
        mean_s=mean_s,
        max_abs_err=loaded.max_abs_err,
        threads=threads,
        library=str(prepared.library),
        imported=prepared.imported,
        warmup=warmup,
        ci_pct=ci_pct,
        load_s=loaded.load_s,
        first_run_s=loaded.first_run_s,
        profile=profile,
        outputs=loaded.outputs if params.inputs is not None else None,
        peak_memory_kb=peak_memory_kb,
    )


def _profile(params: ModelParams, target: dict[str, Any], remote: Any, library: Path, dev: Any,
             inputs: list[ModelInput], model_s: float, tracker: TrackerParams) -> KernelProfile:
    """Time the model's kernels one by one on the phone (:mod:`farm.jobs.profile`)."""
    import tvm

    model, _ = load_model(params.model_path, params.input_shapes, params.shown_name)
    mod = relax_module(model, inputs, params.shown_name)
    from farm.jobs.cpu_schedules.build import handed_over

    target_obj = tvm.target.Target(target)
    # A pair with a tuned function keeps its NCHW calls in the build and shows here
    # as missing kernels.
    fused = handed_over(tunable_module(mod, target_obj), target_obj)
    remote_name = f"kernels-{library.parent.name[:16]}.so"
    upload(remote, library.parent / KERNELS_FILE, remote_name, tracker)
    kernels = load(remote, remote_name, tracker)
    return profile_kernels(kernels, dev, kernel_calls(fused), params.timing, model_s)
