"""The CPU build of a Relax model: tuning records first, farm's default schedules for the rest.

The same passes as MetaSchedule's ``compile_relax`` (apache/tvm
``python/tvm/s_tir/meta_schedule/relax_integration.py``): library dispatch,
legalize, fuse (the preparation ``extract_tasks`` uses, so database keys
match), ``MetaScheduleApplyDatabase`` when there is a database, then each conv's
result that only another conv reads handed over in channel blocks
(:func:`farm.jobs.cpu_schedules.handoff.blocked_handoffs`), then, where
``compile_relax`` schedules only GPU functions, farm's default CPU schedules
(:func:`farm.jobs.cpu_schedules.apply_default_schedules`) on every function the
database did not replace, then the CPU backend's lowering and finalizing
passes. The ``model`` job and the tune job's untuned and tuned figures all
come from this one function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from farm.jobs.cpu_schedules import apply_default_schedules
from farm.jobs.cpu_schedules.handoff import blocked_handoffs
from farm.jobs.tuning_db import open_database

__all__ = ["compile_cpu", "fuse_passes", "handed_over", "scheduled_module"]


def fuse_passes(target: Any) -> Any:
    """The passes from a Relax model to the fused TIR functions that are tuned and scheduled.

    MetaSchedule's ``compile_relax`` preparation ("same preparation as
    extract_tasks, so database keys match"): library dispatch, legalize, fuse;
    CPU targets legalize some operators farm's way
    (:mod:`farm.jobs.cpu_schedules.legalize`,
    :mod:`farm.jobs.cpu_schedules.legalize_dense`).
    For CPU (``llvm``) targets, ``FastMathTransform`` first replaces ``exp``,
    ``erf``, ``tanh`` and softmax by TOPI's polynomial forms (``fast_exp``,
    ``fast_erf``: float32 rational approximations, errors of a few ulp,
    TOPI ``math.py``), as onnxruntime's MLAS does: LLVM has no vector form of
    ``erff``/``expf`` and calls libm once per element, which made the GELU
    epilogue of the zoo's encoder 2.6 of its 3.6 ms matmul (AVX-512, 1 core).
    GPU targets keep TVM's own passes (``compile_relax`` applies their database).

    Args:
        target: a ``tvm.target.Target``.

    Returns:
        A ``tvm.transform.Sequential``; run it under the target and ``opt_level=3``.
    """
    import tvm
    from tvm import relax

    cpu = str(target.kind.name) == "llvm"
    return tvm.transform.Sequential([
        *([relax.transform.FastMathTransform()] if cpu else []),
        *relax.pipeline.library_dispatch_passes(target),
        _cpu_legalize() if cpu else relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ])


def _cpu_legalize() -> Any:
    """``LegalizeOps`` with farm's CPU legalizations, told which convs feed a depthwise conv."""
    import tvm
    from tvm import relax

    from farm.jobs.cpu_schedules.legalize import cpu_legalize_map, depthwise_fed
    from farm.jobs.cpu_schedules.legalize_dense import dense_legalize_map

    @tvm.transform.module_pass(opt_level=0, name="FarmCPULegalize")
    def legalize(mod: Any, _ctx: Any) -> Any:
        custom = {**cpu_legalize_map(depthwise_fed(mod)), **dense_legalize_map()}
        return relax.transform.LegalizeOps(custom)(mod)

    return legalize


def scheduled_module(mod: Any, target: Any, database: Any | None = None) -> Any:
    """``mod`` fused, tuned functions from ``database`` applied, the rest scheduled by farm.

    Between the two, conv -> conv pairs of functions the database
    did not replace exchange channel blocks instead of NCHW
    (:func:`farm.jobs.cpu_schedules.handoff.blocked_handoffs`).

    Args:
        mod: a Relax module (:func:`farm.jobs.model.relax_module`).
        target: a ``tvm.target.Target`` of kind ``llvm``.
        database: a MetaSchedule database, or None for the untuned build.

    Returns:
        The fused module with every PrimFunc scheduled, not yet lowered.
    """
    import tvm
    from tvm.relax.transform import MetaScheduleApplyDatabase

    with target, tvm.transform.PassContext(opt_level=3):
        mod = fuse_passes(target)(mod)
        if database is not None:
            with database:
                mod = MetaScheduleApplyDatabase()(mod)
        mod = handed_over(mod, target)
    return apply_default_schedules(mod, target)


def handed_over(mod: Any, target: Any) -> Any:
    """The fused ``mod``'s calls as the CPU build makes them: conv -> conv pairs in blocks.

    :func:`farm.jobs.cpu_schedules.handoff.blocked_handoffs` on ``llvm``
    targets; other targets' modules are returned as they are. The build
    (:func:`scheduled_module`) and the kernel profile
    (:mod:`farm.jobs.model`) both call it, so the profile names the kernels
    the build ran.
    """
    return blocked_handoffs(mod) if str(target.kind.name) == "llvm" else mod


def compile_cpu(mod: Any, target: Any, database_dir: Path | None) -> Any:
    """Relax module -> VM executable for a CPU target.

    Args:
        mod: a Relax module.
        target: a ``tvm.target.Target`` of kind ``llvm``.
        database_dir: a MetaSchedule ``JSONDatabase`` folder, or None.

    Returns:
        ``relax.VMExecutable``.
    """
    import tvm
    from tvm import relax
    from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline

    database = None
    if database_dir is not None:
        database = open_database(database_dir, allow_missing=False)

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(mod: Any, _ctx: Any) -> Any:
        mod = scheduled_module(mod, target, database)
        lower = tvm.transform.Sequential([
            # relax.pipeline.dataflow_lower_passes does not find these for CPU targets in
            # 0.27 (cpu_generic does not re-export them); compile_relax falls back alike.
            *cpu_pipeline.dataflow_lower_passes(target),
            *cpu_pipeline.finalize_passes(target),
        ])
        with target:
            return lower(mod)

    with target, tvm.transform.PassContext(opt_level=3):
        return relax.build(mod, target=target, relax_pipeline=pipeline)
