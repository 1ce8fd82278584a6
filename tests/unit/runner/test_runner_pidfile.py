"""Tests for farm.runner.pidfile's adoption: a new farmd ends what a killed one left running."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from farm.clock import wait_until
from farm.procs import group_alive, signal_group
from farm.runner.pidfile import (
    PIDFILE_NAME,
    FarmdRunning,
    adopt_predecessor,
    record_child,
    write_pidfile,
)

NOW = datetime(2025, 1, 1, tzinfo=UTC)
# A group leader that forks a grandchild into its group, as the tracker's PopenWorker is.
GROUP_LEADER = ("import subprocess, sys, time; "
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
                "print('ready', flush=True); time.sleep(600)")


@pytest.fixture
def group() -> Iterator[subprocess.Popen[bytes]]:
    """A process group of two sleeping processes; killed after the test."""
    process = subprocess.Popen([sys.executable, "-c", GROUP_LEADER], stdout=subprocess.PIPE,
                               start_new_session=True)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    yield process
    signal_group(process.pid)
    process.wait(timeout=30)


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=30)
    return process.pid


def predecessor_file(data_dir: Path, children: dict[str, object], pid: int | None = None) -> None:
    """A farmd.json as a farmd killed with -9 leaves it."""
    record = {"pid": dead_pid() if pid is None else pid, "started_at": NOW.isoformat(),
              "create_time": 0.0, "children": children}
    (data_dir / PIDFILE_NAME).write_text(json.dumps(record), encoding="utf-8")


def child_entry(pid: int) -> dict[str, object]:
    return {"pid": pid, "create_time": psutil.Process(pid).create_time()}


class TestAdoptPredecessor:
    def test_ends_the_whole_group_a_dead_farmd_left(
        self, tmp_path: Path, group: subprocess.Popen[bytes]
    ) -> None:
        """The group a dead farmd's file names is ended, grandchildren included, before return."""
        predecessor_file(tmp_path, {"tracker": child_entry(group.pid)})
        assert adopt_predecessor(tmp_path) == [group.pid]
        assert not group_alive(group.pid)

    def test_a_reused_pid_is_left_alone(
        self, tmp_path: Path, group: subprocess.Popen[bytes]
    ) -> None:
        """A pid whose start time differs from the recorded one belongs to another process."""
        entry = child_entry(group.pid)
        entry["create_time"] = float(entry["create_time"]) - 3600  # type: ignore[arg-type]
        predecessor_file(tmp_path, {"tracker": entry})
        assert adopt_predecessor(tmp_path) == []
        assert group.poll() is None

    def test_a_live_farmd_is_not_replaced(
        self, tmp_path: Path, group: subprocess.Popen[bytes]
    ) -> None:
        """While the farmd the file names runs, a second one refuses to start and ends nothing."""
        write_pidfile(tmp_path, NOW, pid=group.pid)
        record_path = tmp_path / PIDFILE_NAME
        record = json.loads(record_path.read_text())
        record["children"] = {"tracker": child_entry(group.pid)}
        record_path.write_text(json.dumps(record))
        with pytest.raises(FarmdRunning, match=f"pid {group.pid}"):
            adopt_predecessor(tmp_path)
        assert group.poll() is None

    def test_no_file_or_a_torn_one_ends_nothing(self, tmp_path: Path) -> None:
        """Without a readable farmd.json there is nothing to adopt."""
        assert adopt_predecessor(tmp_path) == []
        (tmp_path / PIDFILE_NAME).write_text('{"pid": 12')
        assert adopt_predecessor(tmp_path) == []

    def test_garbage_entries_are_skipped(self, tmp_path: Path) -> None:
        """Entries without a usable pid (hand-edited, older farmd) are ignored, pid 1 above all."""
        predecessor_file(
            tmp_path, {"a": {"pid": 1, "create_time": 0}, "b": "x", "c": {"pid": True}}
        )
        assert adopt_predecessor(tmp_path) == []


class TestRecordChild:
    def test_children_are_recorded_and_replaced_by_name(
        self, tmp_path: Path, group: subprocess.Popen[bytes]
    ) -> None:
        """A restarted tracker replaces the entry of the one before."""
        write_pidfile(tmp_path, NOW)
        record_child(tmp_path, "tracker", dead_pid())  # gone already: not recorded
        assert json.loads((tmp_path / PIDFILE_NAME).read_text())["children"] == {}
        record_child(tmp_path, "tracker", group.pid)
        record_child(tmp_path, "tracker", group.pid)
        children = json.loads((tmp_path / PIDFILE_NAME).read_text())["children"]
        assert children == {"tracker": child_entry(group.pid)}

    def test_a_file_of_another_farmd_is_not_touched(
        self, tmp_path: Path, group: subprocess.Popen[bytes]
    ) -> None:
        """Only the farmd that wrote farmd.json adds to it."""
        write_pidfile(tmp_path, NOW, pid=group.pid)
        before = (tmp_path / PIDFILE_NAME).read_text()
        record_child(tmp_path, "tracker", group.pid)
        assert (tmp_path / PIDFILE_NAME).read_text() == before


def test_adopted_group_is_gone_from_the_process_table(
    tmp_path: Path, group: subprocess.Popen[bytes]
) -> None:
    """After adoption the leader can be reaped with a SIGKILL status (it did not exit by itself)."""
    predecessor_file(tmp_path, {"tracker": child_entry(group.pid)})
    adopt_predecessor(tmp_path)
    assert wait_until(lambda: group.poll() is not None, 10)
    assert group.returncode == -9
