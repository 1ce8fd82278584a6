"""Compile once per target: one build serves four phones."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from farm.jobs.cache import CompileCache
from farm.jobs.gemm import build_gemm, run_gemm
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.params import DeviceFacts, GemmParams, TimingParams, TrackerParams
from farm.jobs.targets import target_for

PARAMS = GemmParams(n=64, bn=16, timing=TimingParams(number=1, repeat=2, min_repeat_ms=1))


def _build_in_child(cache_root: str) -> int:
    """Build in a fresh process (like a job's child process); return its build count."""
    cache = CompileCache(Path(cache_root))
    build_gemm(PARAMS, target_for(DeviceFacts(abi="x86_64", host_runtime=True, num_cores=2)), cache)
    return cache.misses


class TestCompileOnce:
    def test_four_phones_of_one_target_share_one_build(
        self, cluster: LocalCluster, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """Four phones, each behind its own tracker key, run GEMM from a single build."""
        keys = [f"compile-once-{i}" for i in range(4)]
        for key in keys:
            cluster.add_servers(key, 1)
        cache = CompileCache(tmp_path)
        results = [
            run_gemm(
                PARAMS,
                target_for(host_facts),
                TrackerParams(cluster.host, cluster.port, key, 60, key),
                cache,
            )
            for key in keys
        ]
        assert (cache.misses, cache.hits) == (1, 3)
        assert len(cache.entries()) == 1
        assert {r.library for r in results} == {str(cache.entries()[0])}
        assert all(r.gflops > 0 for r in results)

    def test_concurrent_job_processes_build_once(self, tmp_path: Path) -> None:
        """Four job processes compiling the same key at once cause exactly one build."""
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(4) as pool:
            builds = pool.map(_build_in_child, [str(tmp_path)] * 4, chunksize=1)
        assert sum(builds) == 1
        assert len(CompileCache(tmp_path).entries()) == 1
