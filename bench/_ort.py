"""onnxruntime as every bench compares with it (import as ``from _ort import ort_session``).

One session at 1 intra-op and 1 inter-op thread on the CPU provider (the
phone-side figure it stands against runs TVM at 1 thread too), and one timer
of it, so that ``bench_zoo``, ``bench_ab_untuned`` and ``bench_cpu_defaults``
time onnxruntime alike; they interleave it with the builds they compare
through :func:`farm.sampling.interleaved_rounds`. The scripts run as
``python bench/<script>.py``, so ``bench/`` is on ``sys.path``.

:func:`ort_bound` binds a session's inputs and outputs once
(onnxruntime's IOBinding), so that :func:`ort_sample_s` times the run alone:
TVM's ``time_evaluator``, which farm's latencies come from, also runs on
arrays already on the device and keeps the outputs there.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["OrtBound", "ort_bound", "ort_sample_s", "ort_session"]


def ort_session(path: Path) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``path``, 1 thread, CPU provider."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class OrtBound:
    """A session with its inputs and outputs bound (from :func:`ort_bound`).

    Attributes:
        session: the ``InferenceSession``.
        binding: its ``IOBinding``: ``inputs`` bound with ``bind_cpu_input``, each
            output bound with ``bind_output`` to its buffer in ``outputs``.
        inputs: input name -> the array the runs read (the binding points into it).
        outputs: output name -> the array each run writes into.
    """

    session: Any
    binding: Any
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]


def ort_bound(session: Any, feeds: Mapping[str, np.ndarray]) -> OrtBound:
    """Bind ``feeds`` and preallocated outputs to ``session`` (one unbound run finds their shapes).

    onnxruntime's IOBinding (``session.io_binding()``, ``bind_cpu_input``,
    ``bind_output`` with a buffer, ``run_with_iobinding``): a run then neither
    copies its inputs in nor allocates and returns its outputs.
    """
    inputs = {name: np.ascontiguousarray(array) for name, array in feeds.items()}
    first = session.run(None, inputs)
    binding = session.io_binding()
    for name, array in inputs.items():
        binding.bind_cpu_input(name, array)
    outputs = {}
    for meta, value in zip(session.get_outputs(), first, strict=True):
        out = np.empty_like(np.asarray(value))
        binding.bind_output(meta.name, "cpu", 0, out.dtype, list(out.shape), out.ctypes.data)
        outputs[meta.name] = out
    return OrtBound(session, binding, inputs, outputs)


def ort_sample_s(session: Any, feeds: Mapping[str, np.ndarray] | OrtBound, *, runs: int = 1,
                 min_repeat_s: float = 0.0) -> float:
    """Seconds per run of ``session``: the mean of at least ``runs`` runs spanning ``min_repeat_s``.

    As TVM's ``time_evaluator`` takes one sample (``number`` runs, repeated
    until ``min_repeat_ms``), so that both sides' samples are alike.

    Args:
        session: from :func:`ort_session`.
        feeds: input name -> array (each run copies them in and returns new
            outputs), or :func:`ort_bound`'s binding (each run is the run alone).
        runs: runs at least.
        min_repeat_s: seconds the runs span at least.
    """
    if isinstance(feeds, OrtBound):
        binding = feeds.binding

        def run() -> None:
            session.run_with_iobinding(binding)
    else:
        arrays = dict(feeds)

        def run() -> None:
            session.run(None, arrays)
    count, start_s = 0, time.perf_counter()
    while count < runs or time.perf_counter() - start_s < min_repeat_s:
        run()
        count += 1
    return (time.perf_counter() - start_s) / count
