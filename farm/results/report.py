"""Results per phone as a table and a PNG plot (``farmctl demo``, bench scripts).

A job's stored result keeps one ``run`` per phone and repetition (serial, mean
seconds, GFLOPS for a GEMM) and, apart from it, the phone's state taken by
thermal gating just before each run (:class:`farm.queue.records.SnapshotData`).
:func:`rows_from` pairs the two by results' one rule
(:mod:`farm.results.pairing`: the i-th measured snapshot of a phone belongs to
its i-th run), so each row says what a phone measured *and* the readings
declared ``with_results`` at that moment (a phone's battery temperature and
thermal status); a figure without that context cannot be compared with the
next one.

The plot is drawn with matplotlib's object API on the Agg canvas (no pyplot
global state, no display needed), so it works in farmd, tests and CI alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from farm.health.readings import result_readings
from farm.kinds import KINDS
from farm.queue.records import JobView, ResultView, SnapshotData
from farm.queue.store import Store
from farm.results.pairing import MeasuredSnapshots, plotted_reading, readings_at

__all__ = ["ResultRow", "results_table", "rows_for_jobs", "rows_from", "write_plot"]


@dataclass(frozen=True)
class ResultRow:
    """One phone's measurement of one workload, with its state at that time.

    Attributes:
        job_id: the job that measured it.
        serial: the phone's adb serial.
        phone_model: the phone's ``ro.product.model``, when its facts are known.
        workload: what ran, e.g. ``gemm n=512 float32`` or ``model small_cnn.onnx``.
        state: the job's state (``succeeded``, ``failed`` ...).
        gflops: 1e9 FLOP/s for a GEMM (``2 N^3 / mean_s``); None for models.
        latency_ms: mean time of one run, milliseconds.
        thermal_wait_s: how long thermal gating waited before the run, seconds.
        error: why the job failed, when it did.
        readings: the phone's readings just before the run, each declared
            ``with_results``, by name; None where not read.
    """

    job_id: int
    serial: str
    phone_model: str | None
    workload: str
    state: str
    gflops: float | None = None
    latency_ms: float | None = None
    thermal_wait_s: float | None = None
    error: str | None = None
    readings: Mapping[str, float | None] = field(default_factory=dict)


def _workload(spec: Mapping[str, Any]) -> str:
    kind = KINDS.get(str(spec.get("kind", "?")))
    return kind.workload(spec) if kind is not None else str(spec.get("kind", "?"))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def rows_from(
    job: JobView,
    results: Sequence[ResultView],
    snapshots: Sequence[SnapshotData],
    phone_models: Mapping[str, str] | None = None,
) -> list[ResultRow]:
    """The rows of one job (pure: plain data in, rows out).

    Args:
        job: the job as stored.
        results: its results (0 or 1, as the queue records each job once).
        snapshots: its phone snapshots, oldest first (``Store.snapshots``).
        phone_models: ``ro.product.model`` by serial, for the table.

    Returns:
        One row per run of the result (of a noisy phone's re-run, where it was
        re-run: its last measurement); for a job without a result, one row
        per phone it asked for (or one with serial ``-``) carrying its state
        and error.
    """
    models = phone_models or {}
    workload = _workload(job.spec)
    state = job.state.value
    if not results:
        serials = (job.spec.get("devices") or {}).get("serials") or ["-"]
        return [
            ResultRow(job.id, s, models.get(s), workload, state, error=job.error) for s in serials
        ]
    result = results[0]
    measured = MeasuredSnapshots(result, snapshots)
    seen: dict[str, int] = defaultdict(int)
    runs = list(result.summary.get("runs") or ())
    # A noisy phone's re-run replaces its first measurement (farm.kinds.measure).
    rerun = {str(run.get("serial", "-")) for run in runs if run.get("rerun")}
    rows = []
    for run in runs:
        serial = str(run.get("serial", "-"))
        snap = measured.of_run(run.get("serial"), seen[serial])
        seen[serial] += 1  # snapshots were taken for every run, re-runs included
        if serial in rerun and not run.get("rerun"):
            continue
        mean_s = _float(run.get("mean_s"))
        rows.append(
            ResultRow(
                job_id=job.id,
                serial=serial,
                phone_model=models.get(serial),
                workload=workload,
                state=state,
                gflops=_float(run.get("gflops")),
                latency_ms=None if mean_s is None else mean_s * 1e3,
                thermal_wait_s=snap.thermal_wait_s if snap else None,
                error=job.error,
                readings=readings_at(snap),
            )
        )
    return rows


def rows_for_jobs(store: Store, job_ids: Iterable[int]) -> list[ResultRow]:
    """Read the rows of the given jobs from the store, in the order given.

    Raises:
        StoreError: the database refused the reads.
    """
    models = {
        d.serial: str(d.facts["model"]) for d in store.list_devices() if d.facts.get("model")
    }
    rows: list[ResultRow] = []
    for job_id in job_ids:
        job = store.get_job(job_id)
        if job is None:
            continue
        rows += rows_from(job, store.results(job_id), store.snapshots(job_id), models)
    return rows


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def results_table(rows: Sequence[ResultRow], title: str = "Results per phone") -> Table:
    """A rich table: phone, workload, GFLOPS, latency, each reading kept with results, state."""
    table = Table(title=title, title_justify="left")
    shown = result_readings()
    for header, justify in (
        ("phone", "left"), ("model", "left"), ("workload", "left"), ("GFLOPS", "right"),
        ("latency ms", "right"),
        *((r.heading, "left" if r.levels else "right") for r in shown),
        ("state", "left"),
    ):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        state = row.state if row.error is None else f"{row.state}: {row.error}"
        table.add_row(
            row.serial, row.phone_model or "-", row.workload, _cell(row.gflops, ".2f"),
            _cell(row.latency_ms, ".3f"), *(r.text(row.readings.get(r.name)) for r in shown),
            state,
        )
    return table


def write_plot(rows: Sequence[ResultRow], path: Path, title: str = "farm results") -> Path:
    """Draw GFLOPS (GEMM rows) and latency (every measured row) per phone into a PNG.

    Each bar is labelled with a reading at measurement time
    (:func:`~farm.results.pairing.plotted_reading`: a phone's battery
    temperature). Rows without a measurement (failed jobs) are left out.

    Args:
        rows: the rows to draw.
        path: the ``.png`` to write; its folder is created.
        title: the figure's title.

    Returns:
        ``path``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    measured = [r for r in rows if r.latency_ms is not None]
    gemm = [r for r in measured if r.gflops is not None]
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    _bars(left, [r.serial for r in gemm], [r.gflops or 0.0 for r in gemm], gemm,
          "GEMM GFLOPS per phone (higher is better)", "GFLOPS")
    _bars(right, [f"{r.serial}\n{r.workload}" for r in measured],
          [r.latency_ms or 0.0 for r in measured], measured,
          "latency per run, log scale (lower is better)", "ms")
    if measured:
        right.set_yscale("log")  # a GEMM takes ms, a small model µs
    figure.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path


def _bars(axes: Any, labels: list[str], values: list[float], rows: Sequence[ResultRow],
          title: str, unit: str) -> None:
    axes.set_title(title, fontsize=10)
    axes.set_ylabel(unit)
    if not values:
        axes.text(0.5, 0.5, "no measurement", ha="center", va="center", transform=axes.transAxes)
        return
    bars = axes.bar(range(len(values)), values, color="#4c72b0")
    axes.set_xticks(range(len(values)), labels, fontsize=7, rotation=20, ha="right")
    shown = plotted_reading()
    taken = [r.readings.get(shown.name) if shown else None for r in rows]
    unit = f" {shown.unit}" if shown and shown.unit else ""
    notes = ["" if v is None else f"{v:.1f}{unit}" for v in taken]
    axes.bar_label(bars, labels=notes, fontsize=7)
