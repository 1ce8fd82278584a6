"""The ``gemm`` kind: time ``C[n, n] = A[n, n] @ B[n, n]`` on phones' CPU or GPU.

Also the home of :class:`GemmSpec` and the gemm flags, which the ``tune`` kind
reuses for its workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import click
from pydantic import Field, model_validator

from farm.kinds.base import EnqueueCommand, Kind, default_of
from farm.queue.capabilities import Requirements, workload_needs
from farm.queue.spec import FieldError, JobBase, Strict

if TYPE_CHECKING:
    from farm.jobs import params as jp
    from farm.kinds.run import RunContext
    from farm.queue.records import Outcome

__all__ = [
    "DEFAULT_CPU_BN_MAX",
    "DEFAULT_GPU_BN_MAX",
    "GEMM_FLAGS",
    "GEMM_OPTIONS",
    "GPU_WORK_GROUP_MAX",
    "KIND",
    "MAX_NUMBER",
    "MAX_REPEAT",
    "GemmJob",
    "GemmSpec",
    "gemm_params",
]

# No integer dtype: the gemm kernel accumulates in its element type, so an
# int8 sum overflows and could never match numpy.
Dtype = Literal["float32", "float16"]
Target = Literal["cpu", "opencl", "vulkan", "cuda"]
#: ``tiled``: farm's schedule (blocks of ``bn``, vectorised, parallel rows on the
#: CPU; one work-group per block on a GPU). ``naive``: the seeds' plain
#: ``te.compute`` GEMM with no schedule at all, so a figure sits beside one
#: from a hand script that builds the same (CPU only: a GPU kernel needs its
#: loops bound to threads, which is already a schedule).
Schedule = Literal["tiled", "naive"]

#: Threads in one GPU work-group at most on any phone GPU: the largest
#: ``CL_DEVICE_MAX_WORK_GROUP_SIZE`` / Vulkan ``maxComputeWorkGroupInvocations``
#: phone GPUs report (Adreno 6xx/7xx: 1024; Mali: 256 to 1024; see the reports
#: on vulkan.gpuinfo.org and opencl.gpuinfo.org). The spec only refuses what no
#: phone can run; whether a given phone's GPU allows ``bn * bn`` is the
#: scheduler's match against ``facts["gpu_limits"]`` read from the phone.
GPU_WORK_GROUP_MAX = 1024
#: Largest default block on a GPU: ``16 * 16 = 256`` threads fit every phone GPU.
DEFAULT_GPU_BN_MAX = 16
#: Largest default block on the CPU.
DEFAULT_CPU_BN_MAX = 32
#: ``number`` (runs per timed sample) at most.
MAX_NUMBER = 100_000
#: ``repeat`` (timed samples per run) at most.
MAX_REPEAT = 10_000


class GemmSpec(Strict):
    """``C[n, n] = A[n, n] @ B[n, n]``, tiled in ``bn x bn`` blocks (or ``naive``: untiled).

    On a GPU target one work-group of ``bn * bn`` threads computes a block, so
    there ``bn * bn`` may not exceed :data:`GPU_WORK_GROUP_MAX` (1024). A missing
    ``bn`` becomes the largest power of two up to 32 (16 on a GPU, which every
    phone GPU allows) that divides ``n``.
    """

    n: int = Field(ge=16, le=8192)
    dtype: Dtype = "float32"
    bn: int | None = Field(default=None, ge=1, le=8192)
    target: Target = "cpu"
    number: int = Field(default=10, ge=1, le=MAX_NUMBER)  # runs per timed repeat (TVM ``number``)
    repeat: int = Field(default=3, ge=1, le=MAX_REPEAT)  # timed repeats, one sample each
    min_repeat_ms: int = Field(default=0, ge=0, le=60_000)
    schedule: Schedule = "tiled"

    @model_validator(mode="after")
    def _block_fits(self) -> GemmSpec:
        gpu = self.target != "cpu"
        if gpu and self.schedule == "naive":
            raise FieldError(
                "schedule",
                f"the naive schedule runs on the cpu only; {self.target} needs --schedule tiled",
            )
        if self.bn is None:
            largest = DEFAULT_GPU_BN_MAX if gpu else DEFAULT_CPU_BN_MAX
            bn = next(b for b in (32, 16, 8, 4, 2, 1) if b <= largest and self.n % b == 0)
            object.__setattr__(self, "bn", bn)
        elif self.bn > self.n or self.n % self.bn:
            raise FieldError("bn", f"block size {self.bn} does not divide n={self.n}")
        elif gpu and self.bn * self.bn > GPU_WORK_GROUP_MAX:
            raise FieldError(
                "bn",
                f"block size {self.bn} needs {self.bn**2} threads per work-group, more than "
                f"any phone GPU allows ({GPU_WORK_GROUP_MAX}); use at most 32 on {self.target}",
            )
        return self

    @property
    def work_group_threads(self) -> int:
        """Threads per GPU work-group this gemm needs (``bn * bn``); 0 on the CPU."""
        return 0 if self.target == "cpu" else (self.bn or 0) ** 2


class GemmJob(JobBase):
    """Time a gemm on one or more phones."""

    kind: Literal["gemm"]
    params: GemmSpec


def gemm_params(p: GemmSpec) -> jp.GemmParams:
    """The jobs' plain parameters of a validated gemm."""
    from farm.jobs import params as jp

    return jp.GemmParams(
        n=p.n, dtype=p.dtype, bn=p.bn or 1, device=jp.DeviceKind(p.target),
        timing=jp.TimingParams(p.number, p.repeat, p.min_repeat_ms),
        schedule=jp.GemmSchedule(p.schedule),
    )


