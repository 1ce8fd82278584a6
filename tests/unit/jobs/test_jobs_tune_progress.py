"""A tuning job's counters in its work folder, across attempts."""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

from farm.jobs.tune_progress import PROGRESS_FILE, TuneCounters, TuneProgress


class TestTuneProgress:
    def test_counters_add_up_across_reopenings(self, tmp_path: Path) -> None:
        """A second attempt opening the folder starts from the first attempt's counters."""
        first = TuneProgress(tmp_path)
        first.add(attempts=1)
        first.add(rounds=1, batches=3)
        first.add_relaunch("A")
        second = TuneProgress(tmp_path)
        second.add(attempts=1)
        second.add(rounds=1, batches=2)
        second.add_relaunch("B")
        assert TuneProgress(tmp_path).counters == TuneCounters(
            attempts=2, rounds=2, batches=5, app_relaunches=("A", "B"))

    def test_every_change_is_on_disk_at_once(self, tmp_path: Path) -> None:
        """A kill right after a batch loses nothing: the file already holds it."""
        TuneProgress(tmp_path).add(batches=1)
        record = json.loads((tmp_path / PROGRESS_FILE).read_text())
        assert record == {"attempts": 0, "rounds": 0, "batches": 1, "app_relaunches": []}

    def test_file_is_private(self, tmp_path: Path) -> None:
        """The counters file is readable by its owner only (0600)."""
        TuneProgress(tmp_path).add(attempts=1)
        assert stat.S_IMODE((tmp_path / PROGRESS_FILE).stat().st_mode) == 0o600

    def test_concurrent_updates_are_all_kept(self, tmp_path: Path) -> None:
        """The monitor thread's relaunches and the tuning thread's batches never overwrite each
        other."""
        progress = TuneProgress(tmp_path)

        def relaunch() -> None:
            for _ in range(50):
                progress.add_relaunch("A")

        thread = threading.Thread(target=relaunch)
        thread.start()
        for _ in range(50):
            progress.add(batches=1)
        thread.join()
        reread = TuneProgress(tmp_path).counters
        assert (reread.batches, len(reread.app_relaunches)) == (50, 50)

    def test_torn_or_foreign_file_restarts_the_counters(self, tmp_path: Path) -> None:
        """An unparsable file, or one with wrong types, counts as zero instead of failing the
        job."""
        (tmp_path / PROGRESS_FILE).write_text('{"attempts": 2, "rou')
        assert TuneProgress(tmp_path).counters == TuneCounters()
        (tmp_path / PROGRESS_FILE).write_text(
            '{"attempts": -1, "rounds": "3", "batches": 4, "app_relaunches": ["A", 5]}')
        assert TuneProgress(tmp_path).counters == TuneCounters(batches=4, app_relaunches=("A",))
