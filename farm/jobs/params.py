"""Plain parameters of the benchmark jobs, built by the spec layer.

The job functions in this package take these frozen dataclasses and nothing from
the queue, so ``farm/queue/spec.py`` can change its pydantic models freely: it
only has to fill these in. Every field carries its unit in its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any


class DeviceKind(str, Enum):
    """Which processor of the device runs the kernel (``cuda``: an NVIDIA GPU host's)."""

    CPU = "cpu"
    OPENCL = "opencl"
    VULKAN = "vulkan"
    CUDA = "cuda"


#: Threads one GPU work-group may hold on every phone GPU the farm targets (many
#: Mali GPUs allow no more): the limit assumed for a phone whose own limit was
#: not read (``DeviceFacts.gpu_limits``). The GPU GEMM runs ``bn * bn`` threads
#: per work-group, so ``bn`` is at most 16 on such a phone.
MAX_GPU_WORK_GROUP_THREADS = 256


@dataclass(frozen=True)
class DeviceFacts:
    """What a phone tells us that decides its compile target.

    Attributes:
        abi: first entry of ``ro.product.cpu.abilist``, e.g. ``"arm64-v8a"``.
        gpu: GL renderer or vendor string, e.g. ``"Mali-G710"`` or ``"Adreno (TM) 740"``;
            empty when unknown.
        has_opencl: the phone ships a usable ``libOpenCL.so``.
        has_vulkan: the phone supports Vulkan compute.
        cpu_features: LLVM ``-mattr`` features known for the CPU, e.g. ``("+neon", "+dotprod")``.
        num_cores: CPU cores the kernels may use (``num-cores`` of the target), 0 if unknown.
        gpu_limits: GPU API (``"opencl"``, ``"vulkan"``) -> limit name -> value, as read
            from the phone (``farm.device.facts.gpu_limits_from``), e.g.
            ``{"opencl": {"max_threads_per_block": 1024}}``; empty when not read.
        host_runtime: the phone's RPC server runs this host's code (farm's
            virtual phones say so with ``ro.farm.host_runtime=1``): modules are
            built for the host, whatever the ABI.
    """

    abi: str
    gpu: str = ""
    has_opencl: bool = False
    has_vulkan: bool = False
    cpu_features: tuple[str, ...] = ()
    num_cores: int = 0
    gpu_limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    host_runtime: bool = False


@dataclass(frozen=True)
class TrackerParams:
    """Where the RPC session to the phone comes from.

    Attributes:
        host: tracker address, e.g. ``"127.0.0.1"``.
        port: tracker port.
        key: tracker key the phone's RPC server registered with.
        session_timeout_s: lifetime of one RPC session in whole seconds (the TVM
            Android app reads ``-timeout=`` as an integer, so this is an int).
        serial: the phone this attempt runs on, used only to name it in errors.
        connect_timeout_s: how long to wait for the tracker to hand out a session.
    """

    host: str
    port: int
    key: str
    session_timeout_s: int = 600
    serial: str = ""
    connect_timeout_s: float = 60.0


@dataclass(frozen=True)
class TimingParams:
    """Arguments of TVM's ``time_evaluator``.

    Attributes:
        number: runs averaged into one sample.
        repeat: samples taken; each is kept as a raw sample in seconds.
        min_repeat_ms: lower bound on one sample's duration; TVM raises ``number``
            until a sample lasts this long.
    """

    number: int = 10
    repeat: int = 5
    min_repeat_ms: int = 100


@dataclass(frozen=True)
class ThreadPoolParams:
    """TVM runtime thread pool settings applied on the phone before timing.

    ``runtime.config_threadpool(affinity_mode, num_threads)``; the modes are
    ``ThreadGroup::AffinityMode`` of apache/tvm ``src/runtime/threading_backend.h``:
    1 = big cores, -1 = little cores, 0 = no preference.

    Attributes:
        affinity_mode: 1 (big), -1 (little) or 0 (default).
        num_threads: threads to use; 0 means one per core of the chosen kind.
    """

    affinity_mode: int = 1
    num_threads: int = 0


class GemmSchedule(str, Enum):
    """How the GEMM's loops are scheduled (:mod:`farm.jobs.gemm`)."""

    TILED = "tiled"  # farm's schedule: bn x bn blocks
    NAIVE = "naive"  # the plain te.compute GEMM, unscheduled (CPU only)


@dataclass(frozen=True)
class GemmParams:
    """The seeds' GEMM kernel ``C[N, N] = A[N, N] @ B[N, N]``.

    Attributes:
        n: matrix side N.
        dtype: element type, ``"float32"``, ``"float16"`` or ``"int32"`` style TVM dtype.
        bn: block (tile) size; rows and columns are split by it (unused when naive).
        device: processor that runs the kernel.
        timing: time_evaluator arguments.
        threads: thread pool settings (CPU only).
        schedule: tiled (farm's) or naive (untiled, CPU only).
    """

    n: int
    dtype: str = "float32"
    bn: int = 32
    device: DeviceKind = DeviceKind.CPU
    timing: TimingParams = field(default_factory=TimingParams)
    threads: ThreadPoolParams = field(default_factory=ThreadPoolParams)
    schedule: GemmSchedule = GemmSchedule.TILED


@dataclass(frozen=True)
class ModelParams:
    """An ONNX model benchmark.

    Attributes:
        model_path: the ``.onnx`` file on the host.
        input_shapes: input name -> shape, overriding (or filling in) the model's;
            ``None`` takes every shape from the model.
        device: processor that runs the model.
        rtol: relative tolerance against onnxruntime's output.
        atol: absolute tolerance against onnxruntime's output.
        seed: seed of the random input.
        timing: time_evaluator arguments.
        threads: thread pool settings (CPU only).
        database_dir: a MetaSchedule JSON database folder (``database_workload.json``
            and ``database_tuning_record.json``, e.g. a finished tuning job's work
            folder) whose best schedules are applied; ``None`` compiles untuned.
        name: the user's file name (``model_path`` may be the store's
            ``<sha256>.onnx``); errors and results name this.
        profile: also time each kernel of the model (:mod:`farm.jobs.profile`).
        inputs: the user's inputs, ONNX input name -> array of the model's shape
            and dtype (:func:`farm.jobs.model_io.read_inputs`); None: seeded random.
    """

    model_path: Path
    input_shapes: dict[str, tuple[int, ...]] | None = None
    device: DeviceKind = DeviceKind.CPU
    rtol: float = 1e-4
    atol: float = 1e-5
    seed: int = 0
    timing: TimingParams = field(default_factory=TimingParams)
    threads: ThreadPoolParams = field(default_factory=ThreadPoolParams)
    database_dir: Path | None = None
    name: str | None = None
    profile: bool = False
    inputs: Mapping[str, Any] | None = None

    @property
    def shown_name(self) -> str:
        """The model as people read it: ``name``, else the file's."""
        return self.name or self.model_path.name


@dataclass(frozen=True)
class TuneParams:
    """A MetaSchedule tuning job: the GEMM workload or an ONNX model's tasks.

    Attributes:
        gemm: the GEMM workload (its ``bn`` is the untuned baseline's block size);
            None when tuning a model.
        trials: measured trials wanted in total, counting those of earlier runs.
        work_dir: folder holding ``database_workload.json`` and
            ``database_tuning_record.json``; reusing it resumes.
        trials_per_iter: candidates built and measured per search round.
        builder_timeout_s: per-candidate build timeout; the 30 s default fails
            every build on a 2-core host.
        builder_workers: parallel build processes.
        runner_workers: parallel measurements (one per phone serving the key).
        max_rounds: tuning rounds allowed (per task) to make up for failed
            measurements (an app crash turns a round's trials into errors).
        seed: search seed, for reproducible runs.
        timing: how each candidate and the final comparison are timed.
        model: the ONNX model whose tasks are tuned; None when tuning the GEMM.
        trials_per_task: measured trials per task at most; None: no cap
            (``trials`` is shared by :func:`farm.tuning.search.plan_trials`).
        max_tasks: tune only this many tasks, the heaviest first; None: all.
        for_s: tuning seconds allowed over all attempts (a model's time budget);
            None: only ``trials`` bounds the run.
        verify_rounds: measurements of each task's pick and of its default
            schedule, interleaved, before the tuned build
            (:mod:`farm.tuning.verify`); 0: no check (emulated devices).
        pipeline: build each batch in the background while the next is
            searched, the runner waiting for each library
            (:mod:`farm.tuning.builder`); False: a batch is built before
            the next search starts (the config's ``jobs.tune_pipeline``).
        keep_sessions: each runner worker keeps its RPC session for its next
            candidate (:mod:`farm.tuning.kept_session`); False: a session per
            candidate, MetaSchedule's way.
    """

    gemm: GemmParams | None
    trials: int
    work_dir: Path
    trials_per_iter: int = 8
    builder_timeout_s: float = 600.0
    builder_workers: int = 1
    runner_workers: int = 1
    max_rounds: int = 4
    seed: int | None = None
    timing: TimingParams = field(default_factory=lambda: TimingParams(3, 3, 20))
    model: ModelParams | None = None
    trials_per_task: int | None = None
    max_tasks: int | None = None
    for_s: float | None = None
    verify_rounds: int = 3
    pipeline: bool = False
    keep_sessions: bool = True
