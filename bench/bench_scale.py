"""farm at fleet scale: 8 farmd hosts on one PostgreSQL, hundreds of devices, 10,000 queued jobs.

::

    read -r pg_dir url < <(.ci/postgres)
    python bench/bench_scale.py --postgres "$url"                     # 100, 250, 500 devices
    python bench/bench_scale.py --postgres "$url" --devices 500 --hosts 8 --jobs 10000
    .ci/postgres stop "$pg_dir"

Each step (one per ``--devices`` count) gets a fresh database and starts
``--hosts`` real ``farmd`` processes (each with its own adb server, tracker and
zygote, a user's defaults but for ``[health] probe_every_sweeps = 0``: no RPC
probe session per idle device every 4th sweep), every one on the same database.
Host 0 also has ``--phones`` virtual phones (``farm-phones serve``) and serves
the API and dashboard. The other devices are the light stand-in kind of
``bench/_light.py`` (marked: kind ``light``, serials ``light-<host>-<n>``,
facts ``"light": true``), shared evenly by the hosts: they answer health reads
from memory and register at their host's tracker like a TVM server, so farm's
own per-device work (sweep, verdict, rows, the fleet page) is what is measured.
Of them ``--runners`` per host take jobs, run on one shared host
``tvm.exec.rpc_server``.

Per step, once every device is ``ready``:

* **idle**, for ``--idle-s``: each farmd's CPU (so CPU per device per health
  sweep, all farmd's idle work counted), RSS (so per 100 devices), and
  PostgreSQL transactions per second (``pg_stat_database`` ``xact_commit +
  xact_rollback`` deltas, this database only);
* **fleet page**: ``GET /api/v1/devices`` and the dashboard's ``/`` on host 0,
  median and max of 5;
* **queue**: ``--jobs`` gemm jobs enqueued that no device can take (SoC
  ``light-none``: the scheduler reads past them every tick), then ``--rounds``
  rounds of tiny gemm jobs (N=16), one per runner, each round enqueued at once
  when the previous one ended (every runner idle):
  **enqueue -> running** = the attempt's ``started_at`` (its claim's commit)
  minus the job's ``submitted_at``, p50/p99; PostgreSQL transactions per second
  meanwhile.

Prints a table per step, what failed (devices never ready, probes never
started), the load average and, last, the command.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil
import sqlalchemy as sa
from _farmd import start_process, stop_process, write_config
from _stats import percentile

from farm import composition
from farm.clock import wait_until
from farm.netaddr import free_port
from farm.provision.standin import demo_apk
from farm.queue.models import DeviceState
from farm.queue.store import Store
from farm.testing import fresh_postgres_database
from farm.virtual.testing import adb_server

BENCH_DIR = Path(__file__).resolve().parent
READY_DEADLINE_S = 900.0
PROBE_DEADLINE_S = 300.0
SITECUSTOMIZE = """\
import os
if os.environ.get("LIGHT_BENCH_DEVICES") is not None:
    import _light
    _light.install()
"""


@dataclass(frozen=True)
class Step:
    """One step's figures."""

    devices: int
    ready_s: float | None
    sweep_cpu_s: float  # all hosts' farmd CPU per 30 s health-sweep interval, idle
    rss_mib: float  # all hosts' farmd RSS together, median over the idle window
    rss_max_mib: float
    idle_tps: float
    page_ms: tuple[float, float]
    dashboard_ms: tuple[float, float]
    enqueue_s: float
    probe_ms: tuple[float, float] | None
    probes_started: int
    queue_tps: float
    failures: tuple[str, ...]


def _xacts(admin: sa.Engine, database: str) -> int:
    with admin.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = :d"),
            {"d": database}).scalar_one())


def _cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def _timed_get(url: str, token: str, tries: int = 5) -> tuple[float, float]:
    """Median and max ms of ``tries`` GETs of ``url`` with the token as bearer and cookie."""
    took = []
    for _ in range(tries):
        headers = {"Authorization": f"Bearer {token}", "Cookie": f"farm_token={token}"}
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 (loopback)
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=120) as reply:  # noqa: S310 (loopback)
            reply.read()
        took.append(1e3 * (time.perf_counter() - start))
    return statistics.median(took), max(took)


