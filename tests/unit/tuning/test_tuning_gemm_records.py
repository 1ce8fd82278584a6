"""The tuning work folder: trimming, counting and exporting records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.errors import SpecError
from farm.jobs.params import GemmParams, TrackerParams, TuneParams
from farm.jobs.tuning_db import (
    RECORDS_FILE,
    WORKLOADS_FILE,
    count_trials,
    export_records,
    repair_database_file,
    repair_work_dir,
)
from farm.tuning.gemm import tune_gemm


def _record(run_s: float) -> bytes:
    return json.dumps([0, [[[], []], [run_s], {"kind": "llvm"}, []]]).encode() + b"\n"


def _work_dir(tmp_path: Path, *run_s: float, tail: bytes = b"") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / WORKLOADS_FILE).write_bytes(b'["123", "abc"]\n')
    (tmp_path / RECORDS_FILE).write_bytes(b"".join(_record(s) for s in run_s) + tail)
    return tmp_path


class TestRepair:
    def test_half_written_last_line_is_dropped(self, tmp_path: Path) -> None:
        """A line without its end is removed; complete lines stay byte for byte."""
        work_dir = _work_dir(tmp_path, 1e-4, 2e-4, tail=b'[0, [[["GetSBl')
        dropped = repair_work_dir(work_dir)
        assert dropped == len(b'[0, [[["GetSBl')
        assert (work_dir / RECORDS_FILE).read_bytes() == _record(1e-4) + _record(2e-4)

    def test_unparsable_last_line_with_newline_is_dropped(self, tmp_path: Path) -> None:
        """A final line that ends but is not JSON is removed too."""
        path = _work_dir(tmp_path, 1e-4, tail=b"[0, [tru\n") / RECORDS_FILE
        repair_database_file(path)
        assert path.read_bytes() == _record(1e-4)

    def test_intact_file_is_untouched(self, tmp_path: Path) -> None:
        """Nothing is removed from a whole file."""
        assert repair_work_dir(_work_dir(tmp_path, 1e-4)) == 0


class TestCountTrials:
    def test_failed_measurements_do_not_count(self, tmp_path: Path) -> None:
        """Records with MetaSchedule's 1e10 s failure cost are failed, not measured."""
        assert count_trials(_work_dir(tmp_path, 1e-4, 1e10, 3e-4)) == (2, 1)

    def test_empty_folder_has_no_trials(self, tmp_path: Path) -> None:
        """A fresh work folder counts zero."""
        assert count_trials(tmp_path) == (0, 0)


class TestExportRecords:
    def test_export_holds_complete_lines_only(self, tmp_path: Path) -> None:
        """The exported folder has both files, trimmed, with the same counts."""
        work_dir = _work_dir(tmp_path / "w", 1e-4, tail=b"[0,")
        out = export_records(work_dir, tmp_path / "out")
        assert (out / WORKLOADS_FILE).is_file()
        assert (out / RECORDS_FILE).read_bytes() == _record(1e-4)
        assert count_trials(out) == (1, 0)


class TestTuneGemmChecks:
    def test_cpu_target_without_core_count_is_refused(self, tmp_path: Path) -> None:
        """MetaSchedule needs num-cores; farm says so before starting anything."""
        params = TuneParams(gemm=GemmParams(n=64), trials=1, work_dir=tmp_path)
        tracker = TrackerParams("127.0.0.1", 1, "k")
        with pytest.raises(SpecError) as info:
            tune_gemm(params, {"kind": "llvm"}, tracker)
        assert info.value.field == "device.num_cores"
