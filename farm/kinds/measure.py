"""Measured runs of a benchmark kind (gemm, model): gate, run, keep every sample with its phone.

:func:`measure` runs ``repetitions`` measured runs on each phone of the
attempt, each after thermal gating (``RunContext.gate``), and keeps every raw
sample with its serial. A phone whose samples are noisy (coefficient of
variation above ``[results] max_cv``, judged by :func:`farm.stats.spread`)
is measured once more when ``[results] rerun_noisy`` is on; the re-run's
samples are kept beside the first ones with repetition 1, and the summary says
which phones were noisy, re-run, and still noisy after it.

:func:`summary_of_runs` never pools phones: figures are per serial, of each
phone's last measurement; the top-level ``mean_s``/``median_s`` exist only when
the attempt had one phone.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import structlog

from farm.jobs import params as jp
from farm.kinds.run import RunContext, phone_target, tracker_params
from farm.queue.records import Outcome, SnapshotData
from farm.stats import spread

__all__ = ["Measured", "measure", "summary_of_runs"]

log = structlog.get_logger(__name__)

#: run_one(tracker, target, run index) -> a result with ``samples_s``,
#: ``mean_s``, ``max_abs_err``, ``threads``, ``target``, and optionally
#: ``warmup`` (:class:`farm.sampling.WarmUp`) and ``ci_pct``.
RunOne = Callable[[jp.TrackerParams, dict[str, Any], int], Any]


@dataclass
class Measured:
    """Everything the measured runs of one attempt produced.

    Attributes:
        samples: every raw sample, seconds, in the order measured.
        serials: the phone of each sample.
        repetitions: per sample, 0 for the first measurement, 1 for a re-run.
        runs: one summary per run (``serial``, ``repetition`` = run index,
            ``rerun``, ``mean_s``, ``max_abs_err``, ``threads``, ``target``,
            ``samples``, the warm-up it threw away (``warmup_runs``,
            ``warmup_s``, ``warmup_steady``; 0/None when none), ``ci_pct``
            and the kind's own fields).
        snapshots: the thermal snapshot taken before each run.
        noisy: per noisy phone, ``{"cv", "rerun", "rerun_cv", "still_noisy"}``
            (CVs as fractions; ``rerun_cv`` None when not re-run).
    """

    samples: list[float] = field(default_factory=list)
    serials: list[str] = field(default_factory=list)
    repetitions: list[int] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[SnapshotData] = field(default_factory=list)
    noisy: dict[str, dict[str, Any]] = field(default_factory=dict)

    def of(self, serial: str, repetition: int) -> list[float]:
        """The samples of one phone's measurement (repetition 0 or 1)."""
        return [v for v, s, r in zip(self.samples, self.serials, self.repetitions, strict=True)
                if s == serial and r == repetition]

    def last(self, serial: str) -> list[float]:
        """The samples of one phone's last measurement: its re-run if it had one."""
        return self.of(serial, 1) or self.of(serial, 0)

    def outcome(self, summary: Mapping[str, Any]) -> Outcome:
        """The attempt's outcome with ``summary`` and every sample, tagged."""
        return Outcome(summary, self.samples, "s", self.serials, self.snapshots,
                       sample_repetitions=self.repetitions)


def _runs(ctx: RunContext, measured: Measured, serial: str, indices: Iterable[int], rerun: bool,
          device: jp.DeviceKind, run_one: RunOne,
          describe: Callable[[Any], dict[str, Any]]) -> None:
    """Runs ``indices`` of one phone (gate, run), appended to ``measured``."""
    for repetition in indices:
        target = phone_target(serial, ctx, device)
        snapshot = ctx.gate(serial)
        measured.snapshots.append(snapshot)
        result = run_one(tracker_params(ctx, serial), target, repetition)
        measured.samples += result.samples_s
        measured.serials += [serial] * len(result.samples_s)
        measured.repetitions += [int(rerun)] * len(result.samples_s)
        warmup = getattr(result, "warmup", None)
        measured.runs.append({
            "serial": serial, "repetition": repetition, "rerun": rerun, "mean_s": result.mean_s,
            "samples": len(result.samples_s),
            "warmup_runs": warmup.runs if warmup else 0,
            "warmup_s": warmup.seconds if warmup else None,
            "warmup_steady": warmup.steady if warmup else None,
            "ci_pct": getattr(result, "ci_pct", None),
            "max_abs_err": result.max_abs_err,
            "threads": asdict(result.threads) if result.threads else None,
            "target": result.target, "emulated": bool(snapshot.facts.get("emulated")),
            **describe(result),
        })


def measure(
    ctx: RunContext, repetitions: int, device: jp.DeviceKind, run_one: RunOne,
    describe: Callable[[Any], dict[str, Any]],
) -> Measured:
    """Each repetition on each phone: gate, run, keep every sample; re-run noisy phones once.

    Args:
        ctx: the attempt; ``ctx.settings.results`` says when a phone is noisy.
        repetitions: measured runs per phone.
        device: the processor the runs use.
        run_one: runs once (see :data:`RunOne`).
        describe: a result -> the kind's own fields of its run summary.

    Raises:
        What ``run_one`` and ``ctx.gate`` raise (PhoneFault, UserFault ...).
    """
    measured = Measured()
    serials = list(ctx.attempt.serials)
    for repetition in range(repetitions):  # phones take turns, run by run
        for serial in serials:
            _runs(ctx, measured, serial, [repetition], False, device, run_one, describe)
    limits = ctx.settings.results
    for serial in serials:
        first = measured.of(serial, 0)
        cv = spread(first).cv if first else 0.0
        if cv <= limits.max_cv:
            continue
        entry: dict[str, Any] = {"cv": cv, "rerun": limits.rerun_noisy, "rerun_cv": None,
                                 "still_noisy": True}
        if limits.rerun_noisy:
            log.info("noisy_rerun", serial=serial, job_id=ctx.job.id, cv=cv,
                     max_cv=limits.max_cv)
            _runs(ctx, measured, serial, range(repetitions), True, device, run_one, describe)
            again = spread(measured.of(serial, 1))
            entry.update(rerun_cv=again.cv, still_noisy=again.noisy(limits.max_cv))
        measured.noisy[serial] = entry
    return measured


def summary_of_runs(kind: str, measured: Measured) -> dict[str, Any]:
    """A timed job's summary, per phone and never pooled.

    Returns:
        ``kind``; ``per_serial``: for each phone, ``mean_s``, ``median_s`` and
        ``samples`` of its last measurement, ``emulated`` (its timings are an
        emulator's, a board under QEMU: never to be set beside a real
        device's), and ``warmup_runs`` (warm-up
        samples thrown away over all its runs) and ``warmup_steady`` (False if
        any run's warm-up stopped at its time bound unsteady); ``mean_s``/``median_s`` of the one
        phone when the attempt had exactly one, else None; ``samples`` (all
        kept, re-runs included); ``runs``; ``noisy`` (see :class:`Measured`).
    """
    per_serial = {}
    for serial in dict.fromkeys(measured.serials):
        last = measured.last(serial)
        runs = [r for r in measured.runs if r["serial"] == serial]
        per_serial[serial] = {"mean_s": statistics.fmean(last),
                              "median_s": statistics.median(last), "samples": len(last),
                              "warmup_runs": sum(r.get("warmup_runs", 0) for r in runs),
                              "warmup_steady": all(r.get("warmup_steady") is not False
                                                   for r in runs),
                              "emulated": any(r.get("emulated") for r in runs)}
    only = next(iter(per_serial.values())) if len(per_serial) == 1 else {}
    return {
        "kind": kind,
        "mean_s": only.get("mean_s"),
        "median_s": only.get("median_s"),
        "samples": len(measured.samples),
        "per_serial": per_serial,
        "runs": list(measured.runs),
        "noisy": measured.noisy,
    }
