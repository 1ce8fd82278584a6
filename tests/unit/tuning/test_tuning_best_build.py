"""Which build a model tune job calls its best, and how its outcome reads
(farm.tuning.outcome)."""

from __future__ import annotations

from farm.kinds.tune_model import _decide
from farm.tuning.outcome import decide, outcome_lines, searched_trials, speedup_text
from farm.tuning.result import ModelTuneResult, TaskResult


class TestBestBuild:
    def test_the_same_library_timed_twice_is_the_untuned_build(self) -> None:
        """No pick used: the tuned build is the untuned library. Timed second under another
        load it read 1.03x faster (called "the tuned build is the best") or 1.68x slower; it
        is the untuned build either way, with no speed-up, and the note says why."""
        decision = decide(1.03, same_build=True, records_tuned=0)
        assert decision.best_build == "untuned" and decision.speedup is None
        assert "no tuning record applied" in decision.best_note and "1.03x" in decision.best_note
        assert (decision.records_tuned, decision.records_applied) == (0, 0)
        assert decide(1 / 1.68, same_build=True, records_tuned=0).best_build == "untuned"

    def test_a_different_build_wins_only_when_faster(self) -> None:
        """A tuned build that applied records is the best only when faster; else its records
        are not in the job's library."""
        won = decide(1.19, same_build=False, records_tuned=3)
        assert (won.best_build, won.speedup, won.records_applied) == ("tuned", 1.19, 3)
        assert won.best_note == ("tuned 1.19x untuned with 3 tuning records applied: "
                                 "the tuned build is the best")
        lost = decide(0.84, same_build=False, records_tuned=3)
        assert lost.best_build == "untuned" and "not faster" in lost.best_note
        assert (lost.speedup, lost.records_tuned, lost.records_applied) == (0.84, 3, 0)

    def test_the_note_says_why_no_record_applied(self) -> None:
        """Nothing searched, the picks' check cut by the time budget, or no pick winning:
        each is said as what happened."""
        assert "nothing was searched" in decide(
            1.1, same_build=True, records_tuned=0, picks_checked=0, picks_unchecked=0,
            searched=0).best_note
        assert "time budget ran out before any of the 4 picks" in decide(
            1.1, same_build=True, records_tuned=0, picks_checked=0, picks_unchecked=4,
            searched=40).best_note
        assert "none of the 5 picks beat" in decide(
            1.1, same_build=True, records_tuned=0, picks_checked=5, picks_unchecked=0,
            searched=40).best_note

    def test_searched_trials_leave_out_the_default_schedules(self) -> None:
        """32 tasks of one trial each on a CPU target searched nothing."""
        tasks = [{"trials_measured": 1}] * 32
        assert searched_trials(tasks, baselines=True) == 0
        assert searched_trials(tasks, baselines=False) == 32


class TestOutcomeLines:
    def test_an_untuned_outcome_has_no_speedup_and_says_so(self) -> None:
        """The 32-trial job of 32 tasks: best build untuned, no speed-up, 0 records, 0 picks."""
        summary = {"kind": "tune", "speedup": None, "records_tuned": 0, "records_applied": 0,
                   **decide(1.10681, same_build=True, records_tuned=0, picks_checked=0,
                            picks_unchecked=0).to_summary(),
                   "picks_checked": 0, "picks_used": 0, "picks_unchecked": 0,
                   "tasks": [{"trials_measured": 1}] * 32, "model_tasks": 55,
                   "trials_measured": 32, "trials_requested": 32, "stopped_by": "trials"}
        lines = outcome_lines(summary)
        assert lines[0].startswith("best build: untuned (no tuning record applied (nothing "
                                   "was searched")
        assert lines[1] == "speed-up: none: no tuned build exists (it applied no tuning record)"
        assert lines[2] == ("tuning records applied: 0 in the job's library "
                            "(the tuned build applied 0)")
        assert lines[3] == "picks checked against their default schedule: 0, used 0"
        assert lines[4] == ("tasks tuned: 32 of the model's 55; trials measured 32/32 "
                            "(all that were asked)")
        assert "1.10681" not in "\n".join(lines)

    def test_a_result_stored_before_has_no_speedup_where_one_library_was_timed(self) -> None:
        """Older summaries lack records_tuned; their runs' same_build says the same."""
        old = {"kind": "tune", "speedup": 1.10681, "best_build": "untuned",
               "runs": [{"same_build": True}]}
        assert speedup_text(old) is None
        assert speedup_text({**old, "runs": [{"same_build": False}]}) == "1.11x"
        assert outcome_lines({"kind": "gemm", "speedup": 2.0}) == []


class TestDecideFromTheTuning:
    @staticmethod
    def _result(**picks: int | None) -> ModelTuneResult:
        tasks = [TaskResult(f"t{i}", i, 18, 3, 1e-4) for i in range(55)]
        return ModelTuneResult("ab" * 32, [], tasks, 990, 0, 165, 0, "lib.so", "w",
                               {"kind": "llvm"}, stopped_by="time", model_tasks=55, **picks)

    def test_a_time_budget_that_left_no_pick_checked_is_said_and_has_no_speedup(self) -> None:
        """A 3-minute --for tune: the check had no time, so no record was applied; the
        phones timed one library twice and no run keeps a speed-up."""
        runs = [{"speedup": 1.08, "same_build": True}, {"speedup": 0.97, "same_build": True}]
        decision = _decide(self._result(picks_checked=0, picks_used=0, picks_unchecked=12),
                           runs)
        assert (decision.best_build, decision.speedup, decision.records_applied) == (
            "untuned", None, 0)
        assert "the time budget ran out before any of the 12 picks was measured again" in (
            decision.best_note)
        assert [r["speedup"] for r in runs] == [None, None]

    def test_a_faster_tuned_build_counts_the_picks_it_used(self) -> None:
        """The tuned build applies the picks used (CPU); GPU targets apply each task's best."""
        runs = [{"speedup": 1.3, "same_build": False}]
        decision = _decide(self._result(picks_checked=9, picks_used=4, picks_unchecked=0), runs)
        assert (decision.best_build, decision.records_applied, runs[0]["speedup"]) == (
            "tuned", 4, 1.3)
        gpu = _decide(self._result(), [{"speedup": 1.3, "same_build": False}])
        assert gpu.records_tuned == 55
