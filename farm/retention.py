"""Retention: what farm keeps of its history, and for how long.

Results and their samples are never pruned: they are what farm is for.
Everything else grows without bound unless trimmed, so farmd runs
:func:`apply_retention` every ``retention.interval_s``:

* health samples older than ``health_full_days`` are downsampled to one per
  phone per ``health_bucket_s`` (the latest of each bucket: the phone's state at
  the bucket's end);
* run folders (``<data_dir>/runs/attempt-N``) older than
  ``run_dirs_max_age_days`` are removed, then the oldest until all of them fit
  in ``run_dirs_max_mb``; those of running attempts are kept whatever their age;
* compile cache entries (:mod:`farm.jobs.cache`) unused for
  ``compile_cache_max_age_days`` are removed, then the least recently used
  until the cache fits in ``compile_cache_max_mb``.

The choices are pure functions of plain data (:func:`health_ids_to_drop`,
:func:`entries_to_prune`); the I/O around them is thin.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from farm.jobs.cache import LIBRARY_NAME
from farm.queue.thinning import health_ids_to_drop

if TYPE_CHECKING:
    from farm.config import RetentionSettings
    from farm.queue.store import Store

log = structlog.get_logger(__name__)

__all__ = [
    "DirEntry",
    "RetentionReport",
    "apply_retention",
    "entries_to_prune",
    "health_ids_to_drop",
    "prune_compile_cache",
    "prune_run_dirs",
]

_DAY_S = 86400.0
_MB = 1024 * 1024


@dataclass(frozen=True)
class DirEntry:
    """A prunable thing on disk.

    Attributes:
        path: the folder to remove.
        mtime: when it was last written (or used), epoch seconds.
        size_bytes: bytes it holds.
    """

    path: Path
    mtime: float
    size_bytes: int


def entries_to_prune(
    entries: Iterable[DirEntry],
    now: float,
    max_age_s: float,
    max_bytes: float,
    keep: Collection[Path] = (),
) -> list[DirEntry]:
    """Entries older than ``max_age_s``, then the oldest until the rest fit in ``max_bytes``.

    Args:
        entries: candidates.
        now: epoch seconds.
        max_age_s: entries older than this go.
        max_bytes: the most the remaining entries may hold together (those in
            ``keep`` count, but are never chosen).
        keep: paths never pruned (in use).

    Returns:
        The entries to remove, oldest first.
    """
    ordered = sorted(entries, key=lambda e: (e.mtime, str(e.path)))
    total = sum(e.size_bytes for e in ordered)
    prune: list[DirEntry] = []
    for entry in ordered:
        if entry.path in keep:
            continue
        if now - entry.mtime > max_age_s or total > max_bytes:
            prune.append(entry)
            total -= entry.size_bytes
    return prune


def _tree_size(path: Path) -> int:
    size = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                size += (Path(root) / name).lstat().st_size
            except OSError:
                continue
    return size


def _scan(paths: Iterable[Path], mtime_of: Path | None = None) -> list[DirEntry]:
    entries = []
    for path in paths:
        try:
            stamp = (path / mtime_of if mtime_of is not None else path).stat().st_mtime
        except OSError:
            continue
        entries.append(DirEntry(path, stamp, _tree_size(path)))
    return entries


def prune_run_dirs(
    runs_dir: Path, now: datetime, settings: RetentionSettings, keep: Collection[str] = ()
) -> list[Path]:
    """Remove old run folders (``attempt-N``) under ``runs_dir``; returns what went.

    Args:
        runs_dir: ``<data_dir>/runs``.
        now: the time to measure age against.
        settings: the limits.
        keep: folder names never removed (running attempts).
    """
    if not runs_dir.is_dir():
        return []
    entries = _scan(p for p in runs_dir.glob("attempt-*") if p.is_dir())
    chosen = entries_to_prune(
        entries, now.timestamp(), settings.run_dirs_max_age_days * _DAY_S,
        settings.run_dirs_max_mb * _MB, keep={runs_dir / name for name in keep},
    )  # fmt: skip
    for entry in chosen:
        shutil.rmtree(entry.path, ignore_errors=True)
    return [entry.path for entry in chosen]


def prune_compile_cache(cache_root: Path, now: datetime, settings: RetentionSettings) -> list[Path]:
    """Remove unused compile cache entries (age from the last use); returns what went.

    An entry is removed under its build lock, so a build of the same key waits
    and then builds it again. A job that took the library's path just before
    keeps its open file (Linux unlinks lazily); one that had not opened it yet
    fails its upload and is retried, which the age limit makes rare.
    """
    if not cache_root.is_dir():
        return []
    entries = _scan((p for p in cache_root.iterdir() if p.is_dir()), mtime_of=Path(LIBRARY_NAME))
    chosen = entries_to_prune(
        entries, now.timestamp(), settings.compile_cache_max_age_days * _DAY_S,
        settings.compile_cache_max_mb * _MB,
    )  # fmt: skip
    for entry in chosen:
        # The lock file stays: a builder waiting on it must lock the file the next one will.
        with (cache_root / f"{entry.path.name}.lock").open("a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            shutil.rmtree(entry.path, ignore_errors=True)
    return [entry.path for entry in chosen]


@dataclass(frozen=True)
class RetentionReport:
    """What one retention pass removed."""

    health_samples: int
    run_dirs: int
    cache_entries: int


def apply_retention(
    store: Store,
    settings: RetentionSettings,
    now: datetime,
    *,
    runs_dir: Path,
    cache_root: Path,
    keep_runs: Collection[str] = (),
) -> RetentionReport:
    """One retention pass: thin health samples, prune run folders and the compile cache.

    Raises:
        StoreError: the database failed (nothing on disk was touched yet).
    """
    cutoff = now - timedelta(days=settings.health_full_days)
    dropped = store.downsample_health(cutoff, settings.health_bucket_s)
    runs = prune_run_dirs(runs_dir, now, settings, keep_runs)
    cached = prune_compile_cache(cache_root, now, settings)
    report = RetentionReport(dropped, len(runs), len(cached))
    log.info("retention_applied", health_samples_dropped=dropped, run_dirs_removed=len(runs),
             cache_entries_removed=len(cached))
    return report
