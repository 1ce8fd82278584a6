"""``<data_dir>/farmd.json``: how farmctl learns whether a farmd is running.

farmd writes ``{"pid": ..., "started_at": ..., "create_time": ...}`` at start
and removes it at a clean stop. A file left by a farmd that was killed names a
dead pid, or a pid since reused by another process: ``create_time`` (psutil's
process start time) tells the two apart.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil

__all__ = ["PIDFILE_NAME", "FarmdStatus", "farmd_status", "remove_pidfile", "write_pidfile"]

PIDFILE_NAME = "farmd.json"
_CREATE_TIME_SLACK_S = 1.0  # psutil rounds start times; allow for it


@dataclass(frozen=True)
class FarmdStatus:
    """Whether farmd runs for a data folder.

    Attributes:
        running: a live farmd process owns the pid file.
        pid: the pid the file names, or None without a file.
        reason: in words, e.g. ``"no farmd.json in /var/lib/farm"``.
    """

    running: bool
    pid: int | None
    reason: str


def write_pidfile(data_dir: Path, now: datetime, pid: int | None = None) -> Path:
    """Record that this process (or ``pid``) is farmd for ``data_dir``.

    Returns:
        The file's path.
    """
    pid = os.getpid() if pid is None else pid
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / PIDFILE_NAME
    tmp = data_dir / f".{PIDFILE_NAME}.{pid}.tmp"
    record = {"pid": pid, "started_at": now.isoformat(), "create_time": psutil.Process(pid).create_time()}
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)
    return path


def remove_pidfile(data_dir: Path, pid: int | None = None) -> None:
    """Remove the pid file if it names ``pid`` (this process by default)."""
    path = data_dir / PIDFILE_NAME
    pid = os.getpid() if pid is None else pid
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def farmd_status(data_dir: Path) -> FarmdStatus:
    """Whether the farmd named by ``<data_dir>/farmd.json`` is alive."""
    path = data_dir / PIDFILE_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        pid = int(record["pid"])
    except FileNotFoundError:
        return FarmdStatus(False, None, f"no {PIDFILE_NAME} in {data_dir}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return FarmdStatus(False, None, f"unreadable {path}: {exc}")
    try:
        process = psutil.Process(pid)
        alive = process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return FarmdStatus(False, pid, f"farmd pid {pid} is not running")
    expected = record.get("create_time")
    if isinstance(expected, (int, float)) and abs(created - expected) > _CREATE_TIME_SLACK_S:
        return FarmdStatus(False, pid, f"pid {pid} now belongs to another process")
    if not alive:
        return FarmdStatus(False, pid, f"farmd pid {pid} is not running")
    return FarmdStatus(True, pid, f"farmd runs as pid {pid}")
