"""Per-kernel profile of a model on the phone: which TIR kernels take the time.

apache-tvm 0.27's ``relax.VirtualMachine`` has no profiler (no ``profile=True``
nor ``vm.profile``; its methods end at ``set_instrument`` and ``time_evaluator``),
and an instrument callback would have to run on the phone, where no Python runs.
So the model's kernels are timed one by one, as MetaSchedule's runner times a
candidate: each fused TIR function the model's ``main`` calls (``R.call_tir``, in
the order of the fused module of :func:`farm.jobs.model.tunable_module`, the same
passes the build runs, so the names match the library's symbols) is timed with
``time_evaluator`` over the RPC session, on tensors of the shapes and dtypes of
that call.

``time_evaluator`` over RPC finds only functions of the loaded module itself, not
of its imports (``runtime.RPCTimeEvaluator`` looks a name up without imports;
``Module.imports`` is empty for a remote module), and the model's library is a
``relax.VMExecutable`` that imports the kernels. So the build also writes the
kernels alone (the executable's ``library`` import, :data:`KERNELS_FILE`) and the
profile loads that.

The sum of the kernel times is set against the whole model's time: what the
kernels do not explain is the VM's own work (allocations, builtins such as
reshape views) or kernels the sum misses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import structlog

from farm.jobs.params import TimingParams

__all__ = ["KERNELS_FILE", "KernelCall", "KernelProfile", "KernelTime", "kernel_calls",
           "profile_kernels"]

log = structlog.get_logger(__name__)

#: The model's kernels alone, beside the cached library (see the module docstring).
KERNELS_FILE = "kernels.so"

_CALL_TIR = ("relax.call_tir", "relax.call_tir_inplace")


@dataclass(frozen=True)
class KernelCall:
    """One call of a TIR kernel by the model's ``main``.

    Attributes:
        name: the PrimFunc's symbol, e.g. ``"fused_conv2d_add_relu"``.
        args: (shape, dtype) of each argument, inputs then outputs (destination
            passing style), e.g. ``(((1, 3, 16, 16), "float32"), ...)``.
    """

    name: str
    args: tuple[tuple[tuple[int, ...], str], ...]


@dataclass(frozen=True)
class KernelTime:
    """One kernel's time in the model.

    Attributes:
        name: the PrimFunc's symbol.
        calls: how often ``main`` calls it with these shapes.
        per_call_ms: median ``time_evaluator`` sample, milliseconds per call.
        total_ms: ``calls * per_call_ms``.
        share_pct: ``total_ms`` as % of the kernels' sum.
    """

    name: str
    calls: int
    per_call_ms: float
    total_ms: float
    share_pct: float


@dataclass(frozen=True)
class KernelProfile:
    """Where one inference's time goes on one phone.

    Attributes:
        kernels: per kernel (and argument shapes), the heaviest first.
        kernels_ms: sum of ``total_ms``.
        model_ms: the whole model's mean time per inference, milliseconds.
        ratio: ``kernels_ms / model_ms``: near 1 when the kernels explain the
            time; below it, the VM's own work; above it, timing noise or kernels
            faster when run back to back inside the model.
        missing: kernels the model calls that its kernel library lacks (none
            expected; a library dispatch to an external routine would be one).
    """

    kernels: list[KernelTime]
    kernels_ms: float
    model_ms: float
    ratio: float
    missing: list[str]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def _shape(ty: Any) -> tuple[tuple[int, ...], str] | None:
    """A tensor type's static (shape, dtype), or None when a dimension is symbolic."""
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None:
        return None
    try:
        return tuple(int(d) for d in values), str(ty.dtype)
    except (TypeError, ValueError):  # a symbolic dimension (tir.Var) has no int value
        return None


def kernel_calls(fused: Any) -> list[KernelCall]:
    """The TIR kernel calls of ``fused["main"]``, in order, with static argument shapes.

    Args:
        fused: the fused module (:func:`farm.jobs.model.tunable_module`).

    Returns:
        One entry per ``call_tir`` binding; calls with a symbolic dimension are left
        out (they cannot be replayed with fixed tensors).
    """
    calls: list[KernelCall] = []
    for block in fused["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if getattr(getattr(value, "op", None), "name", None) not in _CALL_TIR:
                continue
            types = [arg.ty for arg in value.args[1].fields]
            if value.op.name == "relax.call_tir":  # outputs follow the inputs
                out = value.ty_args[0]
                types += list(getattr(out, "fields", None) or [out])
            args = [_shape(ty) for ty in types]
            if all(a is not None for a in args):
                calls.append(KernelCall(value.args[0].name_hint,
                                        tuple(a for a in args if a is not None)))
    return calls


def _tensor(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """A replay argument: standard normal floats; zeros for integers (safe as indices)."""
    if dtype.startswith(("int", "uint", "bool")):
        return np.zeros(shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


def _has(kernels: Any, name: str) -> bool:
    """Whether the (remote) module defines ``name``.

    ``implements_function`` is not forwarded over RPC, so the lookup itself decides.
    """
    try:
        kernels.get_function(name)
    except (AttributeError, RuntimeError):
        return False
    return True


def profile_kernels(kernels: Any, dev: Any, calls: list[KernelCall], timing: TimingParams,
                    model_s: float) -> KernelProfile:
    """Time each distinct kernel call on the phone.

    Args:
        kernels: the loaded :data:`KERNELS_FILE` module (remote).
        dev: the remote device the model ran on.
        calls: from :func:`kernel_calls`.
        timing: ``number`` and ``min_repeat_ms`` as the model's; 3 repeats, median kept.
        model_s: the model's mean seconds per inference.

    Returns:
        The profile, heaviest kernel first.

    Raises:
        RuntimeError, OSError: the session failed (TVM's errors).
    """
    import tvm

    counts: dict[KernelCall, int] = {}
    for call in calls:
        counts[call] = counts.get(call, 0) + 1
    rng = np.random.default_rng(0)
    timed: list[tuple[KernelCall, int, float]] = []
    missing: list[str] = []
    for call, count in counts.items():
        if not _has(kernels, call.name):
            missing.append(call.name)
            continue
        args = [tvm.runtime.tensor(_tensor(shape, dtype, rng), dev) for shape, dtype in call.args]
        evaluator = kernels.time_evaluator(call.name, dev, number=timing.number, repeat=3,
                                           min_repeat_ms=timing.min_repeat_ms)
        per_call_s = float(np.median(evaluator(*args).results))
        timed.append((call, count, per_call_s))
    kernels_s = sum(count * s for _call, count, s in timed)
    rows = sorted(
        (KernelTime(call.name, count, s * 1e3, count * s * 1e3,
                    100.0 * count * s / kernels_s if kernels_s > 0 else 0.0)
         for call, count, s in timed),
        key=lambda k: k.total_ms, reverse=True,
    )
    model_ms = model_s * 1e3
    log.info("kernels_profiled", kernels=len(rows), kernels_ms=kernels_s * 1e3,
             model_ms=model_ms, missing=missing)
    return KernelProfile(rows, kernels_s * 1e3, model_ms,
                         kernels_s * 1e3 / model_ms if model_ms > 0 else 0.0, sorted(set(missing)))
