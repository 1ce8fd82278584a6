"""GEMM GFLOPS on a real NVIDIA GPU: locally, through farm's GPU path, and by a hand script.

Run on a GPU host with TVM (CUDA on, as the PyPI apache-tvm 0.27 wheel is) and
``nvidia-ml-py``. It measures the seeds' GEMM (``--n`` square, float32) with the
plain ``bn x bn`` thread-block schedule (:func:`farm.jobs.gemm.schedule_gpu`):

a. **local**: farm's build (:func:`farm.jobs.gemm.build_gemm`) loaded in this
   process and timed on ``cuda(0)``;
b. **farm**: farm's tracker (:class:`farm.tvm.tracker.TrackerProcess`), the GPU
   controller's RPC server, :mod:`farm.gpu.server` (:class:`farm.controllers.gpu.GpuController`,
   target from its ``compile_target``), and the GEMM job code
   (:func:`farm.jobs.gemm.run_gemm`);
c. **hand**: ``bench/gpu_tracker_script.py``, which uses no farm code, with
   ``--no-fork`` and, to show the fork failure farm avoids, without.

It records NVML readings while idle and under (a)'s load for the replay
fixtures (``tests/fixtures/nvml``) and prints a table last.

Reproduce::

    python bench/bench_gpu_gemm.py --n 1024 --bn 16 --out /tmp/gpu-bench
    python bench/bench_gpu_gemm.py --steps model,tune --tune-trials 16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from farm import composition
from farm.clock import wait_until
from farm.config import GpuSettings, Settings, TrackerSettings
from farm.controllers.gpu import GpuController
from farm.gpu.nvml import PynvmlReader, parse, record
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import build_gemm, gemm_flop, run_gemm
from farm.jobs.params import DeviceKind, GemmParams, TimingParams, TrackerParams
from farm.procs import group_alive
from farm.tvm.tracker import TrackerProcess, summary

HERE = Path(__file__).resolve().parent


def local_run(params: GemmParams, target: dict[str, Any], cache: CompileCache) -> dict[str, Any]:
    """(a): farm's library loaded here and timed on cuda(0)."""
    import tvm

    lib = tvm.runtime.load_module(str(build_gemm(params, target, cache)))
    dev = tvm.cuda(0)
    rng = np.random.default_rng(2)
    a_np = rng.random((params.n, params.n), dtype=np.float32)
    b_np = rng.random((params.n, params.n), dtype=np.float32)
    a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
    c = tvm.runtime.tensor(np.full((params.n, params.n), np.nan, np.float32), dev)
    lib["gemm"](a, b, c)
    ref = a_np.astype(np.float64) @ b_np.astype(np.float64)
    rel_err = float(np.linalg.norm(c.numpy() - ref) / np.linalg.norm(ref))
    t = params.timing
    timer = lib.time_evaluator("gemm", dev, number=t.number, repeat=t.repeat,
                               min_repeat_ms=t.min_repeat_ms)
    samples = [float(s) for s in timer(a, b, c).results]
    return {"samples_s": samples, "rel_err": rel_err}


@dataclass
class ServedGpu:
    """The first GPU's rpc_server, registered at a tracker of its own."""

    ctrl: GpuController
    serial: str
    facts: dict[str, Any]
    target: dict[str, Any]
    track: TrackerParams
    register_s: float


@contextlib.contextmanager
def served_gpu(out: Path) -> Iterator[ServedGpu]:
    """A tracker and the controller's server of the first GPU, waited until it registers.

    The server's log goes under ``out``; the server and the tracker stop on exit.
    """
    with TrackerProcess.start() as tracker:
        settings = Settings(tracker=TrackerSettings(host=tracker.host, port=tracker.port),
                            gpu=GpuSettings(enabled=True))
        ctrl = GpuController(settings, PynvmlReader(), log_dir=out)
        serial = ctrl.discover()[0].serial
        facts = ctrl.facts(serial)
        target = ctrl.compile_target(facts, "cuda").target
        key = ctrl.tracker_key(serial)
        started = time.monotonic()
        ctrl.start_server(serial)
        try:
            wait_until(lambda: summary(tracker.host, tracker.port).queue(key).free > 0, 60,
                       f"{key} registered")
            yield ServedGpu(ctrl, serial, facts, target,
                            TrackerParams(tracker.host, tracker.port, key, serial=serial),
                            time.monotonic() - started)
        finally:
            ctrl.stop_server(serial)


