"""The outcome file a child leaves, and the farmd pid file."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from farm.runner.outcome import OUTCOME_FILE, ChildOutcome, read_outcome, write_outcome
from farm.runner.pidfile import PIDFILE_NAME, farmd_status, remove_pidfile, write_pidfile

NOW = datetime(2025, 1, 1, tzinfo=UTC)


class TestOutcomeFile:
    def test_round_trip(self, tmp_path: Path) -> None:
        """What a child writes is what the parent reads."""
        outcome = ChildOutcome(
            "failed", True, "requeued", "SessionError", "other_phone", "dropped", "R1"
        )
        write_outcome(tmp_path / "run", outcome)
        assert read_outcome(tmp_path / "run") == outcome

    def test_missing_file_means_no_outcome(self, tmp_path: Path) -> None:
        """A child that left nothing crashed: no outcome."""
        assert read_outcome(tmp_path) is None

    def test_torn_file_means_no_outcome(self, tmp_path: Path) -> None:
        """A half-written file counts as no outcome rather than an error."""
        (tmp_path / OUTCOME_FILE).write_text('{"status": "succ')
        assert read_outcome(tmp_path) is None


class TestPidFile:
    def test_own_pid_is_running(self, tmp_path: Path) -> None:
        """A pid file naming a live process reports farmd running."""
        write_pidfile(tmp_path, NOW)
        status = farmd_status(tmp_path)
        assert status.running and status.pid is not None

    def test_no_file_is_not_running(self, tmp_path: Path) -> None:
        """Without farmd.json no farmd runs, and the reason says so."""
        status = farmd_status(tmp_path)
        assert not status.running
        assert PIDFILE_NAME in status.reason

    def test_dead_pid_is_not_running(self, tmp_path: Path) -> None:
        """A pid file left by a process that has exited reports not running."""
        process = subprocess.Popen([sys.executable, "-c", "pass"])
        write_pidfile(tmp_path, NOW, pid=process.pid)
        process.wait(timeout=30)
        assert not farmd_status(tmp_path).running

    def test_remove_only_own_file(self, tmp_path: Path) -> None:
        """remove_pidfile leaves a file that names another pid."""
        write_pidfile(tmp_path, NOW)
        remove_pidfile(tmp_path, pid=1)
        assert (tmp_path / PIDFILE_NAME).exists()
        remove_pidfile(tmp_path)
        assert not (tmp_path / PIDFILE_NAME).exists()
