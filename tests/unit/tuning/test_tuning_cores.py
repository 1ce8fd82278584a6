"""The build processes of a tune attempt (farm.tuning.cores), a pipelined build's wait and
the time budget's limit on measuring (farm.tuning.rate)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from farm.errors import CompileError
from farm.tuning.builder import ERROR_SUFFIX
from farm.tuning.cores import builder_share, held_builders
from farm.tuning.rate import (
    MEASURE_UNTIL_FILE,
    BudgetSpent,
    TimedUpload,
    measure_until,
    read_measure_until,
    wait_for_build,
)


class TestBuilderShare:
    def test_an_attempt_alone_takes_every_core(self) -> None:
        """No other attempt holds builders: all the host's cores build."""
        assert builder_share(16, []) == 16

    def test_attempts_share_the_cores_equally_at_most(self) -> None:
        """A second attempt gets what is free, no more than an equal share; never 0."""
        assert builder_share(16, [8]) == 8
        assert builder_share(16, [2]) == 8
        assert builder_share(16, [12]) == 4
        assert builder_share(2, [2]) == 1


class TestHeldBuilders:
    def test_the_ledger_counts_live_attempts_and_drops_killed_ones(self, tmp_path: Path) -> None:
        """A live attempt's builders are left to it, a dead process's file is removed, and
        this attempt's entry lasts as long as the block."""
        ledger = tmp_path / "tune-cores"
        ledger.mkdir()
        (ledger / f"{os.getppid()}.json").write_text(json.dumps({"builders": 6}))
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.strip()
        (ledger / f"{dead}.json").write_text(json.dumps({"builders": 8}))
        with held_builders(ledger, cores=16) as builders:
            assert builders == 8  # 10 free, an equal share of 16 with the live attempt
            assert json.loads((ledger / f"{os.getpid()}.json").read_text()) == {"builders": 8}
            assert not (ledger / f"{dead}.json").exists()
        assert not (ledger / f"{os.getpid()}.json").exists()

    def test_a_count_asked_for_is_taken_as_is(self, tmp_path: Path) -> None:
        """``jobs.tune_builder_workers`` set: that many, whatever the host holds."""
        with held_builders(tmp_path / "tune-cores", wanted=3, cores=2) as builders:
            assert builders == 3


class TestWaitForBuild:
    def test_a_built_library_is_uploaded(self, tmp_path: Path) -> None:
        """The library is there: the wait returns."""
        library = tmp_path / "tvm_tmp_mod.so"
        library.write_bytes(b"\x7fELF")
        wait_for_build(str(library), 1.0)

    def test_a_failed_build_fails_the_candidate_with_its_reason(self, tmp_path: Path) -> None:
        """The build left its error beside the path: the upload raises it."""
        library = tmp_path / "tvm_tmp_mod.so"
        Path(str(library) + ERROR_SUFFIX).write_text("build failed: LLVM ERROR")
        with pytest.raises(CompileError, match="LLVM ERROR"):
            wait_for_build(str(library), 1.0)

    def test_a_build_never_done_fails_at_the_deadline(self, tmp_path: Path) -> None:
        """Neither the library nor an error comes: the candidate fails after the deadline."""
        with pytest.raises(CompileError, match=r"not built within 0\.2 s"):
            wait_for_build(str(tmp_path / "tvm_tmp_mod.so"), 0.2)


class TestMeasureUntil:
    def test_a_candidate_past_the_budget_is_not_measured(self, tmp_path: Path) -> None:
        """The budget's end has passed: the upload refuses before it touches the session (None
        here), so the batch in flight ends on time."""
        until = tmp_path / MEASURE_UNTIL_FILE
        measure_until(until, time.time() - 1.0)
        upload = TimedUpload(str(tmp_path / "uploads.jsonl"), 0.0, str(until))
        with pytest.raises(BudgetSpent, match="time budget is spent") as raised:
            upload(None, str(tmp_path / "tvm_tmp_mod.so"), "tvm_tmp_mod.so")
        # raised in the runner's worker, it comes back pickled
        assert str(pickle.loads(pickle.dumps(raised.value))) == str(raised.value)  # noqa: S301

    def test_no_limit_is_written_as_no_file(self, tmp_path: Path) -> None:
        """A limit reads back as written; None removes it (the next attempt measures)."""
        until = tmp_path / MEASURE_UNTIL_FILE
        measure_until(until, 1234.5)
        assert read_measure_until(str(until)) == 1234.5
        measure_until(until, None)
        assert not until.exists() and read_measure_until(str(until)) is None