def farm_run(params: GemmParams, cache: CompileCache, out: Path) -> dict[str, Any]:
    """(b): tracker + the controller's server + the GEMM job code."""
    result: dict[str, Any] = {}
    with served_gpu(out) as gpu:
        ctrl, serial = gpu.ctrl, gpu.serial
        result["register_s"] = gpu.register_s
        result |= {"serial": serial, "key": gpu.track.key, "facts": gpu.facts,
                   "target": gpu.target}
        result["gate_before"] = ctrl.gating_reading(serial, datetime.now(UTC)).thermal_status
        gemm = run_gemm(params, gpu.target, gpu.track, cache)
        result["samples_s"] = gemm.samples_s
        result["max_abs_err"] = gemm.max_abs_err
        result["gate_after"] = ctrl.gating_reading(serial, datetime.now(UTC)).thermal_status
        health = ctrl.read_health(serial, datetime.now(UTC), registered=True)
        result["health"] = {"adb_state": health.adb_state, "app_running": health.app_running,
                            "thermal_status": health.thermal_status}
        pid = ctrl.server_pid(serial)
        ctrl.stop_server(serial)
        result["server_group_gone_after_stop"] = pid is not None and not group_alive(pid)
    return result


def tune_run(params: GemmParams, trials: int, out: Path) -> dict[str, Any]:
    """MetaSchedule on target cuda through farm's path: ``trials`` trials, then tuned vs untuned."""
    from dataclasses import asdict

    from farm.jobs.params import TuneParams
    from farm.tuning import compare_tuned, tune_gemm

    with served_gpu(out) as gpu:
        tune = TuneParams(gemm=params, trials=trials, work_dir=out / "tune",
                          trials_per_iter=min(trials, 16), builder_workers=8,
                          timing=TimingParams(number=10, repeat=3, min_repeat_ms=0))
        result = tune_gemm(tune, gpu.target, gpu.track)
        comparison = compare_tuned(tune, gpu.target, gpu.track, result)
        return {"tune": asdict(result), "comparison": asdict(comparison)}


def hand_run(n: int, bn: int, arch: str, fork: bool) -> dict[str, Any]:
    """(c): the hand-written script, in its own process."""
    argv = [sys.executable, str(HERE / "gpu_tracker_script.py"), "--n", str(n), "--bn", str(bn),
            "--arch", arch]
    proc = subprocess.run([*argv, "--fork"] if fork else argv, capture_output=True, text=True,
                          timeout=240, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line.removeprefix("RESULT ")))
    return {"error": f"exit {proc.returncode}: {proc.stderr[-800:]}"}


def gflops(n: int, samples: list[float]) -> tuple[float, float]:
    """(mean, median) GFLOPS of the samples (seconds per run)."""
    flop = gemm_flop(n)
    return flop / float(np.mean(samples)) / 1e9, flop / float(np.median(samples)) / 1e9


