"""A work folder seeded with fleet records, and database folders read back (no TVM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from farm.errors import SpecError
from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE, count_trials
from farm.tuning.seed import read_database, seed_work_dir, target_key

TARGET = {"keys": ["cpu"], "kind": "llvm", "num-cores": 4, "tag": ""}


def body(trace: int, run_s: float) -> list[Any]:
    """A record body ``[trace, run_secs, target, args_info]`` whose trace is ``[[trace], []]``."""
    return [[[trace], []], [run_s], TARGET, []]


def work_dir(tmp_path: Path, records: list[list[Any]]) -> Path:
    """A work folder with two workloads and ``records`` (``[index, body]`` lines)."""
    (tmp_path / WORKLOADS_FILE).write_text('["111", "bQ=="]\n["222", "bg=="]\n')
    (tmp_path / RECORDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


class TestSeed:
    def test_seeds_up_to_what_is_wanted_skipping_measured_traces(self, tmp_path: Path) -> None:
        """Records are appended under their workload's line, at most as many as wanted, and a
        trace the folder measured already is not added again (a retried attempt adds none)."""
        folder = work_dir(tmp_path, [[0, body(1, 0.002)]])
        seeds = {0: [body(1, 0.002), body(2, 0.001), body(3, 0.003)], 1: [body(4, 0.005)]}
        assert seed_work_dir(folder, seeds, {0: 1, 1: 5}) == 2
        assert count_trials(folder, 0) == (2, 0) and count_trials(folder, 1) == (1, 0)
        assert seed_work_dir(folder, seeds, {0: 0, 1: 5}) == 0

    def test_target_key_ignores_key_order_and_boolean_spelling(self) -> None:
        """A target as a record holds it and as TVM exports it (booleans as 1/0) match."""
        assert target_key({"b": True, "a": [1]}) == target_key({"a": [1], "b": 1})


class TestRead:
    def test_reads_workloads_and_records(self, tmp_path: Path) -> None:
        """A database folder reads as its workload lines and record lines."""
        database = read_database(work_dir(tmp_path, [[1, body(1, 0.002)]]))
        assert database.workloads == [("111", "bQ=="), ("222", "bg==")]
        assert database.records == [(1, body(1, 0.002))]

    @pytest.mark.parametrize(("line", "error"), [
        ("{not json", r"database_tuning_record.json: line 2 is not JSON"),
        ('[0, "x"]', r"database_tuning_record.json: line 2 is not a tuning record"),
        ('[5, [[], [1.0], {}]]', (r"database_tuning_record.json: line 2 names workload 5, "
                                  r"but database_workload.json has 2")),
    ])
    def test_a_broken_line_is_named_by_file_and_line(self, tmp_path: Path, line: str,
                                                     error: str) -> None:
        """A line that is not MetaSchedule's record is one error naming the file and line."""
        folder = work_dir(tmp_path, [[0, body(1, 0.002)]])
        with (folder / RECORDS_FILE).open("a") as out:
            out.write(line + "\n")
        with pytest.raises(SpecError, match=error) as raised:
            read_database(folder)
        assert str(folder / RECORDS_FILE) in str(raised.value)
