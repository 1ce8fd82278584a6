"""``farmctl demo``: the main job on a virtual fleet, in one command.

What it starts, in order, and stops again in reverse::

    private adb server    free loopback port, own $HOME (the demo's host: farm's
                          one-server-per-host rule holds for it)
    farmd, in-process     Farmd(settings, virtual_phones=N): tracker on a free
                          port, N virtual phones plugged into that adb server,
                          the stand-in APK built, signed and installed, apps
                          launched and registered, the dispatcher running
    jobs                  GEMM N on every phone and the small ONNX CNN
                          (farm.demo_model) on the first phone, through the queue

Then it prints a table of GFLOPS and latency per phone with the battery
temperature and thermal status taken just before each run, writes a PNG plot
into the data folder, stops everything and checks with psutil that no child
process is left. ``--keep`` keeps the fleet and farmd running until Ctrl-C or
SIGTERM, with a ``farm.toml`` in the data folder so ``farmctl --config`` can
talk to it. SIGTERM is handled as Ctrl-C throughout, so ``kill`` cleans up too.

Everything goes through the same code as real phones: the demo only chooses
virtual phones when it builds farmd.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import click
import psutil
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from farm import logs
from farm.cli.state import CliState, pass_state
from farm.clock import SystemClock
from farm.config import Settings
from farm.demo_model import write_small_cnn
from farm.errors import InfraFault
from farm.queue.models import DeviceState, JobState
from farm.results.report import ResultRow, results_table, rows_for_jobs, write_plot

if TYPE_CHECKING:
    from farm.daemon import Farmd

__all__ = ["DemoResult", "demo", "demo_farmd", "demo_settings", "run_demo"]

READY_DEADLINE_S = 120.0
JOBS_DEADLINE_S = 150.0
CHILDREN_GONE_DEADLINE_S = 15.0
POLL_S = 0.25
PLOT_NAME = "demo-results.png"
LOG_NAME = "demo.log"
CONFIG_NAME = "farm.toml"


@dataclass
class DemoResult:
    """What a demo run produced.

    Attributes:
        data_dir: the demo's data folder (database, logs, plot).
        rows: one row per phone and workload.
        plot: the PNG written into ``data_dir``.
        elapsed_s: wall time from start to everything stopped, seconds.
        leftover_pids: child processes still alive after the stop (then killed).
    """

    data_dir: Path
    rows: list[ResultRow] = field(default_factory=list)
    plot: Path | None = None
    elapsed_s: float = 0.0
    leftover_pids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every job succeeded and nothing was left running."""
        return bool(self.rows) and not self.leftover_pids and all(
            r.state == JobState.SUCCEEDED.value for r in self.rows
        )


def demo_settings(data_dir: Path, adb_port: int, tracker_port: int, metrics_port: int,
                  api_port: int) -> Settings:
    """The demo's settings: its own data folder and ports, usb-only virtual phones.

    usb-only is farm's default network mode (adb reverse and a relay per phone),
    so the demo exercises the path real phones on a locked-down office network take.
    """
    return Settings.model_validate({
        "data_dir": str(data_dir),
        "log_level": "info",
        "adb": {"port": adb_port},
        "tracker": {"port": tracker_port, "network": "usb-only"},
        "metrics": {"port": metrics_port},
        "api": {"port": api_port},
        "virtual": {"network": "usb-only"},
    })


@contextlib.contextmanager
def demo_farmd(phones: int, data_dir: Path, **overrides: Any) -> Iterator[Farmd]:
    """A started farmd with ``phones`` virtual phones on a private adb server.

    The adb server (``farm.virtual.testing.adb_server``: own port, own $HOME,
    own process group), the tracker, the metrics endpoint and the API get free loopback
    ports. Everything is stopped on exit. The bench scripts use this too.

    Args:
        phones: how many virtual phones farmd starts.
        data_dir: farmd's data folder.
        overrides: settings sections merged over :func:`demo_settings`, e.g.
            ``health={"interval_s": 2}``.

    Raises:
        FarmError: a part could not start (everything started is stopped).
    """
    from farm.daemon import Farmd
    from farm.netaddr import free_port
    from farm.virtual.testing import adb_server

    with adb_server() as server:
        base = demo_settings(data_dir, server.port, free_port(), free_port(), free_port())
        data = base.model_dump(mode="json")
        for key, value in overrides.items():
            data[key] = {**data[key], **value} if isinstance(value, dict) else value
        farmd = Farmd(Settings.model_validate(data), virtual_phones=phones)
        try:
            farmd.start()
            yield farmd
        finally:
            farmd.stop()


