"""Every zoo model built with farm's default CPU schedules for AArch64, run as AArch64 code.

Reproduce with::

    python bench/bench_aarch64.py                      # every model, small and full, 1 and 8 cores
    python bench/bench_aarch64.py --models resnet18 --sizes small --num-cores 8

It starts a private tracker and one AArch64 virtual board (:mod:`farm.virtual.board`,
``arch="aarch64"``: the board's TVM RPC server is AArch64 code under QEMU user mode,
started over SSH by :class:`farm.controllers.board.BoardController`), then for each zoo
model (:mod:`farm.zoo`, small and full variants) and each ``num-cores`` builds it
with the ``model`` job's code (:func:`farm.jobs.model.run_model`: farm's default
CPU schedules, target ``llvm -mtriple=aarch64-linux-gnu -mattr=+neon
-num-cores=N``, linked by ``aarch64-linux-gnu-g++``), runs it on the board and
checks every output against onnxruntime on the host at the model job's default
tolerance (rtol 1e-3, atol 1e-3). A row says ``match`` with the largest absolute
error, ``MISMATCH`` (the job's CompileError) or ``CRASH`` with the error's first
line. The latency column is the emulator's (one run): it says nothing of an ARM
CPU's speed and is shown only to tell a hang from a slow model.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from farm import composition
from farm.clock import wait_until
from farm.controllers.board import BoardController
from farm.errors import CompileError, FarmError
from farm.jobs.board_targets import board_target
from farm.jobs.cache import CompileCache
from farm.jobs.model import run_model
from farm.jobs.params import ModelParams, TimingParams, TrackerParams
from farm.tvm.tracker import TrackerProcess, summary
from farm.virtual.board_testing import virtual_boards
from farm.zoo import MODELS, write_model

#: The model job's default tolerance (farm.kinds.model.Tolerance).
RTOL = ATOL = 1e-3
REGISTER_DEADLINE_S = 60.0


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--sizes", nargs="+", default=["small", "full"], choices=["small", "full"])
    parser.add_argument("--num-cores", nargs="+", type=int, default=[1, 8])
    return parser.parse_args(argv)


def _one(path: Path, shapes: dict[str, tuple[int, ...]], num_cores: int,
         tracker: TrackerParams, cache: CompileCache) -> tuple[str, str, str]:
    """(verdict, max abs error or why, emulated ms) of one build and run."""
    params = ModelParams(path, shapes, rtol=RTOL, atol=ATOL,
                         timing=TimingParams(number=1, repeat=1, min_repeat_ms=0))
    try:
        result = run_model(params, board_target("aarch64", num_cores), tracker, cache)
    except CompileError as exc:
        verdict = "MISMATCH" if "differ" in str(exc) else "CRASH"
        return verdict, str(exc).splitlines()[0][:120], "-"
    except FarmError as exc:
        return "CRASH", f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}", "-"
    return "match", f"{result.max_abs_err:.1e}", f"{result.mean_s * 1e3:.0f}"


def main(argv: list[str] | None = None) -> int:
    """Run the table (Markdown on stdout, progress on stderr); 1 if any row is not a match."""
    args = _args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-aarch64-"))
    cache = CompileCache(root / "cache")
    rows, failed = [], 0
    with TrackerProcess.start(log_path=root / "tracker.log") as tracker, \
            virtual_boards(1, root / "boards", prefix="va", arch="aarch64") as boards:
        ctl = BoardController([boards[0].settings()], tracker.host, tracker.port)
        name = boards[0].name
        try:
            facts = ctl.facts(name)
            ctl.start_server(name)
            key = ctl.tracker_key(name)
            wait_until(lambda: key in {s.key for s in summary(tracker.host, tracker.port).servers},
                       REGISTER_DEADLINE_S, f"{key} registered")
            params = TrackerParams(host=tracker.host, port=tracker.port, key=key, serial=name,
                                   session_timeout_s=1200, connect_timeout_s=120)
            for size in args.sizes:  # every small model first: a cut-short run still tells
                small = size == "small"
                for model_name in args.models:
                    zoo = MODELS[model_name]
                    path = write_model(zoo, root / "zoo", small=small)
                    shapes = zoo.input_shapes(small=small)
                    for num_cores in args.num_cores:
                        start = time.monotonic()
                        verdict, error, ms = _one(path, shapes, num_cores, params, cache)
                        failed += verdict != "match"
                        row = (f"| {zoo.file_name(small)} | {shapes['x']} | {num_cores} | "
                               f"{verdict} | {error} | {ms} | {time.monotonic() - start:.0f} |")
                        rows.append(row)
                        print(row, file=sys.stderr, flush=True)
        finally:
            ctl.stop_server(name)
            ctl.close()
    print(f"board: {facts['abi']}, emulated={facts['emulated']}, {facts['model']}")
    print("| model | input | num-cores | outputs | max abs err | emulated ms | build+run s |")
    print("|---|---|---:|---|---:|---:|---:|")
    print("\n".join(rows))
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end")
    return 1 if failed else 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
