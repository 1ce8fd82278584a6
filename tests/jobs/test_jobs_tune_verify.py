"""A task's pick measured again against farm's default schedule (farm.tuning.verify)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.jobs.params import DeviceFacts, TimingParams, TrackerParams, TuneParams
from farm.jobs.targets import target_for
from farm.jobs.tuning_db import PICKED_DIR, applied_database
from farm.tuning.baseline import BaselineTask
from farm.tuning.verify import pick_wins, verify_picks


class TestPickWins:
    def test_a_pick_wins_only_by_more_than_the_spread(self) -> None:
        """Faster medians by less than the wider range lose; failed picks lose."""
        assert pick_wins([10.0, 10.2, 10.1], [8.0, 8.1, 8.2])
        assert not pick_wins([10.0, 10.2, 10.1], [9.9, 10.0, 10.1])  # within the noise
        assert not pick_wins([10.0, 12.0, 11.0], [9.0, 10.5, 9.5])  # gap 1.5 < spread 2.0
        assert not pick_wins([10.0], [float("inf")])
        assert pick_wins([float("inf")], [1.0])


def _matmul(n: int) -> object:
    import tvm
    from tvm import te

    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


class TestVerifyPicks:
    def test_a_record_measured_fast_once_but_slower_is_not_used(
        self, tracker: TrackerParams, host_facts: DeviceFacts, tmp_path: Path
    ) -> None:
        """A matmul's unscheduled loops recorded as measured at 0.1 us (the winner's curse)
        are the database's best record; measured again against farm's vectorized default
        they lose, so the tuned build applies no record for the task; checked once. With no
        round left of the time budget, the pick is neither measured nor applied."""
        import tvm
        from tvm import s_tir
        from tvm.s_tir import meta_schedule as ms

        from farm.jobs.ndk import linker_for
        from farm.tuning.rounds import builder_and_runner

        target = target_for(host_facts)
        target_obj = tvm.target.Target(target)
        work_dir = tmp_path / "tune"
        work_dir.mkdir()
        workload = _matmul(128)
        database = ms.database.JSONDatabase(work_dir=str(work_dir))
        bare = s_tir.Schedule(workload)
        bare.get_loops(bare.get_sblock("C"))  # get_top_k skips a record with an empty trace
        database.commit_tuning_record(ms.database.TuningRecord(
            bare.trace, database.commit_workload(workload), [1e-7], target_obj,
            ms.arg_info.ArgInfo.from_entry_func(bare.mod, remove_preproc=True)))
        def no_measurers() -> tuple[object, object]:
            raise AssertionError("a pick was measured with no round to measure")

        # With the time budget spent (0 rounds) the pick is not measured and not applied;
        # the next check measures it.
        [unchecked] = verify_picks([BaselineTask("matmul", 0, workload, target_obj)],
                                   no_measurers, work_dir, rounds=0)
        assert (unchecked.checked, unchecked.used) == (False, False)
        assert applied_database(work_dir) is None
        params = TuneParams(gemm=None, trials=1, work_dir=work_dir,
                            timing=TimingParams(number=2, repeat=2, min_repeat_ms=5))
        builder, runner = builder_and_runner(params, tracker, linker_for(target), warm=True)
        try:
            [verdict] = verify_picks([BaselineTask("matmul", 0, workload, target_obj)],
                                     lambda: (builder, runner), work_dir, rounds=3)
        finally:
            builder.shutdown()
        assert len(verdict.default_s) == len(verdict.picked_s) == 3
        assert max(verdict.default_s) < min(verdict.picked_s), verdict
        assert not verdict.used
        assert (work_dir / PICKED_DIR).is_dir()
        assert applied_database(work_dir) is None  # the tuned build is the untuned one
        assert verdict.checked
        # Checked once: a resumed job with the same pick measures nothing (starts no builder).
        assert verify_picks([BaselineTask("matmul", 0, workload, target_obj)], no_measurers,
                            work_dir, rounds=3) == [verdict]
        # The work folder keeps its record: the check only chose what the build applies.
        assert ms.database.JSONDatabase(work_dir=str(work_dir)).get_top_k(
            database.commit_workload(workload), 1)[0].run_secs[0].value == pytest.approx(1e-7)
