"""GEMM over a real RPC session against a local tracker and servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.errors import SessionError, SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import run_gemm
from farm.jobs.params import (
    DeviceFacts,
    GemmParams,
    GemmSchedule,
    ThreadPoolParams,
    TimingParams,
    TrackerParams,
)
from farm.jobs.targets import target_for


class TestRunGemm:
    @pytest.mark.parametrize("n", [64, 128])
    def test_result_matches_numpy_and_keeps_every_sample(
        self, n: int, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """C is checked against numpy, GFLOPS is positive and there is one sample per repeat."""
        params = GemmParams(n=n, bn=16, timing=TimingParams(number=2, repeat=4, min_repeat_ms=1))
        result = run_gemm(params, target_for(host_facts), tracker, CompileCache(tmp_path))
        assert result.max_abs_err < 1e-2
        assert result.gflops > 0
        assert len(result.samples_s) == 4
        assert all(s > 0 for s in result.samples_s)
        assert result.gflops == pytest.approx(2 * n**3 / result.mean_s / 1e9)

    def test_thread_pool_settings_are_applied_and_recorded(
        self, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """The phone's runtime reports the thread count asked for, and the result records it."""
        params = GemmParams(
            n=64,
            bn=16,
            timing=TimingParams(1, 1, 1),
            threads=ThreadPoolParams(affinity_mode=0, num_threads=1),
        )
        result = run_gemm(params, target_for(host_facts), tracker, CompileCache(tmp_path))
        assert result.threads is not None
        assert result.threads.num_threads_requested == 1
        assert result.threads.num_threads == 1

    def test_block_size_that_does_not_divide_n_is_the_users_error(
        self, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """bn must divide N; the error names the field."""
        with pytest.raises(SpecError) as info:
            run_gemm(
                GemmParams(n=100, bn=16), target_for(host_facts), tracker, CompileCache(tmp_path)
            )
        assert info.value.field == "params.bn"

    def test_unknown_key_is_a_session_error(
        self, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """Asking for a key no server serves fails as the phone's fault, within the deadline."""
        nobody = TrackerParams(tracker.host, tracker.port, "nobody", 60, "ghost", 2.0)
        with pytest.raises(SessionError) as info:
            run_gemm(
                GemmParams(n=64, bn=16), target_for(host_facts), nobody, CompileCache(tmp_path)
            )
        assert info.value.serial == "ghost"


class TestNaiveGemm:
    def test_naive_gemm_runs_and_its_result_says_so(
        self, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """--schedule naive times the untiled kernel, checked against numpy, and records it."""
        params = GemmParams(n=64, schedule=GemmSchedule.NAIVE,
                            timing=TimingParams(number=2, repeat=3, min_repeat_ms=1))
        result = run_gemm(params, target_for(host_facts), tracker, CompileCache(tmp_path))
        assert result.schedule == "naive"
        assert result.max_abs_err < 1e-2
        assert len(result.samples_s) == 3
