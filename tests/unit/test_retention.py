"""Retention: health samples thinned after a day, run folders and compile cache pruned.

Results and samples are never touched (nothing here reaches them).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from farm.clock import FakeClock
from farm.config import RetentionSettings, Settings
from farm.daemon import Farmd
from farm.jobs.cache import CacheKey, CompileCache
from farm.queue import Store
from farm.retention import (
    DirEntry,
    entries_to_prune,
    health_ids_to_drop,
    prune_compile_cache,
    prune_run_dirs,
)
from farm.runner.dispatcher import Dispatcher

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DAY_S = 86400.0
MB = 1024 * 1024


def _dir(path: Path, size_bytes: int, age_s: float) -> Path:
    """A folder holding ``size_bytes`` in one file, last written ``age_s`` before NOW."""
    path.mkdir(parents=True)
    (path / "data").write_bytes(b"x" * size_bytes)
    stamp = NOW.timestamp() - age_s
    os.utime(path, (stamp, stamp))
    return path


class TestHealthIdsToDrop:
    def test_keeps_the_latest_sample_per_phone_per_bucket(self) -> None:
        """Of each (serial, 10-minute bucket) only the last sample stays."""
        t0 = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)
        rows = [
            (1, "A", t0), (2, "A", t0 + timedelta(minutes=3)), (3, "A", t0 + timedelta(minutes=9)),
            (5, "A", t0 + timedelta(minutes=10)), (6, "A", t0 + timedelta(minutes=12)),
            (4, "B", t0 + timedelta(minutes=1)),
        ]  # fmt: skip
        assert list(health_ids_to_drop(rows, 600)) == [1, 2, 5]

    def test_same_time_keeps_the_highest_id(self) -> None:
        """Two samples at one instant: the later row (higher id) is the one kept."""
        t0 = datetime(2026, 3, 1, tzinfo=UTC)
        assert list(health_ids_to_drop([(1, "A", t0), (2, "A", t0)], 600)) == [1]

    def test_unsorted_rows_are_refused(self) -> None:
        """Rows must come sorted by serial, at, id (only the current bucket is held)."""
        t0 = datetime(2026, 3, 1, tzinfo=UTC)
        rows = [(2, "A", t0 + timedelta(seconds=30)), (1, "A", t0)]
        with pytest.raises(ValueError, match="sorted"):
            list(health_ids_to_drop(rows, 600))

    def test_bucket_must_be_positive(self) -> None:
        """A zero bucket is a bug in the caller."""
        with pytest.raises(ValueError):
            list(health_ids_to_drop([], 0))


class TestEntriesToPrune:
    def test_old_entries_go(self) -> None:
        """Entries older than the limit go, younger ones stay."""
        old, young = DirEntry(Path("old"), 0.0, 1), DirEntry(Path("young"), 90.0, 1)
        assert entries_to_prune([young, old], now=100.0, max_age_s=50, max_bytes=10) == [old]

    def test_oldest_go_until_the_rest_fit(self) -> None:
        """Over the size limit, the oldest entries go first, only as many as needed."""
        entries = [DirEntry(Path(str(i)), float(i), 10) for i in range(5)]
        chosen = entries_to_prune(entries, now=5.0, max_age_s=1e9, max_bytes=25)
        assert [e.path for e in chosen] == [Path("0"), Path("1"), Path("2")]

    def test_kept_entries_are_never_chosen(self) -> None:
        """An entry in use stays however old, and the next oldest goes instead."""
        entries = [DirEntry(Path(str(i)), float(i), 10) for i in range(3)]
        chosen = entries_to_prune(entries, now=1e9, max_age_s=10, max_bytes=1e9,
                                  keep={Path("0")})
        assert [e.path for e in chosen] == [Path("1"), Path("2")]


class TestDownsampleHealth:
    def test_old_samples_are_thinned_and_recent_ones_kept(self, store: Store) -> None:
        """Samples older than the cutoff keep one per phone per bucket; the last day is whole."""
        old = NOW - timedelta(days=2)
        for minute in range(0, 30, 1):  # 30 probes a minute apart, three 10-minute buckets
            store.record_health("A", old + timedelta(minutes=minute), {"battery_pct": minute})
        for minute in range(5):
            store.record_health("A", NOW - timedelta(minutes=minute), {"battery_pct": 90})
        dropped = store.downsample_health(NOW - timedelta(days=1), 600)
        assert dropped == 27
        samples = store.health_samples("A", limit=100)
        assert len(samples) == 5 + 3
        kept_old = sorted(s["battery_pct"] for s in samples if s["at"] < NOW - timedelta(days=1))
        assert kept_old == [9, 19, 29]  # the latest of each bucket

    def test_second_pass_drops_nothing(self, store: Store) -> None:
        """Downsampling is idempotent."""
        for minute in range(20):
            store.record_health("A", NOW - timedelta(days=3, minutes=minute), {})
        assert store.downsample_health(NOW, 600) > 0
        assert store.downsample_health(NOW, 600) == 0


class TestPruneRunDirs:
    def test_old_and_oversized_run_folders_go_running_ones_stay(self, tmp_path: Path) -> None:
        """Old folders go, then the oldest until under the size limit; a running one stays."""
        runs = tmp_path / "runs"
        _dir(runs / "attempt-1", 10, age_s=30 * DAY_S)  # too old
        _dir(runs / "attempt-2", 10, age_s=40 * DAY_S)  # too old, but running
        _dir(runs / "attempt-3", MB, age_s=3 * DAY_S)  # oldest of the rest: over the size
        _dir(runs / "attempt-4", MB, age_s=1 * DAY_S)
        (runs / "settings.json").write_text("{}")  # not a run folder
        settings = RetentionSettings(run_dirs_max_age_days=14, run_dirs_max_mb=1.5)
        removed = prune_run_dirs(runs, NOW, settings, keep={"attempt-2"})
        assert sorted(p.name for p in removed) == ["attempt-1", "attempt-3"]
        assert sorted(p.name for p in runs.iterdir()) == ["attempt-2", "attempt-4",
                                                          "settings.json"]

    def test_missing_folder_is_nothing_to_do(self, tmp_path: Path) -> None:
        """A farm that never ran a job has no runs folder."""
        assert prune_run_dirs(tmp_path / "runs", NOW, RetentionSettings()) == []


class TestPruneCompileCache:
    def _entry(self, cache: CompileCache, name: str, size_bytes: int) -> Path:
        key = CacheKey(name, "cpu v1", {"kind": "llvm"}, "0.27.0")
        return cache.get_or_build(key, lambda out: out.write_bytes(b"x" * size_bytes))

    def test_unused_entries_go_used_ones_stay(self, tmp_path: Path) -> None:
        """An entry unused for longer than the limit goes; a hit counts as a use."""
        cache = CompileCache(tmp_path / "cache")
        stale = self._entry(cache, "stale", 10)
        used = self._entry(cache, "used", 10)
        long_ago = NOW.timestamp() - 60 * DAY_S
        for library in (stale, used):
            os.utime(library, (long_ago, long_ago))
        self._entry(cache, "used", 10)  # a hit: touched now
        settings = RetentionSettings(compile_cache_max_age_days=30)
        removed = prune_compile_cache(cache.root, datetime.now(UTC), settings)
        assert removed == [stale.parent]
        assert not stale.exists() and used.exists()
        assert self._entry(cache, "stale", 10).is_file()  # rebuilt on the next use
        assert cache.misses == 3

    def test_least_recently_used_go_when_over_size(self, tmp_path: Path) -> None:
        """Over the size limit the least recently used entries go first."""
        cache = CompileCache(tmp_path / "cache")
        libraries = [self._entry(cache, f"w{i}", MB) for i in range(3)]
        for age_days, library in zip((3, 1, 2), libraries, strict=True):
            stamp = NOW.timestamp() - age_days * DAY_S
            os.utime(library, (stamp, stamp))
        settings = RetentionSettings(compile_cache_max_mb=2.5)
        removed = prune_compile_cache(cache.root, NOW, settings)
        assert removed == [libraries[0].parent]


class TestFarmdRetention:
    def test_farmd_prunes_with_its_settings_and_keeps_running_attempts(
        self, tmp_path: Path
    ) -> None:
        """farmd's periodic job applies [retention] to its runs folder and database."""
        settings = Settings(data_dir=tmp_path, retention={"run_dirs_max_age_days": 7})
        farmd = Farmd(settings, clock=FakeClock(NOW))
        with Store(f"sqlite:///{tmp_path / 'farm.db'}") as store:
            farmd.store = store
            farmd.dispatcher = Dispatcher(store, settings, farmd.clock)
            runs = farmd.dispatcher.runs_dir
            _dir(runs / "attempt-1", 10, age_s=8 * DAY_S)
            _dir(runs / "attempt-2", 10, age_s=8 * DAY_S)
            farmd.dispatcher.children[2] = object()  # type: ignore[assignment]
            store.record_health("A", NOW - timedelta(days=2), {})
            store.record_health("A", NOW - timedelta(days=2, seconds=-1), {})
            report = farmd.apply_retention()
            assert (report.run_dirs, report.health_samples) == (1, 1)
            assert sorted(p.name for p in runs.glob("attempt-*")) == ["attempt-2"]
