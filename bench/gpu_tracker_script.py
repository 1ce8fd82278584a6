"""The seeds' GEMM on a CUDA GPU through a hand-written tracker script: no farm code.

What a user would write without farm: start ``tvm.exec.rpc_tracker`` and
``tvm.exec.rpc_server --tracker ... --key ...``, build the GEMM with a plain
``bn x bn`` thread-block schedule, ``connect_tracker().request(key)``, upload,
check against numpy and ``time_evaluator``. ``bench/bench_gpu_gemm.py`` runs it
beside farm's path so docs/benchmarks.md can set the two figures side by side.

``--fork`` starts the server without ``--no-fork`` to show what farm avoids: a
session forked from a server process fails its first CUDA call.

Reproduce (on a GPU host)::

    python bench/gpu_tracker_script.py --n 1024 --bn 16
    python bench/gpu_tracker_script.py --n 1024 --bn 16 --fork
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import tvm
from tvm import rpc, s_tir, te


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gemm(n: int, bn: int) -> tvm.IRModule:
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    func = te.create_prim_func([a, b, c]).with_attr("global_symbol", "gemm")
    sch = s_tir.Schedule(tvm.IRModule({"gemm": func}))
    sch.work_on("gemm")
    i, j, _ = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, bn])
    jo, ji = sch.split(j, [None, bn])
    sch.reorder(io, jo, ii, ji)
    sch.bind(io, "blockIdx.y")
    sch.bind(jo, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    sch.bind(ji, "threadIdx.x")
    return sch.mod


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--bn", type=int, default=16)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--number", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--fork", action="store_true", help="omit --no-fork")
    args = parser.parse_args()
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host",
                               "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)],
                              start_new_session=True)]
    server = [sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{port}",
              "--key", "hand", "--host", "127.0.0.1"]
    if not args.fork:
        server.append("--no-fork")
    out = {"n": args.n, "bn": args.bn, "fork": args.fork}
    try:
        time.sleep(1.0)  # a hand script's way: no readiness check
        procs.append(subprocess.Popen(server, start_new_session=True))
        tracker = rpc.connect_tracker("127.0.0.1", port)
        for _ in range(100):
            if tracker.summary()["queue_info"].get("hand", {}).get("free", 0):
                break
            time.sleep(0.2)
        target = tvm.target.Target({"kind": "cuda", "arch": args.arch, "host": {"kind": "llvm"}})
        lib = tvm.compile(gemm(args.n, args.bn), target=target)
        path = os.path.join(tempfile.mkdtemp(), "gemm.so")
        lib.export_library(path)
        remote = tracker.request("hand", session_timeout=120)
        remote.upload(path)
        mod = remote.load_module("gemm.so")
        dev = remote.cuda(0)
        rng = np.random.default_rng(1)
        a_np = rng.random((args.n, args.n), dtype=np.float32)
        b_np = rng.random((args.n, args.n), dtype=np.float32)
        a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
        c = tvm.runtime.tensor(np.full((args.n, args.n), np.nan, np.float32), dev)
        mod["gemm"](a, b, c)
        ref = a_np.astype(np.float64) @ b_np.astype(np.float64)
        out["rel_err"] = float(np.linalg.norm(c.numpy() - ref) / np.linalg.norm(ref))
        timer = mod.time_evaluator("gemm", dev, number=args.number, repeat=args.repeat)
        samples = [float(s) for s in timer(a, b, c).results]
        out["samples_s"] = samples
        out["gflops_mean"] = 2 * args.n**3 / float(np.mean(samples)) / 1e9
        out["gflops_median"] = 2 * args.n**3 / float(np.median(samples)) / 1e9
    except Exception as exc:  # noqa: BLE001 - the script reports what failed (see --fork)
        out["error"] = f"{type(exc).__name__}: {str(exc)[-600:]}"
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print("RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
