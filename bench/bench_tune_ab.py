"""Each zoo model tuned on its own virtual phone, then judged by an A/B job: tuned against untuned.

The test of "tuned at most 0.9x untuned on at least 3 of the 5 zoo models,
within 2,000 measured trials each, judged by an A/B job of untuned against
tuned on the same phone". Everything goes through farmd and its HTTP API, as
a user's script would (:mod:`farm.client`, ``farmctl token create``):

1. starts a private adb server and ``farmd --virtual-phones N`` (N: the number
   of ``--models``, default the zoo's five; API on a free loopback port);
2. writes each model (:func:`farm.zoo.write_model`) and enqueues one
   ``tune --model`` per model pinned to its own phone (``devices.serials``,
   ``--phones 1``), with ``--trials`` (2,000 by default) and ``--for-s``
   (none by default: the trials decide, within the server's
   ``jobs.tune_model_for_s``), so the N tunes run side by side;
3. waits for all of them, then enqueues for each finished tune N the A/B job
   ``N:untuned`` against ``N`` (the tune's untuned build against its tuned
   build) pinned to the phone it tuned on, all at once, so that no A/B
   shares the host with another model's builders;
4. prints one row per model: trials measured (of asked), tuning minutes,
   measured trials per phone-hour, tuning records the tuned build applied
   and picks used of checked (the outcome ``job.outcome()`` prints beneath
   the table), the A/B verdict, the median ratio tuned/untuned with its 99%
   interval, rounds and phone time; the host's cores and load average at the
   start and at the end; then how many models an A/B job calls faster with
   a median ratio of 0.9 or less, and how many with its interval's upper end
   at 0.9 or less.

The A/B judges the build the tune job kept. A tune whose own timing of its
two builds (``jobs.tune_timing_rounds``) found the tuned build not faster
keeps the untuned one and drops its picks
(:func:`farm.tuning.result.keep_untuned`): its ``N`` is then the untuned
build, its row's best build says ``untuned`` and its A/B says both sides ran
the same library.

Each virtual phone is a one-core phone. The virtual fleet has no setting for
a phone's cores, so the bench sets it from outside: its watcher pins every
phone's RPC process (``farm.virtual.rpc_server_main``, found among farmd's
descendants by its phone folder, ``phones/phone-NN``) and the session
processes it forks to one core of its own, again within 0.5 s whenever the
app restarts it under another tracker key; farmd (its tracker, attempt
children and builders) runs on the other cores (on a 16-core host: the five
phones on cores 15-11, farmd on 0-10). Where the host has fewer than 2N
cores the phones take cores in turn and farmd is not pinned (on a 2-core
host the phones share the cores with farmd and each other: the figures then
validate the bench, not the schedules). farmd is started with
``TVM_NUM_THREADS=1`` (TVM's runtime at one thread) and
``TVM_BIND_THREADS=0`` (else TVM moves that thread to the first core it
sorts, apache/tvm ``src/runtime/threading_backend.cc``), which its phones'
RPC processes inherit (farmd's attempt children too; MetaSchedule's search
and builders run on their own workers, not on TVM's runtime thread pool).

Every process it starts (farmd, the phones and their RPC processes, the adb
server) is stopped when it ends, on Ctrl-C, SIGTERM and SIGHUP too; killed
(SIGKILL), it leaves farmd a SIGTERM (``PR_SET_PDEATHSIG``,
:func:`farm.procs.tied_to_parent`) and the adb server a SIGKILL, and only its
temporary folder behind. Exits 0 after printing: a tune or an A/B job that is
refused or fails is a row saying so.

Reproduce::

    python bench/bench_tune_ab.py --trials 2000
    python bench/bench_tune_ab.py --models det_head encoder_block --trials 32
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from _farmd import start_process, stop_process, write_config

from farm.clock import wait_until
from farm.errors import FarmError
from farm.netaddr import free_port
from farm.procs import tied_to_parent
from farm.provision.standin import demo_apk
from farm.queue.models import DeviceState
from farm.tvm.keys import phone_key
from farm.virtual.testing import adb_server
from farm.zoo import MODELS, write_model

#: farmctl and farmd run by this Python: a host given farm on PYTHONPATH has no entry points.
FARMCTL = [sys.executable, "-m", "farm.cli.main"]
FARMD = [sys.executable, "-c", "from farm.daemon import main; main()"]
#: The zoo's own five models (not the exporter-shaped variants): the default ``--models``.
ZOO_FIVE = [name for name, zoo in MODELS.items() if not zoo.variant]
READY_DEADLINE_S = 300.0
#: How often the watcher pins the phones' RPC processes again (a restarted app's is new).
PIN_INTERVAL_S = 0.5
#: The module each virtual phone's RPC process runs (:mod:`farm.virtual.rpc_process`).
RPC_MODULE = "farm.virtual.rpc_server_main"
#: A tune at most this fraction of its untuned time counts for issue 37's goal.
GOAL_RATIO = 0.9


@dataclass
class Row:
    """One model's figures: its tune job and its A/B job (None where not reached)."""

    model: str
    serial: str
    tune_id: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    outcome: list[str] = field(default_factory=list)
    ab_id: int | None = None
    ab: dict[str, Any] | None = None
    error: str = ""
    core: int | None = None


