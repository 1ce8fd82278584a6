"""``<data_dir>/farmd.json``: which farmd runs for a data folder, and what it started.

farmd writes ``{"pid": ..., "started_at": ..., "create_time": ..., "children":
{...}}`` at start and removes it at a clean stop. A file left by a farmd that
was killed names a dead pid, or a pid since reused by another process:
``create_time`` (psutil's process start time) tells the two apart.

``children`` names the long-lived processes farmd started (the tracker), each
the leader of its own process group: ``{"tracker": {"pid": 4243, "create_time":
...}}``. They end with farmd by themselves (:func:`farm.procs.end_group_with_parent`);
as a second line, a new farmd calls :func:`adopt_predecessor`, which ends the
groups its killed predecessor left behind before it starts its own.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from farm import logs
from farm.clock import wait_until
from farm.errors import InfraFault
from farm.privacy import write_private
from farm.procs import group_alive, read_pid_record, signal_group

__all__ = [
    "PIDFILE_NAME", "FarmdRunning", "FarmdStatus", "adopt_predecessor", "farmd_status",
    "record_child", "remove_pidfile", "write_pidfile",
]

log = logs.get_logger(__name__)

PIDFILE_NAME = "farmd.json"
GROUP_GONE_DEADLINE_S = 10.0
_CREATE_TIME_SLACK_S = 1.0  # psutil rounds start times; allow for it
# record_child reads, changes and writes the file; farmd's tracker watch and
# the dispatcher's tick (its zygote) call it from different threads.
_RECORD_LOCK = threading.Lock()


class FarmdRunning(InfraFault):
    """Another live farmd owns the data folder; two would fight over phones and ports."""

    def __init__(self, data_dir: Path, pid: int) -> None:
        self.data_dir = data_dir
        self.pid = pid
        super().__init__(f"farmd already runs for {data_dir} as pid {pid}")


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
    record = {"pid": pid, "started_at": now.isoformat(),
              "create_time": psutil.Process(pid).create_time(), "children": {}}
    return _write(data_dir, record)


def record_child(data_dir: Path, name: str, pid: int) -> None:
    """Note in this farmd's pid file that it started process group ``pid`` as ``name``.

    Replaces an earlier child of that name (a restarted tracker). Nothing is
    written if the file is missing or names another farmd. Thread-safe.
    """
    try:
        create_time = psutil.Process(pid).create_time()
    except psutil.Error:
        return  # it is gone already: nothing to end later
    with _RECORD_LOCK:
        record = read_pid_record(data_dir / PIDFILE_NAME)
        if record is None or record.get("pid") != os.getpid():
            return
        children = record.get("children")
        record["children"] = {**(children if isinstance(children, dict) else {}),
                              name: {"pid": pid, "create_time": create_time}}
        _write(data_dir, record)


def adopt_predecessor(data_dir: Path, deadline_s: float = GROUP_GONE_DEADLINE_S) -> list[int]:
    """End the process groups a dead farmd of ``data_dir`` left running; call before starting.

    A child counts only if its pid still belongs to the process that was
    started (same ``create_time``), so a reused pid is never killed.

    Returns:
        The pids of the groups ended.

    Raises:
        FarmdRunning: the farmd the file names is alive (and is not this process).
    """
    path = data_dir / PIDFILE_NAME
    record = read_pid_record(path)
    if record is None:
        return []
    status = farmd_status(data_dir)
    if status.running and status.pid != os.getpid():
        raise FarmdRunning(data_dir, status.pid)  # type: ignore[arg-type]
    children = record.get("children")
    ended = []
    for name, child in (children.items() if isinstance(children, dict) else ()):
        pid, create_time = _pid_and_time(child)
        if pid is None or not _same_process(pid, create_time):
            continue
        signal_group(pid, signal.SIGKILL)
        if not wait_until(functools.partial(_group_gone, pid), deadline_s):
            log.warning("predecessor_child_survived", child=name, pid=pid, deadline_s=deadline_s)
        log.info("predecessor_child_ended", child=name, pid=pid,
                 predecessor_pid=record.get("pid"))
        ended.append(pid)
    return ended


def remove_pidfile(data_dir: Path, pid: int | None = None) -> None:
    """Remove the pid file if it names ``pid`` (this process by default)."""
    path = data_dir / PIDFILE_NAME
    pid = os.getpid() if pid is None else pid
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def _write(data_dir: Path, record: dict[str, Any]) -> Path:
    return write_private(data_dir / PIDFILE_NAME, json.dumps(record))


def _pid_and_time(child: object) -> tuple[int | None, float | None]:
    if not isinstance(child, dict):
        return None, None
    pid, create_time = child.get("pid"), child.get("create_time")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return None, None
    return pid, float(create_time) if isinstance(create_time, (int, float)) else None


def _group_gone(pgid: int) -> bool:
    return not group_alive(pgid)


def _same_process(pid: int, create_time: float | None) -> bool:
    """Whether ``pid`` is alive and is the process started at ``create_time``."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except psutil.Error:
        return False
    return create_time is not None and abs(created - create_time) <= _CREATE_TIME_SLACK_S


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