def run(ctx: RunContext, spec: GemmJob) -> Outcome:
    """Time the gemm ``repetitions`` times on each phone; GFLOPS per phone, never pooled."""
    from farm.jobs.gemm import gemm_flop, run_gemm
    from farm.kinds.measure import measure, summary_of_runs
    from farm.sampling import SamplingRule

    params = gemm_params(spec.params)
    sampling = SamplingRule.of(ctx.settings.results)
    measured = measure(
        ctx, spec.repetitions, params.device,
        lambda tracker, target, rep: run_gemm(params, target, tracker, ctx.cache, seed=rep,
                                              sampling=sampling),
        lambda result: {"gflops": result.gflops},
    )
    summary = summary_of_runs("gemm", measured)
    summary.update(n=params.n, dtype=params.dtype, bn=params.bn, device=params.device.value,
                   schedule=params.schedule.value)
    flop = gemm_flop(params.n)
    for figures in summary["per_serial"].values():
        figures["gflops"] = flop / figures["mean_s"] / 1e9
    summary["gflops"] = None if summary["mean_s"] is None else flop / summary["mean_s"] / 1e9
    return measured.outcome(summary)


def workload(spec: Mapping[str, Any]) -> str:
    """``gemm n=512 float32``; ``... opencl`` off the CPU, ``... naive`` untiled.

    The defaults (cpu, tiled) are left out, so labels of jobs stored before
    ``schedule`` existed do not change.
    """
    params = spec.get("params") or {}
    label = f"gemm n={params.get('n')} {params.get('dtype', 'float32')}"
    target = params.get("target", "cpu")
    if target != "cpu":
        label += f" {target}"
    if params.get("schedule", "tiled") != "tiled":
        label += f" {params['schedule']}"
    return label


def needs(spec: Mapping[str, Any]) -> Requirements:
    """A stored gemm spec's needs: its ``params.target``, and ``bn * bn`` threads on a GPU."""
    return workload_needs(spec.get("params"))


#: The flags that set a gemm, shared with ``tune``: parameter name -> flag.
GEMM_FLAGS = {"n": "--n", "dtype": "--dtype", "bn": "--bn", "target": "--target"}
GEMM_OPTIONS = [
    click.option("--n", type=int, help="Matrix side N (C[N,N] = A[N,N] @ B[N,N]); required."),
    click.option("--dtype", help=f"float32 or float16. {default_of(GemmSpec, 'dtype')}"),
    click.option("--bn", type=int,
                 help="Block (tile) size; must divide N.  [default: the largest power of two "
                      f"up to {DEFAULT_CPU_BN_MAX} dividing N, {DEFAULT_GPU_BN_MAX} on a GPU]"),
    click.option("--target", type=click.Choice(["cpu", "opencl", "vulkan", "cuda"]),
                 help=f"Processor. {default_of(GemmSpec, 'target')}"),
]
#: Timing flags shared with ``model``: parameter name -> flag.
TIMING_FLAGS = {"number": "--number", "repeat": "--samples"}
TIMING_OPTIONS = [
    click.option("--number", type=int,
                 help="Runs averaged into one sample (time_evaluator number). "
                      f"{default_of(GemmSpec, 'number')}"),
    click.option("--samples", "repeat", type=int,
                 help="Timed samples per run at least (time_evaluator repeat); farm takes "
                      "more, up to results.max_samples, until the median is known to "
                      "results.target_ci_pct, after a warm-up it discards. "
                      f"{default_of(GemmSpec, 'repeat')}"),
]
_FLAGS = {**GEMM_FLAGS, **TIMING_FLAGS, "min_repeat_ms": "--min-repeat-ms",
          "schedule": "--schedule"}

KIND = Kind(
    name="gemm",
    spec=GemmJob,
    run=run,
    lease_s=lambda jobs: jobs.lease_s,
    timeout_s=lambda jobs: jobs.default_timeout_s,
    enqueue=EnqueueCommand(
        help="Time an N x N GEMM on the phone's CPU or GPU.",
        options=[
            *GEMM_OPTIONS, *TIMING_OPTIONS,
            click.option("--min-repeat-ms", type=int,
                         help="Lower bound on one sample's duration, ms. "
                              f"{default_of(GemmSpec, 'min_repeat_ms')}"),
            click.option("--schedule", type=click.Choice(["tiled", "naive"]),
                         help="tiled: farm's schedule; naive: the plain untiled te.compute "
                              f"GEMM (cpu only). {default_of(GemmSpec, 'schedule')}"),
        ],
        params=lambda values: {name: values[name] for name in _FLAGS},
        flags={f"params.{name}": flag for name, flag in _FLAGS.items()},
    ),
    workload=workload,
    needs=needs,
    fan_out=True,
)
