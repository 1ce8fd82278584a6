"""A tune on emulated devices: the path and the outputs are checked, no candidate is ranked.

A board under QEMU user mode (facts ``emulated``:
:func:`farm.controllers.board.is_emulated`) runs farm's builds as real ARM
code, but its timings are the emulator's, not a CPU's: they are kept and shown
(marked emulated in runs and rows), never compared with other devices' and
never used to rank tuning candidates. So a tune whose devices are emulated
builds and runs one batch of candidates through the real path (built for the
board's target, uploaded, run under QEMU), checks the outputs of what it built
against numpy (a GEMM) or onnxruntime (a model), and keeps no tuning record as
a best: none reaches the fleet's records, the picks check is not timed, and no
later build "tuned by" the job applies one (:func:`farm.tuning.verify.drop_picks`).

A tune over emulated and real devices at once is refused
(:func:`emulated_devices`): their timings are not of one kind, and a search
ranking by the real ones alone would still hold the emulated ones for nothing.
farmd never plans one (a tune's devices are of one model, and an emulated
board's model names QEMU), so only a job naming such serials meets the refusal,
at enqueue.

Pure but for :func:`check_gemm_library`, which runs a library on a device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import CompileError, SessionError, SpecError
from farm.jobs.params import GemmParams, TrackerParams, TuneParams

__all__ = ["EMULATED_FACT", "check_gemm_library", "emulated_devices", "emulated_note",
           "path_check_params"]

#: The device fact that says a device's code runs under emulation (a board under QEMU).
EMULATED_FACT = "emulated"


def emulated_devices(facts: Mapping[str, Mapping[str, Any]],
                     field: str = "devices.serials") -> bool:
    """Whether a tune's devices are emulated: True when all are, False when none is.

    Args:
        facts: each device's facts, by serial.
        field: the spec field a refusal names.

    Raises:
        SpecError: some are emulated and some are not (one line naming them).
    """
    emulated = sorted(s for s, f in facts.items() if f.get(EMULATED_FACT))
    if emulated and len(emulated) < len(facts):
        real = sorted(set(facts) - set(emulated))
        raise SpecError(field, f"{', '.join(emulated)} emulated and {', '.join(real)} not: a "
                               "tune runs on emulated devices alone or on real ones alone")
    return bool(emulated)


def emulated_note(serials: Sequence[str]) -> str:
    """The outcome's one line for a tune on emulated devices.

    >>> emulated_note(["vb0"])
    'vb0 is emulated: the tune checked the path and the outputs and ranked nothing'
    """
    verb = "is" if len(serials) == 1 else "are"
    return (f"{', '.join(serials)} {verb} emulated: the tune checked the path and the outputs "
            "and ranked nothing")


def path_check_params(params: TuneParams) -> TuneParams:
    """``params`` for a tune on emulated devices: one batch of candidates, no picks check.

    ``trials`` is capped at ``trials_per_iter`` (enough to go through the
    path once), and ``verify_rounds`` is 0: the picks are not measured again
    (:func:`farm.tuning.model.tune_model` skips the check).
    """
    return replace(params, trials=min(params.trials, params.trials_per_iter), verify_rounds=0)


def check_gemm_library(library: Path, gemm: GemmParams, target: dict[str, Any],
                       tracker: TrackerParams, func_name: str) -> float:
    """Run ``library``'s GEMM once on the device serving ``tracker.key``; C against numpy.

    Args:
        library: a GEMM library built for ``target`` (``C = A @ B``, float arrays ``[n, n]``).
        gemm: the workload (``n``, ``dtype``, thread pool).
        target: the target it was built for.
        tracker: the session's key; ``tracker.serial`` names the device.
        func_name: the library's GEMM function.

    Returns:
        The largest ``|C - A @ B|``.

    Raises:
        CompileError: C differs from numpy beyond the dtype's tolerance.
        SessionError, TrackerUnreachable: the session or the run failed.
    """
    import tvm

    # The gemm job's inputs and tolerances (farm.jobs.gemm.load_gemm), so both check alike.
    from farm.jobs.gemm import _TOLERANCE, _random_inputs
    from farm.jobs.session import apply_thread_pool, open_session, upload_and_load
    from farm.jobs.targets import runtime_device_name

    remote = open_session(tracker)
    serial = tracker.serial or f"key:{tracker.key}"
    device = runtime_device_name(target)
    if device == "cpu":
        apply_thread_pool(remote, gemm.threads, tracker)
    module = upload_and_load(remote, library, f"checked-{library.name}", tracker)
    a_np, b_np = _random_inputs(gemm.n, gemm.dtype, seed=0)
    try:
        dev = remote.device(device, 0)
        c = tvm.runtime.tensor(np.zeros((gemm.n, gemm.n), gemm.dtype), dev)
        module[func_name](tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev), c)
        c_np = c.numpy().astype("float64")
    except (RuntimeError, OSError) as exc:
        raise SessionError(serial, f"gemm run failed: {exc}") from exc
    expected = a_np.astype("float64") @ b_np.astype("float64")
    max_abs_err = float(np.max(np.abs(c_np - expected)))
    rtol, atol = _TOLERANCE.get(gemm.dtype, (0.0, 0.0))
    if not np.allclose(c_np, expected, rtol=rtol, atol=atol):
        raise CompileError(f"gemm n={gemm.n} dtype={gemm.dtype}",
                           f"{library.name} differs from numpy on {serial}: "
                           f"max |error| {max_abs_err:g}")
    return max_abs_err
