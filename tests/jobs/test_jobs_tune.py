"""MetaSchedule tuning over a real tracker and two RPC servers, with resume."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from farm.jobs.params import DeviceFacts, GemmParams, TimingParams, TrackerParams, TuneParams
from farm.jobs.targets import target_for
from farm.jobs.tuning_db import RECORDS_FILE, count_trials, export_records
from farm.tuning.gemm import compare_tuned, tune_gemm
from farm.tuning.progress import TuneProgress


@pytest.mark.slow
class TestTuneGemm:
    def test_tuning_measures_the_trials_and_resumes_without_losing_any(
        self, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """A first run measures its trials; a second run on the same folder, after a
        half-written line, keeps them, counts them and only measures the rest; the
        counters add up both runs' batches, rounds and relaunches."""
        work_dir = tmp_path / "tune"
        gemm = GemmParams(n=64, bn=16, timing=TimingParams(number=3, repeat=3, min_repeat_ms=5))
        first = TuneParams(
            gemm=gemm,
            trials=4,
            work_dir=work_dir,
            trials_per_iter=4,
            runner_workers=2,
            seed=1,
            timing=TimingParams(number=2, repeat=1, min_repeat_ms=5),
        )
        target = target_for(host_facts)
        result1 = tune_gemm(first, target, tracker)
        assert result1.trials_measured >= 4
        assert (result1.attempts, result1.rounds) == (1, 1)
        assert result1.batches >= 1  # 4 trials in batches of 4
        records = work_dir / RECORDS_FILE
        kept = records.read_bytes()
        with records.open("ab") as f:  # a kill in the middle of writing a record
            f.write(b'[0, [[["GetSBlock", [], ["C", "ma')
        # The runner's monitor relaunched an app during the killed attempt.
        progress = TuneProgress(work_dir)
        progress.add_relaunch("local-rpc")

        second = replace(first, trials=8)
        result2 = tune_gemm(second, target, tracker, progress)

        assert result2.trials_measured_before == result1.trials_measured
        assert result2.trials_measured >= 8
        assert records.read_bytes().startswith(kept)
        assert result2.attempts == 2
        assert result2.rounds >= 2
        assert result2.batches >= result1.batches + 1  # 4 more trials: one more batch
        assert result2.app_relaunches == ["local-rpc"]
        assert TuneProgress(work_dir).counters.batches == result2.batches
        comparison = compare_tuned(second, target, tracker, result2)
        assert comparison.serial == tracker.serial
        assert comparison.speedup > 0
        assert len(comparison.tuned_samples_s) == 3
        assert len(comparison.untuned_samples_s) == 3
        exported = export_records(work_dir, tmp_path / "export")
        assert count_trials(exported) == count_trials(work_dir)