def plan_cores(phones: int, cores: int) -> tuple[list[int], set[int] | None]:
    """Each phone's core, and the cores left to farmd (None: farmd not pinned).

    With at least two cores a phone, phone i takes core ``cores - 1 - i`` and
    farmd the cores below them (as many as the phones' or more: its builders);
    else the phones take the cores in turn and farmd is not pinned.
    """
    if cores >= 2 * phones:
        return [cores - 1 - i for i in range(phones)], set(range(cores - phones))
    return [i % cores for i in range(phones)], None


class PhonePinner:
    """Pins each virtual phone's RPC process tree to its core, again as the apps restart.

    Args:
        farmd_pid: farmd's pid; its phones' RPC processes are among its descendants.
        cores: phone index (``phone-NN``) -> core.
    """

    def __init__(self, farmd_pid: int, cores: list[int]) -> None:
        self._farmd = psutil.Process(farmd_pid)
        self._cores = cores
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="phone-pinner", daemon=True)
        self.pinned: dict[int, int] = {}  # phone index -> RPC processes pinned so far
        self.keys: dict[str, int] = {}  # tracker key an RPC process served -> its core

    def __enter__(self) -> PhonePinner:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(PIN_INTERVAL_S):
            with contextlib.suppress(psutil.Error):
                self.pin_once()

    def core_of(self, serial: str) -> int | None:
        """The core of the phone whose own tracker key (``phone_key``) names ``serial``."""
        suffix = phone_key("", serial)  # "-127-0-0-1-5555"
        return next((c for key, c in self.keys.items() if key.endswith(suffix)), None)

    def pin_once(self) -> None:
        """Pin every phone's RPC process and its session children to the phone's core."""
        for proc in self._farmd.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                index = _phone_index(proc.cmdline())
                if index is None or index >= len(self._cores):
                    continue
                core = [self._cores[index]]
                argv = proc.cmdline()
                if "--key" in argv:
                    self.keys[argv[argv.index("--key") + 1]] = core[0]
                for member in (proc, *proc.children(recursive=True)):
                    with contextlib.suppress(psutil.Error):
                        if member.cpu_affinity() != core:
                            member.cpu_affinity(core)
                            if member is proc:
                                self.pinned[index] = self.pinned.get(index, 0) + 1


def _phone_index(argv: list[str]) -> int | None:
    """The phone folder's number (``.../phone-03/state/rpc_process.log`` -> 3) of an RPC process."""
    if RPC_MODULE not in argv or "--log" not in argv:
        return None
    log = Path(argv[argv.index("--log") + 1])
    folder = next((p.name for p in log.parents if p.name.startswith("phone-")), None)
    number = folder.removeprefix("phone-") if folder else ""
    return int(number) if number.isdigit() else None


@contextlib.contextmanager
def _affinity(cores: set[int] | None) -> Iterator[None]:
    """This process on ``cores`` for the block (a child started in it inherits them)."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.2f} {five:.2f} {fifteen:.2f}"


def _token(config: Path) -> str:
    """A token made as a user makes one on the farm host (``farmctl token create``)."""
    done = subprocess.run([*FARMCTL, "--config", str(config), "token", "create",
                           "--owner", "bench"], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def _tune_all(farm: Any, rows: list[Row], root: Path, args: argparse.Namespace) -> None:
    """Enqueue one tune per model on its phone, wait for all; fill each row's tune figures."""
    import warnings

    jobs = {}
    for row in rows:
        zoo = MODELS[row.model]
        path = write_model(zoo, root / "zoo")
        with warnings.catch_warnings(record=True) as advice:
            warnings.simplefilter("always")
            try:
                job = farm.submit_tune(path, zoo.input_shapes(), trials=args.trials,
                                       for_s=args.for_s, devices={"serials": [row.serial]},
                                       phones=1)
            except FarmError as exc:  # refused at enqueue: the row says why
                row.error = f"tune refused: {exc}"
                continue
        for line in advice:
            print(f"{row.model}: {line.message}", file=sys.stderr)
        row.tune_id = job.id
        jobs[row.model] = job
    _wait_all(list(jobs.values()), args.deadline_s, "tune")
    for row in rows:
        if row.model not in jobs:
            continue
        job = jobs[row.model]
        try:
            job.wait(0)
            row.summary = dict(job.result().summary)
            row.outcome = job.outcome()
        except FarmError as exc:  # failed, cancelled, not ended by the deadline
            row.error = f"tune: {exc}"


