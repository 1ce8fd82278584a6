"""A model compiled on the host into the compile cache, tuned schedules applied or farm's defaults.

The model goes through ``tvm.relax.frontend.onnx.from_onnx`` (weights bound as
constants, :mod:`farm.jobs.model_graph`), ``tvm.compile`` for the target, and
``export_library`` into the compile cache keyed by the file's SHA-256 and the
input shapes. Given a tuning database (``ModelParams.database_dir``, a
MetaSchedule ``JSONDatabase`` folder), the model is compiled by MetaSchedule's
``compile_relax`` instead, which applies the best recorded schedule of each
fused TIR function (``MetaScheduleApplyDatabase``); the database's digest joins
the cache key.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from farm.errors import CompileError, SpecError
from farm.jobs.cache import CacheKey, CompileCache
from farm.jobs.cpu_schedules import CPU_SCHEDULES_VERSION
from farm.jobs.graph_passes import GRAPH_PASSES_VERSION
from farm.jobs.model_graph import ModelInput, load_model
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.onnx_import import IMPORT_NOTE_FILE, import_relax
from farm.jobs.params import DeviceKind, ModelParams
from farm.jobs.profile import KERNELS_FILE
from farm.jobs.tuning_db import (
    RECORDS_FILE,
    WORKLOADS_FILE,
    applied_database,
    open_database,
    repair_work_dir,
)
from farm.jobs.tvm_errors import reason_of


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of the file at ``path`` (a model's identity in the cache and results)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
    from farm.jobs.gpu_schedules import apply_default_schedules

    mod = apply_default_schedules(relax.get_pipeline("zero")(mod), target_obj)
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
    digest = file_sha256(params.model_path)
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
