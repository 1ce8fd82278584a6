"""The compile cache: one build per key, even under concurrency."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from farm.errors import CompileError
from farm.jobs.cache import CacheKey, CompileCache

KEY = CacheKey("gemm n=64 dtype=float32", "cpu bn=16 v1", {"kind": "llvm"}, "0.27.0")


class TestCompileCache:
    def test_second_lookup_is_a_hit(self, tmp_path: Path) -> None:
        """The build runs once; the next lookup returns the same file and logs a hit."""
        cache = CompileCache(tmp_path)
        calls: list[Path] = []

        def build(out: Path) -> None:
            calls.append(out)
            out.write_bytes(b"so")

        with capture_logs() as logs:
            first = cache.get_or_build(KEY, build)
            second = cache.get_or_build(KEY, build)
        assert first == second
        assert first.read_bytes() == b"so"
        assert len(calls) == 1
        assert (cache.hits, cache.misses) == (1, 1)
        assert [e["event"] for e in logs] == ["compile_cache_built", "compile_cache_hit"]

    def test_keys_differ_by_target_and_version(self) -> None:
        """Another target or TVM version is another entry."""
        other_target = CacheKey(KEY.workload, KEY.schedule, {"kind": "opencl"}, KEY.tvm_version)
        other_version = CacheKey(KEY.workload, KEY.schedule, KEY.target, "0.28.0")
        assert len({KEY.digest(), other_target.digest(), other_version.digest()}) == 3

    def test_failed_build_leaves_no_entry(self, tmp_path: Path) -> None:
        """A build that raises caches nothing and leaves no temporary file."""
        cache = CompileCache(tmp_path)

        def build(out: Path) -> None:
            out.write_bytes(b"half")
            raise CompileError("gemm", "boom")

        with pytest.raises(CompileError):
            cache.get_or_build(KEY, build)
        assert cache.entries() == []
        assert not any(p.name.startswith(".") for p in tmp_path.rglob("*"))

    def test_concurrent_lookups_build_once(self, tmp_path: Path) -> None:
        """Four phones asking at once for one key cause one build, and all get the whole file."""
        cache = CompileCache(tmp_path)
        started = threading.Barrier(4)
        builds: list[int] = []

        def build(out: Path) -> None:
            builds.append(1)
            out.write_bytes(b"x" * 1_000_000)

        results: list[Path] = []

        def phone() -> None:
            started.wait()
            results.append(cache.get_or_build(KEY, build))

        threads = [threading.Thread(target=phone) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(builds) == 1
        assert len(set(results)) == 1
        assert results[0].stat().st_size == 1_000_000
        assert (cache.hits, cache.misses) == (3, 1)