def _ab_all(farm: Any, rows: list[Row], args: argparse.Namespace) -> None:
    """Enqueue ``N:untuned`` against ``N`` on each tuned row's phone, wait; fill its verdict."""
    jobs = {}
    for row in rows:
        if row.error or row.tune_id is None:
            continue
        try:
            job = farm.submit_ab(f"{row.tune_id}:untuned", str(row.tune_id),
                                 devices={"serials": [row.serial]})
        except FarmError as exc:
            row.error = f"A/B refused: {exc}"
            continue
        row.ab_id = job.id
        jobs[row.model] = job
    _wait_all(list(jobs.values()), args.deadline_s, "A/B")
    for row in rows:
        if row.model not in jobs:
            continue
        try:
            phones = jobs[row.model].wait(0).ab()
            row.ab = next((p for p in phones if p["serial"] == row.serial), None)
        except FarmError as exc:  # failed, cancelled, not ended by the deadline
            row.error = f"A/B: {exc}"


def _wait_all(jobs: list[Any], deadline_s: float, what: str) -> None:
    """Wait until every job has ended (or the deadline), saying each end on stderr."""
    started = time.monotonic()
    said: set[int] = set()

    def ended() -> bool:
        for job in jobs:
            view = job.view()
            if view.state.ended and job.id not in said:
                said.add(job.id)
                print(f"{what} job {job.id} {view.state.value} after "
                      f"{(time.monotonic() - started) / 60:.1f} min", file=sys.stderr, flush=True)
        return len(said) == len(jobs)

    wait_until(ended, deadline_s, interval_s=2.0)