def _settings_toml(settings: Settings) -> str:
    # The few keys the demo sets; tomllib can read but not write TOML.
    return (
        f'data_dir = "{settings.data_dir}"\n\n'
        f"[adb]\nport = {settings.adb.port}\n\n"
        f'[tracker]\nexternal = true\nport = {settings.tracker.port}\nnetwork = "usb-only"\n\n'
        f"[metrics]\nport = {settings.metrics.port}\n"
    )


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _wait(predicate: Callable[[], bool], deadline_s: float, on_poll: Callable[[], None]) -> bool:
    end = time.monotonic() + deadline_s
    while True:
        on_poll()
        if predicate():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(POLL_S)


def _reap_children(before: set[int], deadline_s: float) -> list[int]:
    """Wait for the children started since ``before`` to end; kill and return any left."""
    end = time.monotonic() + deadline_s
    while (left := _children() - before) and time.monotonic() < end:
        time.sleep(POLL_S)
    left = _children() - before
    for pid in left:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    return sorted(left)


@contextlib.contextmanager
def _logs_to(path: Path) -> Iterator[None]:
    """Send farm's log lines to ``path`` for the demo's duration (the console shows progress)."""
    with path.open("a", encoding="utf-8") as stream:
        logs.configure(json=True, level="info", stream=stream)
        try:
            yield
        finally:
            logs.configure(level="warning", stream=sys.stderr)


def run_demo(
    phones: int = 3,
    n: int = 512,
    data_dir: Path | None = None,
    *,
    console: Console | None = None,
    keep: bool = False,
    model: bool = True,
    same_model: bool = False,
    ready_deadline_s: float = READY_DEADLINE_S,
    jobs_deadline_s: float = JOBS_DEADLINE_S,
) -> DemoResult:
    """Run the demo described in the module doc.

    Args:
        phones: how many virtual phones.
        n: GEMM size N (float32[N, N] @ float32[N, N]).
        data_dir: the demo's data folder; None makes a fresh one under the
            system's temporary folder (kept afterwards: it holds the plot).
        console: where progress and the table go; stdout if None.
        keep: keep farmd and the phones running until Ctrl-C after the table.
        model: also time the small ONNX CNN on the first phone.
        same_model: every virtual phone of one model (``virtual.same_model``).
        ready_deadline_s: how long the phones may take to reach ``ready``.
        jobs_deadline_s: how long the jobs may take once enqueued.

    Returns:
        The rows, the plot and the wall time.

    Raises:
        InfraFault: phones did not come up, or the jobs did not finish in time.
        ToolMissing: apksigner, zipalign or aapt is missing (the stand-in APK
            is built and signed for real).
        FarmError: any other part could not start.
    """
    console = console or Console()
    started_s = time.monotonic()
    if data_dir is None:
        stamp = f"{datetime.now().astimezone():%Y%m%d-%H%M%S}"  # local time, as a user reads it
        data_dir = Path(tempfile.mkdtemp(prefix=f"farm-demo-{stamp}-"))
    data_dir = Path(data_dir).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    result = DemoResult(data_dir)
    before = _children()
    console.print(f"farm demo: {phones} virtual phones, GEMM {n}, data in {data_dir}")
    try:
        with _logs_to(data_dir / LOG_NAME), contextlib.ExitStack() as stack:
            with console.status("starting the tracker, farmd and the virtual phones"):
                farmd = stack.enter_context(demo_farmd(
                    phones, data_dir, virtual={"same_model": same_model}))
            settings = farmd.settings
            if farmd.fleet is None:  # demo_farmd always starts phones: unreachable
                raise RuntimeError("demo: farmd started without its virtual phones")
            serials = list(farmd.fleet.serials)
            _run_jobs(farmd, serials, n, model, data_dir, console, result,
                      ready_deadline_s, jobs_deadline_s)
            if keep:
                token = farmd.store.create_token("demo", SystemClock().now(), operator=True)
                _keep_running(settings, data_dir, console, token)
            console.print("stopping farmd, the phones, the tracker and the adb server")
    finally:
        result.leftover_pids = _reap_children(before, CHILDREN_GONE_DEADLINE_S)
        result.elapsed_s = time.monotonic() - started_s
    _report(result, console)
    return result


