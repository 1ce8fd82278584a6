"""A tune on a GPU host through the queue: farmd serves the GPU, ``farmctl enqueue tune`` tunes it.

Issue 23 asks that a GPU host tunes the way a phone does: queued with
``farmctl enqueue tune --kind gpu``, run by farmd's dispatcher, its key served
through the GPU controller (:mod:`farm.gpu.server`), not by a script that
drives a controller itself (``bench/bench_gpu_gemm.py --steps tune`` does that).

It starts a real ``farmd`` (its own tracker, ``[gpu] enabled``, no API, no
phones) on a temporary data folder, waits until ``farmctl devices`` lists a GPU
as ready, then for each step enqueues a tune, waits for it and prints
``farmctl job``: a GEMM tune on ``cuda`` and, with ``--model``, the model's
tasks on ``cuda``. farmd is stopped with SIGTERM at the end (its process group
with it; a killed bench takes farmd along, :func:`farm.procs.tied_to_parent`).

Needs an NVIDIA GPU, NVML (``pip install 'farm[gpu]'``) and a TVM with CUDA;
measured through the ``device`` tool (docs/benchmarks.md, "GPU hosts").

Reproduce::

    python bench/bench_gpu_farmd_tune.py --out /tmp/gpu-tune --n 1024 --trials 32 \
        --model /tmp/zoo/resnet18.onnx --input-shape x=1,3,112,112 \
        --model-trials 64 --model-for-s 300
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from farm.clock import wait_until
from farm.netaddr import free_port
from farm.procs import spawn, tied_to_parent

READY_S = 180.0


def write_config(out: Path) -> Path:
    """farmd's TOML for the bench: data under ``out``, free loopback ports, GPUs on."""
    data_dir = out / "farm"
    data_dir.mkdir(parents=True, exist_ok=True)
    config = out / "farm.toml"
    config.write_text(
        f'data_dir = "{data_dir}"\nlog_level = "info"\n\n'
        f"[adb]\nport = {free_port()}\n\n"
        f"[tracker]\nport = {free_port()}\n\n"
        "[metrics]\nenabled = false\n\n[api]\nenabled = false\n\n"
        "[gpu]\nenabled = true\n",
        encoding="utf-8")
    return config


def farmctl(config: Path, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``farmctl --config CONFIG ARGS...`` in a subprocess, as a user types it."""
    return subprocess.run([sys.executable, "-m", "farm.cli.main", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def ready_gpus(config: Path) -> list[dict[str, Any]]:
    """The ready devices of kind gpu that ``farmctl devices --json`` lists."""
    listed = farmctl(config, "devices", "--json")
    if listed.returncode != 0:
        return []
    return [d for d in json.loads(listed.stdout)
            if d.get("kind") == "gpu" and d.get("state") == "ready"]


def tune(config: Path, label: str, args: list[str], timeout_s: float) -> dict[str, Any]:
    """Enqueue one tune, wait for it, print and return its job as JSON."""
    enqueued = farmctl(config, "enqueue", "tune", "--kind", "gpu", "--target", "cuda",
                       *args, "--json")
    if enqueued.returncode != 0:
        raise SystemExit(f"{label}: enqueue failed: {enqueued.stderr.strip()}")
    job_id = str(json.loads(enqueued.stdout)["id"])
    start = time.monotonic()
    waited = farmctl(config, "wait", job_id, "--timeout", str(timeout_s),
                     timeout_s=timeout_s + 30)
    wall_s = time.monotonic() - start
    shown = farmctl(config, "job", job_id)
    print(f"== {label}: job {job_id}, wait exit {waited.returncode}, {wall_s:.1f} s "
          f"from enqueue to end", flush=True)
    print(shown.stdout, shown.stderr, flush=True)
    job = farmctl(config, "job", job_id, "--json")
    return {"label": label, "job": job_id, "wait_rc": waited.returncode, "wall_s": wall_s,
            "job_json": job.stdout}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="data folder, logs, results")
    parser.add_argument("--n", type=int, default=1024, help="GEMM side N")
    parser.add_argument("--trials", type=int, default=32,
                        help="GEMM tune's measured trials (0: no GEMM tune)")
    parser.add_argument("--model", type=Path, help="an ONNX model to tune on cuda too")
    parser.add_argument("--input-shape", action="append", default=[],
                        help="NAME=D1,D2,... of the model (repeatable)")
    parser.add_argument("--model-trials", type=int, default=64)
    parser.add_argument("--model-for-s", type=int, default=300)
    parser.add_argument("--timeout-s", type=float, default=480.0, help="per tune")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    config = write_config(args.out)
    log_path = args.out / "farmd.log"
    with log_path.open("ab") as log:
        farmd = spawn(tied_to_parent([sys.executable, "-c", "from farm.daemon import main; main()",
                                      "--config", str(config), "--json-logs"]),
                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    runs: list[dict[str, Any]] = []
    try:
        start = time.monotonic()
        wait_until(lambda: bool(ready_gpus(config)) or farmd.poll() is not None, READY_S,
                   "a GPU ready in farmd")
        if farmd.poll() is not None:
            raise SystemExit(f"farmd exited {farmd.returncode}; see {log_path}")
        [gpu, *_] = ready_gpus(config)
        print(f"GPU {gpu.get('serial')} ready {time.monotonic() - start:.1f} s after farmd's "
              f"start: {json.dumps(gpu.get('facts', {}))}", flush=True)
        if args.trials > 0:
            runs.append(tune(config, f"gemm {args.n} float32", [
                "--n", str(args.n), "--trials", str(args.trials)], args.timeout_s))
        if args.model:
            runs.append(tune(config, f"model {args.model.name}", [
                "--model", str(args.model), *(f"--input-shape={s}" for s in args.input_shape),
                "--trials", str(args.model_trials),
                "--for", str(args.model_for_s)], args.timeout_s))
    finally:
        farmd.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            farmd.wait(timeout=60)
        if farmd.poll() is None:
            farmd.kill()
        (args.out / "runs.json").write_text(json.dumps(runs, indent=2), encoding="utf-8")
    return 0 if runs and all(r["wait_rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