def _number(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def _at_most(value: Any, limit: float) -> bool:
    return isinstance(value, int | float) and value <= limit


def print_table(rows: list[Row], trials: int) -> None:
    """One Markdown row per model, then each tune's outcome lines."""
    print(f"| model | phone | trials measured (of {trials}) | tuning min | trials/phone-hour | "
          "records / picks used | best build | A/B verdict | tuned/untuned [99% CI] | rounds | "
          "phone s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    median_met = ci_met = 0
    for r in rows:
        s, ab = r.summary, r.ab or {}
        tuning_s = s.get("tuning_s")
        tuning_min = tuning_s / 60 if isinstance(tuning_s, int | float) else None
        picks = (f"{_number(s.get('records_tuned'), 'd')} / {_number(s.get('picks_used'), 'd')}"
                 f" of {_number(s.get('picks_checked'), 'd')}") if s else "-"
        ci = (f"{_number(ab.get('ratio'), '.3f')} [{_number(ab.get('ci_low'), '.3f')}, "
              f"{_number(ab.get('ci_high'), '.3f')}]") if ab else "-"
        verdict = ab.get("verdict") or (r.error or "-")
        if ab.get("verdict") == "faster":
            median_met += _at_most(ab.get("ratio"), GOAL_RATIO)
            ci_met += _at_most(ab.get("ci_high"), GOAL_RATIO)
        phone = r.serial + ("" if r.core is None else f" (core {r.core})")
        print(f"| {r.model} | {phone} | {_number(s.get('trials_measured'), 'd')} | "
              f"{_number(tuning_min, '.1f')} | {_number(s.get('trials_per_phone_hour'), '.0f')} | "
              f"{picks} | {s.get('best_build') or '-'} | {verdict} | {ci} | "
              f"{_number(ab.get('rounds'), 'd')} | {_number(ab.get('phone_s'), '.0f')} |")
    print(f"tuned at most {GOAL_RATIO}x untuned, A/B faster: {median_met} of {len(rows)} models "
          f"by the median ratio, {ci_met} by its 99% CI's upper end")
    for r in rows:
        ids = [f"{what} job {i}" for what, i in (("tune", r.tune_id), ("A/B", r.ab_id))
               if i is not None]
        print(f"{r.model} ({', '.join(ids) or 'not enqueued'}):")
        for line in r.outcome or [r.error or "no outcome"]:
            print(f"  {line}")
        if r.ab and r.ab.get("why"):
            print(f"  A/B: {r.ab['why']}")


def _interrupt(signum: int, _frame: object) -> None:
    """SIGTERM or SIGHUP as Ctrl-C: unwind, stopping farmd, its phones and the adb server."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print its table; return the exit code (0 once it printed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=ZOO_FIVE, choices=list(MODELS),
                        help="zoo models, one virtual phone each (default: the zoo's five)")
    parser.add_argument("--trials", type=int, default=2000,
                        help="measured trials per model (enqueue tune --trials)")
    parser.add_argument("--for-s", type=float, default=None,
                        help="tuning seconds per model (enqueue tune --for); default: none")
    parser.add_argument("--apk", type=Path, default=None,
                        help="a signed RPC app to install (default: farm's stand-in, built with "
                             "aapt, zipalign and apksigner, which a GPU host may lack)")
    parser.add_argument("--deadline-s", type=float, default=12 * 3600.0,
                        help="give up waiting for the tunes (and again for the A/B jobs)")
    args = parser.parse_args(argv)
    if len(set(args.models)) != len(args.models):
        parser.error("--models: each model once")

    from farm import logs
    from farm.client import Farm

    logs.configure(json=True, level="warning", stream=sys.stderr)
    cores, farmd_cores = plan_cores(len(args.models), os.cpu_count() or 1)
    load_start = _load()
    wall_start = time.monotonic()
    os.environ["TVM_NUM_THREADS"] = "1"  # inherited by farmd and its phones: one-core phones
    os.environ["TVM_BIND_THREADS"] = "0"
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tune-ab-")))
        server = stack.enter_context(adb_server())
        api_port = free_port()
        config = write_config(root / "farm.toml", data_dir=root / "data", adb_port=server.port,
                              apk=args.apk or demo_apk(root / "apk"), api=True, api_port=api_port)
        token = _token(config)
        with _affinity(farmd_cores):  # SIGTERM to farmd should this process die, even by SIGKILL
            farmd = start_process(tied_to_parent(
                [*FARMD, "--config", str(config), "--json-logs",
                 "--virtual-phones", str(len(args.models))], signal.SIGTERM), root / "farmd.log")
        stack.callback(stop_process, farmd)
        pinner = stack.enter_context(PhonePinner(farmd.pid, cores))
        farm = stack.enter_context(Farm(f"http://127.0.0.1:{api_port}", token))

        def ready() -> list[str]:
            return sorted(d.serial for d in farm.devices() if d.state is DeviceState.READY)

        try:
            wait_until(lambda: len(ready()) == len(args.models), READY_DEADLINE_S,
                       "phones ready")
        except TimeoutError:
            print(f"phones not ready in {READY_DEADLINE_S:g} s; farmd's log: "
                  f"{(root / 'farmd.log').read_text()[-2000:]}", file=sys.stderr)
            return 0
        rows = [Row(model, serial) for model, serial in zip(args.models, ready(), strict=True)]
        print(f"{len(rows)} phones ready after {time.monotonic() - wall_start:.0f} s; "
              f"tuning {', '.join(args.models)}", file=sys.stderr, flush=True)
        _tune_all(farm, rows, root, args)
        load_tuned = _load()
        _ab_all(farm, rows, args)
        pinned = dict(pinner.pinned)
        for row in rows:
            row.core = pinner.core_of(row.serial)
    print(f"host: {load_start} at the start, {load_tuned} after the tunes, {_load()} at the "
          f"end; {(time.monotonic() - wall_start) / 60:.1f} min in all")
    placement = "farmd on cores " + (
        "unpinned (no core to spare)" if farmd_cores is None
        else ",".join(map(str, sorted(farmd_cores))))
    where = ", ".join(f"phone-{i:02d} core {c}" for i, c in enumerate(cores))
    print(f"phones: one core each ({where}; RPC processes pinned: {sum(pinned.values())}), "
          f"TVM_NUM_THREADS=1; {placement}")
    print_table(rows, args.trials)
    print("reproduce: python bench/bench_tune_ab.py " + shlex.join(sys.argv[1:] if argv is None
                                                                   else argv))
    return 0


if __name__ == "__main__":
    # Ctrl-C even where a shell started the bench in the background, ignoring SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:
        sys.exit(f"interrupted ({str(exc) or 'SIGINT'}): farmd, its phones and the adb server "
                 "were stopped")