def _run_jobs(farmd: Farmd, serials: list[str], n: int, model: bool, data_dir: Path,
              console: Console, result: DemoResult, ready_deadline_s: float,
              jobs_deadline_s: float) -> None:
    store = farmd.store
    columns = (TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        ready_task = progress.add_task("phones provisioned and registered", total=len(serials))

        def ready() -> list[str]:
            return [s for s in serials
                    if (d := store.get_device(s)) is not None and d.state is DeviceState.READY]

        ok = _wait(lambda: len(ready()) == len(serials), ready_deadline_s,
                   lambda: progress.update(ready_task, completed=len(ready())))
        if not ok:
            states = {s: getattr(store.get_device(s), "state", None) for s in serials}
            raise InfraFault(f"phones not ready within {ready_deadline_s:g} s: {states}")
        now = datetime.now(UTC)
        job_ids = [store.enqueue({"kind": "gemm", "params": {"n": n},
                                  "devices": {"serials": [s]}}, now) for s in serials]
        if model:
            (data_dir / "models").mkdir(exist_ok=True)
            path = write_small_cnn(data_dir / "models" / "small_cnn.onnx")
            job_ids.append(store.enqueue({"kind": "model", "params": {"path": str(path)},
                                          "devices": {"serials": serials[:1]}}, now))
        jobs_task = progress.add_task("jobs finished", total=len(job_ids))

        def finished() -> int:
            return sum(1 for i in job_ids if (j := store.get_job(i)) and j.state.ended)

        ok = _wait(lambda: finished() == len(job_ids), jobs_deadline_s,
                   lambda: progress.update(jobs_task, completed=finished()))
    result.rows = rows_for_jobs(store, job_ids)
    result.plot = write_plot(result.rows, data_dir / PLOT_NAME,
                             title=f"farm demo: GEMM {n} on {len(serials)} virtual phones")
    console.print(results_table(result.rows))
    if not ok:
        raise InfraFault(f"jobs not finished within {jobs_deadline_s:g} s; see the table")


def _keep_running(settings: Settings, data_dir: Path, console: Console, token: str) -> None:
    config = data_dir / CONFIG_NAME
    config.write_text(_settings_toml(settings), encoding="utf-8")
    # The interrupt may come as soon as the line below is out (a script waits
    # for it, then sends SIGTERM): the suppress block must already be open.
    with contextlib.suppress(KeyboardInterrupt):
        console.print(f"farmd and the phones keep running; try:\n"
                      f"  farmctl --config {config} devices\n"
                      f"  farmctl --config {config} enqueue gemm --n 256\n"
                      f"  curl -s http://127.0.0.1:{settings.metrics.port}/metrics\n"
                      f"the HTTP API: http://{settings.api.host}:{settings.api.port}/api/docs; "
                      f"a fresh operator token (shown once): {token}\n"
                      f"  FARM_TOKEN={token} farmctl --server "
                      f"http://{settings.api.host}:{settings.api.port} devices\n"
                      "Ctrl-C (or SIGTERM) stops everything.")
        threading.Event().wait()


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """Handle SIGTERM as Ctrl-C (KeyboardInterrupt) in the main thread, for the block."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report(result: DemoResult, console: Console) -> None:
    if result.plot is not None:
        console.print(f"plot: {result.plot}")
    console.print(f"log:  {result.data_dir / LOG_NAME}")
    if result.leftover_pids:
        console.print(f"[red]processes left behind (killed): {result.leftover_pids}[/red]")
    else:
        console.print("everything the demo started has stopped (no child process left)")
    console.print(f"demo took {result.elapsed_s:.1f} s")


@click.command()
@click.option("--phones", type=click.IntRange(min=1, max=16), default=3, show_default=True,
              help="How many virtual phones.")
@click.option("--n", "n", type=click.IntRange(min=16, max=4096), default=512, show_default=True,
              help="GEMM size N: float32[N, N] @ float32[N, N].")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Data folder for the demo (default: a new one under the temporary folder).")
@click.option("--keep", is_flag=True,
              help="Keep farmd and the phones running after the table, until Ctrl-C or SIGTERM.")
@click.option("--no-model", is_flag=True, help="Skip the ONNX model job.")
@click.option("--same-model", is_flag=True,
              help="Every phone of one model, so that with --keep 'enqueue tune --phones 2' "
                   "finds two phones of one model (by default they cycle through four models).")
@pass_state
def demo(state: CliState, phones: int, n: int, data_dir: Path | None, keep: bool,
         no_model: bool, same_model: bool) -> None:
    """Run GEMM and a small ONNX model on virtual phones through farmd, then stop everything."""
    state.require_local()
    stdout: TextIO = sys.stdout
    console = Console(file=stdout, width=None if stdout.isatty() else 140, highlight=False)
    with _sigterm_as_ctrl_c():
        result = run_demo(phones, n, data_dir, console=console, keep=keep, model=not no_model,
                          same_model=same_model)
    if not result.ok:
        raise click.exceptions.Exit(1)