def attempt(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run()``, or what it raised: one failed path must not lose the others' figures."""
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 - reported in the table and the JSON
        return {"error": f"{type(exc).__name__}: {str(exc)[-800:]}"}


def print_table(results: dict[str, Any], n: int, bn: int) -> None:
    """The figures of each path, last in the output."""
    print(f"\n{results['device']}; GEMM {n}^3 float32, {bn}x{bn} thread blocks")
    print(f"{'path':<10} {'GFLOPS mean':>12} {'median':>10}  note")
    notes = ("rel_err", "max_abs_err", "register_s", "gate_before", "gate_after",
             "server_group_gone_after_stop")
    for name in ("local", "farm", "hand", "hand_fork"):
        res = results[name]
        if "samples_s" in res:
            mean, median = gflops(n, res["samples_s"])
            note = {k: v for k, v in res.items() if k in notes}
            print(f"{name:<10} {mean:>12.1f} {median:>10.1f}  {note}")
        else:
            print(f"{name:<10} {'-':>12} {'-':>10}  {res.get('error', '')[:300]}")


def gemm_paths(args: argparse.Namespace, reader: PynvmlReader, where: str,
               results: dict[str, Any]) -> None:
    """Record NVML idle and under load; time paths a, b and c (and c without --no-fork)."""
    idle = record(reader, 3, f"{where}: idle", lambda: time.sleep(0.5))
    (args.out / "nvml_idle.json").write_text(json.dumps(idle, indent=1))
    params = gemm_params(args)
    cache = CompileCache(args.out / "cache")
    ctrl = GpuController(Settings(gpu=GpuSettings(enabled=True)), reader)
    serial = ctrl.discover()[0].serial
    facts = ctrl.facts(serial)
    target = ctrl.compile_target(facts, "cuda").target

    readings: list[dict[str, Any]] = []
    stop = threading.Event()

    def sample_load() -> None:
        while not stop.wait(0.4):
            readings.append(reader.read())

    sampler = threading.Thread(target=sample_load)
    sampler.start()
    try:
        results["local"] = attempt(lambda: local_run(params, target, cache))
    finally:
        stop.set()
        sampler.join()
    load = {"source": f"{where}: during the local {args.n}^3 float32 GEMM timing loop",
            "readings": readings[-6:] or [reader.read()]}
    (args.out / "nvml_load.json").write_text(json.dumps(load, indent=1))
    arch = str(facts["arch"])
    for name, run in (("farm", lambda: farm_run(params, cache, args.out)),
                      ("hand", lambda: hand_run(args.n, args.bn, arch, fork=False)),
                      ("hand_fork", lambda: hand_run(args.n, args.bn, arch, fork=True))):
        results[name] = attempt(run)
        print(name, "done", flush=True)
        (args.out / "gpu_gemm.json").write_text(json.dumps(results, indent=1, default=str))
    print_table(results, args.n, args.bn)


def model_run(out: Path) -> dict[str, Any]:
    """farm's model job code on target cuda: the demo CNN, checked against onnxruntime."""
    from farm.demo_model import write_small_cnn
    from farm.jobs.model import run_model
    from farm.jobs.params import ModelParams

    with served_gpu(out) as gpu:
        params = ModelParams(model_path=write_small_cnn(out / "demo_cnn.onnx"),
                             device=DeviceKind.CUDA,
                             timing=TimingParams(number=100, repeat=10, min_repeat_ms=0))
        result = run_model(params, gpu.target, gpu.track, CompileCache(out / "cache"))
        return {"mean_s": result.mean_s, "samples_s": result.samples_s,
                "max_abs_err": result.max_abs_err, "inputs": str(result.inputs)}


def gemm_params(args: argparse.Namespace) -> GemmParams:
    """The GEMM of every path: cuda, ``bn x bn`` blocks, 10 samples of 50 runs, >= 200 ms each."""
    timing = TimingParams(number=50, repeat=10, min_repeat_ms=200)
    return GemmParams(n=args.n, bn=args.bn, device=DeviceKind.CUDA, timing=timing)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--bn", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp()))
    parser.add_argument("--steps", default="gemm",
                        help="comma-separated: gemm (paths a-c), model (the demo CNN on cuda "
                             "through farm), tune (MetaSchedule on cuda, then tuned vs the "
                             "thread-block schedule)")
    parser.add_argument("--tune-trials", type=int, default=16)
    args = parser.parse_args()
    steps = set(args.steps.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    reader = PynvmlReader()
    machine = parse(reader.read())[0]
    where = (f"{machine.name}, driver {machine.driver_version}, CUDA {machine.cuda_version}, "
             f"recorded by bench/bench_gpu_gemm.py on {datetime.now(UTC):%Y-%m-%d}")
    results: dict[str, Any] = {"device": where}
    if "gemm" in steps:
        gemm_paths(args, reader, where, results)
    if "model" in steps:
        results["model"] = attempt(lambda: model_run(args.out))
        print("model", {k: v for k, v in results["model"].items() if k != "samples_s"})
        (args.out / "gpu_gemm.json").write_text(json.dumps(results, indent=1, default=str))
    if "tune" in steps:
        results["tune"] = attempt(lambda: tune_run(gemm_params(args), args.tune_trials, args.out))
        comparison = results["tune"].get("comparison", results["tune"])
        print("tune", {k: v for k, v in comparison.items() if "samples" not in k})
        (args.out / "gpu_gemm.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