@contextlib.contextmanager
def _hosts(url: str, root: Path, args: argparse.Namespace, light_per_host: int,
           rpc_port: int) -> Iterator[tuple[list[subprocess.Popen[bytes]], int]]:
    """Every host's farmd (host 0 with the phones and the API); yields them and the API's port."""
    apk = demo_apk(root / "apk")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root / "site"), str(BENCH_DIR), os.environ.get("PYTHONPATH", "")]),
        "LIGHT_BENCH_DEVICES": str(light_per_host),
        "LIGHT_BENCH_RUNNERS": str(args.runners),
        "LIGHT_BENCH_RPC_PORT": str(rpc_port)}
    api_port = free_port()
    with contextlib.ExitStack() as stack:
        farmds = []
        for h in range(args.hosts):
            server = stack.enter_context(adb_server())
            data = root / f"host{h}"
            config = write_config(
                root / f"host{h}.toml", data_dir=data, adb_port=server.port, apk=apk,
                api=h == 0, api_port=api_port,
                top=f'database_url = "{url}"\nhost_id = "bench-{h}"\n',
                sections="[health]\nprobe_every_sweeps = 0\n")
            if h == 0 and args.phones:
                phones = start_process(["farm-phones", "serve", "--count", str(args.phones),
                                        "--network", "usb-only", "--adb-port", str(server.port),
                                        "--data-dir", str(root / "phones")], root / "phones.log")
                stack.callback(stop_process, phones)
            with (root / f"host{h}.log").open("wb") as log:
                farmd = subprocess.Popen(["farmd", "--config", str(config), "--json-logs"],
                                         stdout=log, stderr=subprocess.STDOUT, env=env,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            stack.callback(stop_process, farmd)
            farmds.append(farmd)
        yield farmds, api_port


def run_step(  # noqa: PLR0915 (one linear measurement: start, wait, measure in turn)
    base_url: str, devices: int, args: argparse.Namespace, rpc_port: int,
) -> Step:
    """One step: fresh database, the hosts, the measurements; see the module docstring."""
    failures: list[str] = []
    light_per_host = (devices - args.phones) // args.hosts
    total = light_per_host * args.hosts + args.phones
    admin = sa.create_engine(base_url, isolation_level="AUTOCOMMIT")
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_postgres_database(base_url, "farm_scale_"))
        database = sa.engine.make_url(url).database
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="farm-scale-")))
        (root / "site").mkdir()
        (root / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        store = stack.enter_context(Store(url))
        token = store.create_token("bench", datetime.now(UTC), operator=True)
        farmds, api_port = stack.enter_context(_hosts(url, root, args, light_per_host, rpc_port))
        procs = [psutil.Process(f.pid) for f in farmds]
        start = time.monotonic()

        def ready() -> int:
            return sum(d.state is DeviceState.READY for d in store.list_devices())

        def settled() -> bool:
            return ready() == total or any(f.poll() is not None for f in farmds)

        if wait_until(settled, READY_DEADLINE_S, interval_s=2.0) and ready() == total:
            ready_s: float | None = time.monotonic() - start
        else:
            ready_s = None
            failures.append(f"only {ready()} of {total} devices ready in {READY_DEADLINE_S:g} s")
            for h, f in enumerate(farmds):
                if f.poll() is not None:
                    tail = (root / f"host{h}.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"host {h}'s farmd exited ({f.returncode}):\n{tail}")
        print(f"  {ready()} of {total} devices ready after {time.monotonic() - start:.0f} s",
              flush=True)
        cpu0, x0, t0 = _cpu_s(procs), _xacts(admin, database), time.monotonic()
        rss = []
        while time.monotonic() - t0 < args.idle_s:
            rss.append(sum(p.memory_info().rss for p in procs) / 2**20)
            time.sleep(2.0)
        idle_wall = time.monotonic() - t0
        idle_tps = (_xacts(admin, database) - x0) / idle_wall
        sweeps = idle_wall / 30.0  # [health] interval_s, a user's default
        sweep_cpu_s = (_cpu_s(procs) - cpu0) / sweeps
        rss_max = max(p.memory_info().rss for p in procs) / 2**20
        api = f"http://127.0.0.1:{api_port}"
        page = _timed_get(f"{api}/api/v1/devices", token)
        dashboard = _timed_get(f"{api}/", token)
        t_enqueue = time.monotonic()
        backlog = {"kind": "gemm", "params": {"n": 16}, "devices": {"soc": "light-none"}}
        now = datetime.now(UTC)
        for chunk in range(0, args.jobs, 1000):
            store.enqueue_run([backlog] * min(1000, args.jobs - chunk), now)
        enqueue_s = time.monotonic() - t_enqueue
        probe = {"kind": "gemm", "params": {"n": 16, "number": 1, "repeat": 1},
                 "devices": {"soc": "light-runner"}}
        x1, t1 = _xacts(admin, database), time.monotonic()
        probes: list[int] = []
        per_round = args.runners * args.hosts
        for _ in range(args.rounds):
            # One probe per runner, all runners idle: the latency is the dispatch's,
            # not a wait behind the previous probe.
            batch = [store.enqueue(probe, datetime.now(UTC)) for _ in range(per_round)]
            probes += batch
            wait_until(lambda batch=batch: all(
                (job := store.get_job(j)) is not None and job.state.ended for j in batch),
                PROBE_DEADLINE_S, interval_s=0.5)
        queue_tps = (_xacts(admin, database) - x1) / (time.monotonic() - t1)
        latencies = []
        for job_id in probes:
            job, attempts = store.get_job(job_id), store.attempts(job_id)
            if job is not None and attempts and attempts[0].started_at is not None:
                latencies.append(
                    (attempts[0].started_at - job.submitted_at).total_seconds() * 1e3)
        if len(latencies) < len(probes):
            failures.append(f"{len(probes) - len(latencies)} of {len(probes)} probe jobs "
                            f"never started in {PROBE_DEADLINE_S:g} s")
        for h, f in enumerate(farmds):
            if f.poll() is not None:
                failures.append(f"farmd of host {h} exited ({f.returncode}); see host{h}.log")
    admin.dispose()
    return Step(total, ready_s, sweep_cpu_s, statistics.median(rss), rss_max,
                idle_tps, page, dashboard, enqueue_s,
                (percentile(latencies, 50), percentile(latencies, 99)) if latencies else None,
                len(latencies), queue_tps, tuple(failures))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="SQLAlchemy URL of a PostgreSQL "
                        "whose user may CREATE DATABASE (.ci/postgres prints one)")
    parser.add_argument("--devices", default="100,250,500", help="device counts, one step each")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--phones", type=int, default=2, help="virtual phones (on host 0)")
    parser.add_argument("--runners", type=int, default=1, help="light devices per host "
                        "that take jobs")
    parser.add_argument("--jobs", type=int, default=10000, help="queued jobs no device takes")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of probe jobs, one "
                        "per runner each, enqueued once the previous round ended")
    parser.add_argument("--idle-s", type=float, default=90.0)
    args = parser.parse_args()
    counts = [int(c) for c in args.devices.split(",")]
    rpc_port = free_port()
    rpc = start_process([sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                         "--port", str(rpc_port), "--port-end", str(rpc_port + 1), "--key",
                         "light"], Path(tempfile.gettempdir()) / f"farm-scale-rpc-{rpc_port}.log")
    steps = []
    try:
        for devices in counts:
            print(f"step: {devices} devices over {args.hosts} hosts "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
            steps.append(run_step(args.postgres, devices, args, rpc_port))
            print(f"  done (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        stop_process(rpc)
    load = os.getloadavg()
    print(f"\n{args.hosts} farmd hosts on one PostgreSQL, {args.phones} virtual phones, the rest "
          f"light stand-ins; {args.jobs} queued jobs; load {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f} on {os.cpu_count()} cores")
    print(f"{'devices':>8}{'ready s':>9}{'CPU ms/dev/sweep':>18}{'RSS MiB/100 dev':>17}"
          f"{'idle tx/s':>11}{'/api/v1/devices ms':>20}{'/ ms':>14}{'enq->run p50/p99 ms':>22}"
          f"{'queue tx/s':>12}")
    for s in steps:
        probe = f"{s.probe_ms[0]:.0f}/{s.probe_ms[1]:.0f}" if s.probe_ms else "-"
        ready = f"{s.ready_s:.0f}" if s.ready_s is not None else "never"
        print(f"{s.devices:>8}{ready:>9}{1e3 * s.sweep_cpu_s / s.devices:>18.2f}"
              f"{100 * s.rss_mib / s.devices:>17.0f}"
              f"{s.idle_tps:>11.1f}{s.page_ms[0]:>11.0f} (max {s.page_ms[1]:.0f})"
              f"{s.dashboard_ms[0]:>7.0f} ({s.dashboard_ms[1]:.0f}){probe:>22}"
              f"{s.queue_tps:>12.1f}")
    for a, b in itertools.pairwise(steps):
        more = b.devices - a.devices
        print(f"  from {a.devices} to {b.devices} devices: each 100 more cost "
              f"{100 * (b.rss_mib - a.rss_mib) / more:.0f} MiB of farmd RSS (all hosts) and "
              f"{1e3 * (b.sweep_cpu_s - a.sweep_cpu_s) / more:.2f} ms of farmd CPU per device "
              f"per sweep interval")
    for s in steps:
        print(f"  {s.devices} devices: {args.jobs} jobs enqueued in {s.enqueue_s:.1f} s; "
              f"largest farmd {s.rss_max_mib:.0f} MiB; {s.probes_started} probes started"
              + "".join(f"\n    FAILED: {f}" for f in s.failures))
    print(f"reproduce: python bench/bench_scale.py --postgres URL --devices {args.devices} "
          f"--hosts {args.hosts} --phones {args.phones} --jobs {args.jobs}")
    return 0 if not any(s.failures for s in steps) else 1


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
