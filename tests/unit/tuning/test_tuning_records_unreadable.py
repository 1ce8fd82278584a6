"""open_database: a record MetaSchedule cannot read back is set aside, not the night lost."""

from __future__ import annotations

from pathlib import Path

import pytest
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir import schedule as s_tir_schedule

from farm.jobs.tuning_db import (
    RECORDS_FILE,
    UNREADABLE_FILE,
    open_database,
    set_aside_unreadable,
)

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 1})


def _workload(name: str, rows: int) -> tvm.IRModule:
    """A ``rows`` x 16 elementwise function whose block is called ``name``."""
    x = te.placeholder((rows, 16), name="x")
    y = te.compute((rows, 16), lambda i, j: x[i, j] * 2.0, name=name)
    return tvm.IRModule({"main": te.create_prim_func([x, y])})


def _record(trace_of: tvm.IRModule, workload: ms.database.Workload,
            run_s: float) -> ms.database.TuningRecord:
    """A record of ``workload`` whose trace splits a loop of ``trace_of``'s block."""
    sch = s_tir_schedule.Schedule(trace_of)
    loop, _ = sch.get_loops(sch.get_sblock(_block_name(trace_of)))
    sch.split(loop, factors=[None, 4])
    return ms.database.TuningRecord(sch.trace, workload, [run_s], TARGET,
                                    ms.arg_info.ArgInfo.from_entry_func(trace_of))


def _block_name(mod: tvm.IRModule) -> str:
    sch = s_tir_schedule.Schedule(mod)
    [block] = sch.get_child_blocks(sch.get_sblock("root"))
    return str(sch.get(block).name_hint)


def _database(folder: Path, bad: bool) -> None:
    """Two workloads, a readable record of each and, if ``bad``, one more: the second
    workload's trace filed under the first (its block name is not there: no replay)."""
    good, other = _workload("scale", 16), _workload("double", 8)
    database = ms.database.JSONDatabase(work_dir=str(folder))
    w_good, w_other = database.commit_workload(good), database.commit_workload(other)
    database.commit_tuning_record(_record(good, w_good, 1e-4))
    if bad:
        database.commit_tuning_record(_record(other, w_good, 5e-5))
    database.commit_tuning_record(_record(other, w_other, 2e-4))


def test_an_unreadable_record_is_set_aside_and_the_rest_opens(tmp_path: Path) -> None:
    """MetaSchedule refuses the whole folder; open_database moves the one record aside."""
    _database(tmp_path, bad=True)
    with pytest.raises(RuntimeError):
        ms.database.JSONDatabase(work_dir=str(tmp_path))
    database = open_database(tmp_path)
    assert len(database) == 2
    assert len((tmp_path / RECORDS_FILE).read_bytes().splitlines()) == 2
    assert len((tmp_path / UNREADABLE_FILE).read_bytes().splitlines()) == 1
    # The folder is MetaSchedule's again, records appended after it still open.
    assert len(ms.database.JSONDatabase(work_dir=str(tmp_path))) == 2


def test_a_readable_folder_is_left_as_it_is(tmp_path: Path) -> None:
    """No record set aside, no file written; a missing folder still raises MetaSchedule's error."""
    _database(tmp_path, bad=False)
    before = (tmp_path / RECORDS_FILE).read_bytes()
    assert len(open_database(tmp_path)) == 2
    assert set_aside_unreadable(tmp_path) == 0
    assert (tmp_path / RECORDS_FILE).read_bytes() == before
    assert not (tmp_path / UNREADABLE_FILE).exists()
    with pytest.raises(ValueError, match="doesn't exist"):
        open_database(tmp_path / "missing", allow_missing=False)
