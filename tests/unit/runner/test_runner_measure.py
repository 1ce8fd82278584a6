"""Measured runs: every sample kept with its phone, noisy phones re-run once, never pooled.

The runs here are plain functions returning fixed timings (what a phone's
``time_evaluator`` returns); the gate returns a snapshot. No phone is needed to
judge what :func:`farm.kinds.measure.measure` does with the numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from farm.config import ResultSettings, Settings
from farm.jobs import params as jp
from farm.kinds.measure import measure, summary_of_runs
from farm.kinds.run import RunContext
from farm.queue.models import AttemptState, JobState
from farm.queue.records import AttemptView, JobView, SnapshotData

NOW = datetime(2025, 1, 1, tzinfo=UTC)
STEADY = [0.010, 0.0101, 0.0099]
NOISY = [0.010, 0.020, 0.005]


@dataclass
class FakeRun:
    samples_s: list[float]
    mean_s: float
    max_abs_err: float = 0.0
    threads: None = None
    target: str = "llvm"


def _ctx(serials: tuple[str, ...], results: ResultSettings,
         emulated: tuple[str, ...] = ()) -> RunContext:
    job = JobView(1, "gemm", {}, JobState.RUNNING, 0, NOW, None, 3, 1, 60.0, (), None, None, None)
    attempt = AttemptView(1, 1, serials, AttemptState.RUNNING, 60.0, NOW, NOW, NOW, None, None,
                          None)
    return RunContext(Settings(results=results), job, attempt,
                      {s: {"abi": "arm64-v8a"} for s in serials},
                      lambda serial: SnapshotData(serial, NOW,
                                                  facts={"emulated": serial in emulated}))


def _runner(timings: dict[str, Iterator[list[float]]]) -> Any:
    def run_one(tracker: jp.TrackerParams, _target: dict[str, Any], _rep: int) -> FakeRun:
        samples = next(timings[tracker.serial])
        return FakeRun(samples, sum(samples) / len(samples))
    return run_one


def _measure(results: ResultSettings, **timings: list[list[float]]) -> Any:
    ctx = _ctx(tuple(timings), results)
    runner = _runner({s: iter(t) for s, t in timings.items()})
    return measure(ctx, 1, jp.DeviceKind.CPU, runner, lambda _r: {})


class TestMeasure:
    def test_samples_keep_their_phone(self) -> None:
        """Two steady phones: every sample tagged with its serial, repetition 0, no re-run."""
        measured = _measure(ResultSettings(), A=[STEADY], B=[[0.02] * 3])
        assert measured.serials == ["A"] * 3 + ["B"] * 3
        assert measured.repetitions == [0] * 6 and measured.noisy == {}
        assert len(measured.snapshots) == 2

    def test_noisy_phone_is_rerun_once(self) -> None:
        """A noisy phone is measured again (repetition 1); a steady one is not."""
        measured = _measure(ResultSettings(), A=[NOISY, STEADY], B=[STEADY])
        assert measured.of("A", 1) == STEADY and measured.of("B", 1) == []
        assert measured.noisy["A"]["rerun"] and not measured.noisy["A"]["still_noisy"]
        assert measured.noisy["A"]["cv"] > 0.05 > measured.noisy["A"]["rerun_cv"]
        assert [r["rerun"] for r in measured.runs] == [False, False, True]
        assert len(measured.snapshots) == 3  # the re-run was gated too

    def test_still_noisy_is_said(self) -> None:
        """A re-run as noisy as the first is reported still noisy."""
        measured = _measure(ResultSettings(), A=[NOISY, NOISY])
        assert measured.noisy["A"]["still_noisy"]

    def test_rerun_off(self) -> None:
        """rerun_noisy = false marks the phone noisy but measures once."""
        measured = _measure(ResultSettings(rerun_noisy=False), A=[NOISY])
        assert measured.repetitions == [0, 0, 0]
        assert measured.noisy["A"] == {"cv": measured.noisy["A"]["cv"], "rerun": False,
                                       "rerun_cv": None, "still_noisy": True}


class TestSummary:
    def test_two_phones_are_never_averaged(self) -> None:
        """With two phones the summary has one figure per phone and no pooled mean."""
        summary = summary_of_runs("gemm", _measure(ResultSettings(), A=[STEADY], B=[[0.02] * 3]))
        assert summary["mean_s"] is None and summary["median_s"] is None
        assert summary["per_serial"]["B"] == {"mean_s": 0.02, "median_s": 0.02, "samples": 3,
                                              "warmup_runs": 0, "warmup_steady": True,
                                              "emulated": False}

    def test_an_emulated_boards_timings_are_marked(self) -> None:
        """A board under QEMU (facts emulated at its gate): its runs and its figures say so."""
        ctx = _ctx(("va1", "P1"), ResultSettings(), emulated=("va1",))
        runner = _runner({"va1": iter([STEADY]), "P1": iter([STEADY])})
        summary = summary_of_runs("gemm", measure(ctx, 1, jp.DeviceKind.CPU, runner,
                                                  lambda _r: {}))
        assert {r["serial"]: r["emulated"] for r in summary["runs"]} == {"va1": True,
                                                                          "P1": False}
        assert summary["per_serial"]["va1"]["emulated"] is True
        assert summary["per_serial"]["P1"]["emulated"] is False

    def test_one_phone_figure_is_its_last_measurement(self) -> None:
        """One phone re-run: mean_s is the re-run's; every sample is still counted."""
        summary = summary_of_runs("gemm", _measure(ResultSettings(), A=[NOISY, STEADY]))
        assert summary["median_s"] == 0.010 and summary["samples"] == 6
        assert summary["noisy"]["A"]["rerun"]
