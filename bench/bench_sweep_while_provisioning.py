"""One health sweep over many ready phones while others are being provisioned.

::

    python bench/bench_sweep_while_provisioning.py                 # 64 ready, 8 provisioning
    python bench/bench_sweep_while_provisioning.py --ready 16 --provisioning 4

farmd (in-process, :func:`farm.cli.demo.demo_farmd`) provisions ``--ready``
virtual usb-only phones to ``ready``, plugged in ``--batch`` at a time so a
small host is not timing out 64 TVM imports at once; its own periodic sweep is
pushed out of the way (``health.interval_s = 3600``). The ready phones run in
``farm-phones serve`` processes, one per batch, so their Android emulation does
not share farmd's interpreter (a real phone does its own work). Then
``--provisioning`` more phones are plugged into the same adb server: farmd's
device tracker starts provisioning each on its own thread (install, launch, up
to a minute of waiting for the app's registration). While they provision, this
script calls ``FleetManager.sweep()``, the exact function farmd's scheduler
runs, and prints its wall time, the CPU time farmd's process spent meanwhile
(every thread: the sweep's, provisioning's, probes'; a figure that does not
depend on other load on the host), and how many phones were provisioning when
it started and ended.
Goal (issue 10): under 2 s for 64 phones; the figure depends on the host's
cores and load, so the script also prints both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from farm import composition, logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.provision.standin import demo_apk
from farm.queue.models import DeviceState
from farm.virtual.fleet import Fleet

READY_DEADLINE_S = 900.0
PROVISIONING = (DeviceState.DISCOVERED, DeviceState.PROVISIONING)


@contextlib.contextmanager
def served_phones(count: int, adb_port: int, data_dir: Path) -> Iterator[list[str]]:
    """``count`` usb-only phones in a ``farm-phones serve`` process; yields their serials.

    SIGTERM ends the process, which detaches its phones and ends what they started.
    """
    argv = [sys.executable, "-c", "from farm.virtual.cli import main; main()", "serve",
            "--count", str(count),
            "--network", "usb-only", "--adb-port", str(adb_port), "--data-dir", str(data_dir)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            serials = [json.loads(proc.stdout.readline())["serial"] for _ in range(count)]
            yield serials
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ready", type=int, default=64)
    parser.add_argument("--provisioning", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--sweeps", type=int, default=3)
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    tmp_dir = tempfile.TemporaryDirectory(prefix="farm-bench-")
    tmp = Path(tmp_dir.name)
    apk = demo_apk(tmp / "apk")
    with tmp_dir, demo_farmd(0, tmp / "farm", health={"interval_s": 3600},
                             apk={"path": str(apk)}) as farmd, contextlib.ExitStack() as phones:
        store, manager = farmd.store, farmd.manager
        adb_port = farmd.settings.adb.port

        def states(serials: list[str]) -> list[DeviceState | None]:
            return [getattr(store.get_device(s), "state", None) for s in serials]

        start = time.monotonic()
        for first in range(0, args.ready, args.batch):
            count = min(args.batch, args.ready - first)
            batch = phones.enter_context(served_phones(count, adb_port, tmp / f"phones-{first}"))
            if not wait_until(lambda: all(s is DeviceState.READY
                                          for s in states(batch)),  # noqa: B023
                              READY_DEADLINE_S, interval_s=1.0):
                print(f"phones not ready in {READY_DEADLINE_S:g} s: {states(batch)}",
                      file=sys.stderr)
                return 1
            print(f"{first + count} phones ready after {time.monotonic() - start:.0f} s",
                  flush=True)
        manager.sweep()  # warm: first logcat baselines, pool threads started
        late = phones.enter_context(Fleet(args.provisioning, network="usb-only",
                                          adb_port=adb_port, data_dir=tmp / "late-phones"))
        late_serials = list(late.serials)
        wait_until(lambda: all(s in PROVISIONING for s in states(late_serials)), 60,
                   interval_s=0.05)
        times_s: list[float] = []
        cpu_s: list[float] = []
        for _ in range(args.sweeps):
            before = sum(s in PROVISIONING for s in states(late_serials))
            start, cpu_start = time.monotonic(), time.process_time()
            swept = manager.sweep()
            times_s.append(time.monotonic() - start)
            cpu_s.append(time.process_time() - cpu_start)
            after = sum(s in PROVISIONING for s in states(late_serials))
            print(f"sweep of {swept} phones: {times_s[-1]:.2f} s wall, {cpu_s[-1]:.2f} s CPU "
                  f"in farmd's process ({before} provisioning at start, {after} at end)",
                  flush=True)
        wait_until(lambda: all(s is DeviceState.READY for s in states(late_serials)), 300,
                   interval_s=1)
        print(f"late phones: {[s.value if s else None for s in states(late_serials)]}")
    load = os.getloadavg()[0]
    print(f"\nsweep of {args.ready} ready virtual phones while {args.provisioning} provision: "
          f"median {statistics.median(times_s):.2f} s, max {max(times_s):.2f} s over "
          f"{args.sweeps} sweeps; CPU in farmd's process median {statistics.median(cpu_s):.2f} s "
          f"({os.cpu_count()} cores, load {load:.1f})")
    print(f"reproduce: python bench/bench_sweep_while_provisioning.py --ready {args.ready} "
          f"--provisioning {args.provisioning} --batch {args.batch} --sweeps {args.sweeps}")
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
