"""onnxruntime as every bench compares with it (import as ``from _ort import ort_session``).

One session at 1 intra-op and 1 inter-op thread on the CPU provider (the
phone-side figure it stands against runs TVM at 1 thread too), and one timer
of it, so that ``bench_zoo``, ``bench_ab_untuned`` and ``bench_cpu_defaults``
time onnxruntime alike; they interleave it with the builds they compare
through :func:`farm.sampling.interleaved_rounds`. The scripts run as
``python bench/<script>.py``, so ``bench/`` is on ``sys.path``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ort_sample_s", "ort_session"]


def ort_session(path: Path) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``path``, 1 thread, CPU provider."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_sample_s(session: Any, feeds: Mapping[str, np.ndarray], *, runs: int = 1,
                 min_repeat_s: float = 0.0) -> float:
    """Seconds per run of ``session``: the mean of at least ``runs`` runs spanning ``min_repeat_s``.

    As TVM's ``time_evaluator`` takes one sample (``number`` runs, repeated
    until ``min_repeat_ms``), so that both sides' samples are alike.

    Args:
        session: from :func:`ort_session`.
        feeds: input name -> array.
        runs: runs at least.
        min_repeat_s: seconds the runs span at least.
    """
    count, start_s = 0, time.perf_counter()
    while count < runs or time.perf_counter() - start_s < min_repeat_s:
        session.run(None, dict(feeds))
        count += 1
    return (time.perf_counter() - start_s) / count
