"""farmd's memory and CPU with 16 idle ready phones, over a minute.

::

    python bench/bench_farmd_idle.py                      # 16 phones, 60 s
    python bench/bench_farmd_idle.py --phones 2 --duration-s 120
    python bench/bench_farmd_idle.py --no-api             # farmd without its HTTP API

Three processes, as on a real host: a private adb server, ``farm-phones serve``
(the 16 virtual phones and their RPC servers) and ``farmd`` itself, started
from a config file like a systemd unit would, with its defaults (health sweep
every 30 s, dispatcher tick every 2 s, metrics on, the HTTP API and dashboard
served unless ``--no-api``). Once every phone is
``ready`` the script samples, once a second for ``--duration-s``, farmd's
resident memory and its CPU time (psutil), alone and with its children (the
tracker and its worker). The phones' own processes are not counted: they
stand in for the phones' hardware. Last it names any of TVM, ONNX,
onnxruntime, scipy or torch that farmd's own process has mapped (none should
be: the jobs load them in their children).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _farmd import heavy_mapped, start_process, stop_process, write_config

from farm import composition
from farm.clock import wait_until
from farm.provision.standin import demo_apk
from farm.queue.db import default_url
from farm.queue.models import DeviceState
from farm.queue.store import Store
from farm.virtual.testing import adb_server

READY_DEADLINE_S = 300.0


def _tree_rss_mb(proc: psutil.Process) -> tuple[float, float]:
    own = proc.memory_info().rss
    total = own + sum(c.memory_info().rss for c in proc.children(recursive=True))
    return own / 2**20, total / 2**20


def _cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=16)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--api", action=argparse.BooleanOptionalAction, default=True,
                        help="serve the HTTP API and dashboard (a user's default)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp, adb_server() as server:
        root = Path(tmp)
        data = root / "farmd"
        apk = demo_apk(root / "apk")
        config = write_config(root / "farm.toml", data_dir=data, adb_port=server.port, apk=apk,
                              api=args.api)
        phones = start_process(["farm-phones", "serve", "--count", str(args.phones),
                                "--network", "usb-only", "--adb-port", str(server.port),
                                "--data-dir", str(root / "phones")], root / "phones.log")
        try:
            farmd = start_process(["farmd", "--config", str(config), "--json-logs"],
                                  root / "farmd.log")
            try:
                store_url = default_url(data)
                if not wait_until((data / "farm.db").exists, 60, interval_s=0.2):
                    print(
                        f"farmd made no database in 60 s (see {root / 'farmd.log'})",
                        file=sys.stderr,
                    )
                    return 1
                with Store(store_url) as store:
                    start = time.monotonic()

                    def ready() -> int:
                        return sum(d.state is DeviceState.READY for d in store.list_devices())

                    if not wait_until(lambda: ready() == args.phones, READY_DEADLINE_S,
                                      interval_s=0.5):
                        print(
                            f"only {ready()} phones ready in {READY_DEADLINE_S:g} s",
                            file=sys.stderr,
                        )
                        return 1
                    print(
                        f"{args.phones} phones ready in {time.monotonic() - start:.1f} s",
                        flush=True,
                    )
                proc = psutil.Process(farmd.pid)
                children = proc.children(recursive=True)
                cpu_own0, cpu_all0 = _cpu_s([proc]), _cpu_s([proc, *children])
                rss_own, rss_all = [], []
                start = time.monotonic()
                while time.monotonic() - start < args.duration_s:
                    own, total = _tree_rss_mb(proc)
                    rss_own.append(own)
                    rss_all.append(total)
                    time.sleep(1.0)
                elapsed_s = time.monotonic() - start
                cpu_own = 100 * (_cpu_s([proc]) - cpu_own0) / elapsed_s
                cpu_all = 100 * (_cpu_s([proc, *children]) - cpu_all0) / elapsed_s
                heavy = heavy_mapped(farmd.pid)
            finally:
                stop_process(farmd)
        finally:
            stop_process(phones)
    api = "API and dashboard served" if args.api else "no API"
    print(f"\nfarmd idle with {args.phones} ready virtual phones, {elapsed_s:.0f} s "
          f"(health sweep every 30 s, tick every 2 s, {api}):")
    print(f"  farmd alone:          RSS median {statistics.median(rss_own):.0f} MiB "
          f"(max {max(rss_own):.0f}), CPU {cpu_own:.1f} % of one core")
    print(f"  with tracker child:   RSS median {statistics.median(rss_all):.0f} MiB "
          f"(max {max(rss_all):.0f}), CPU {cpu_all:.1f} % of one core")
    print(f"  heavy packages mapped in farmd: {', '.join(heavy) or 'none'}")
    print(f"reproduce: python bench/bench_farmd_idle.py --phones {args.phones} "
          f"--duration-s {args.duration_s:g}{'' if args.api else ' --no-api'}")
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
