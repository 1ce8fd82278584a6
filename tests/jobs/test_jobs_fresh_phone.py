"""A freshly started virtual phone, measured twice at the default settings, is not called different.

The issue's finding: the first run on a freshly provisioned phone was far
slower than the next (0.56 of it), and nothing warmed it up. Here one
virtual phone's RPC process as ``farm-phones serve`` starts it (not made
quiet: it shares the loaded host like any process), measured by
:func:`farm.jobs.gemm.run_gemm` exactly as a gemm job does at the defaults
(the spec's default timing and threads, ``[results]`` warm-up and sampling),
the first measurement as soon as the phone has registered.

What is asserted: the first run is not called different from the next by
``[results] change_threshold`` or more (the defect gave 0.56, "faster"); a
noisy pair stays undecided. A verdict of 2.5-5% can still come on a shared
host: CI measured the second run 3.3% faster at p 7e-15 after a 1 s steady
warm-up, host load moving between the two runs while each run's samples
agree, which a test of samples within runs cannot tell from a change of the
build. How
often unchanged runs are called different is measured where the phones are
quiet (tests/jobs/test_jobs_throttle_compare.py: at most 1 of 20).
"""

from __future__ import annotations

from pathlib import Path

from farm.config import ResultSettings
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import run_gemm
from farm.jobs.params import DeviceFacts, TrackerParams
from farm.jobs.targets import target_for
from farm.kinds.gemm import GemmParams, gemm_params
from farm.sampling import SamplingRule
from farm.stats import Verdict, compare_samples
from farm.virtual.testing import rpc_app


def test_first_run_after_start_and_the_next_are_not_called_different(tmp_path: Path) -> None:
    """Two gemm 256 measurements, the first right after start: neither slower nor faster."""
    defaults = ResultSettings()
    rule = SamplingRule.of(defaults)
    params = gemm_params(GemmParams(n=256))
    target = target_for(DeviceFacts(abi="x86_64", host_runtime=True, num_cores=2))
    cache = CompileCache(tmp_path / "cache")
    with rpc_app(tmp_path, key="fresh") as app:
        tracker = TrackerParams(app.tracker_host, app.tracker_port, app.key,
                                session_timeout_s=900, serial="fresh", connect_timeout_s=60)
        first = run_gemm(params, target, tracker, cache, sampling=rule)
        second = run_gemm(params, target, tracker, cache, sampling=rule)
    assert first.warmup is not None and first.warmup.runs >= 6
    assert len(first.samples_s) >= defaults.min_samples <= len(second.samples_s)
    comparison = compare_samples(first.samples_s, second.samples_s,
                                 threshold=defaults.change_threshold, alpha=defaults.alpha,
                                 max_cv=defaults.max_cv)
    called = comparison.verdict in (Verdict.SLOWER, Verdict.FASTER)
    assert not (called and abs(comparison.ratio - 1.0) >= defaults.change_threshold), (
        comparison, first.warmup)
