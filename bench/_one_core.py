"""One core, one thread: how the in-process benches pin themselves (``from _one_core import ...``).

``bench_cpu_defaults``, ``bench_graphopt`` and ``bench_tile_knobs`` time
builds in their own process against onnxruntime at 1 thread; each pins the
process to one core and TVM's thread pool to one thread before TVM starts
its pool, and builds for the host's CPU as a 1-core virtual phone reports it.
"""

from __future__ import annotations

import os
from typing import Any

from farm.jobs.params import DeviceFacts
from farm.jobs.targets import target_for

__all__ = ["one_core_target"]


def one_core_target(core: int) -> Any:
    """Pin this process to ``core`` and TVM to 1 thread; the host's 1-core ``tvm.target.Target``.

    Call it before TVM's thread pool starts (the first kernel run): the pool
    reads ``TVM_NUM_THREADS`` once.

    Raises:
        OSError: ``core`` is not one of this process's CPUs.
    """
    import tvm

    os.environ["TVM_NUM_THREADS"] = "1"
    os.sched_setaffinity(0, {core})
    return tvm.target.Target(target_for(DeviceFacts(abi="x86_64", host_runtime=True,
                                                    num_cores=1)))
