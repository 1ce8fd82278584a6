"""farm.results.compare on stored samples: per phone, one side only, and the user's mistakes."""

from __future__ import annotations

import pytest
from stored_results import NOW, finished_job, timings
from tuned_jobs import model_job_on, model_tune_on

from farm.errors import UserFault
from farm.queue import Store
from farm.results.builds import UNTUNED, Build, same_library
from farm.results.compare import EXIT_REGRESSED, EXIT_UNDECIDED, compare_refs, compare_sides
from farm.results.rows import SampleRow
from farm.results.sides import Side, by_phone, load_side
from farm.stats import Verdict

LIMITS = {"threshold": 0.05, "alpha": 0.01}


class TestCompareRefs:
    def test_a_slower_phone_is_flagged_and_an_unchanged_one_is_not(self, store: Store) -> None:
        """Runs on two phones: the phone 10% slower in B is SLOWER, the other NO_CHANGE."""
        for serial, seed in (("P1", 1), ("P2", 2)):
            finished_job(store, serial, timings(seed), run_id="r-aaaa")
        finished_job(store, "P1", timings(11, median_s=0.011), run_id="r-bbbb")
        finished_job(store, "P2", timings(12), run_id="r-bbbb")
        report = compare_refs(store, "r-aaaa", "r-bbbb", **LIMITS)
        verdicts = {p.serial: p.comparison and p.comparison.verdict for p in report.phones}
        assert verdicts == {"P1": Verdict.SLOWER, "P2": Verdict.NO_CHANGE}
        assert report.regressed and report.slower == ["P1"]
        slower = report.phones[0].comparison
        assert slower is not None and slower.ci_low <= slower.ratio <= slower.ci_high
        assert 1.05 < slower.ratio < 1.15

    def test_faster_is_not_a_regression(self, store: Store) -> None:
        """A phone 10% faster in B is FASTER and the report has not regressed."""
        a = finished_job(store, "P1", timings(1))
        b = finished_job(store, "P1", timings(2, median_s=0.009))
        report = compare_refs(store, str(a), str(b), **LIMITS)
        assert [p.verdict for p in report.phones] == ["faster"] and not report.regressed

    def test_phones_on_one_side_are_listed(self, store: Store) -> None:
        """A phone only in A or only in B gets no verdict but is named, after the common ones."""
        finished_job(store, "P1", timings(1), run_id="r-aaaa")
        finished_job(store, "P2", timings(2), run_id="r-aaaa")
        finished_job(store, "P1", timings(3), run_id="r-bbbb")
        finished_job(store, "P3", timings(4), run_id="r-bbbb")
        report = compare_refs(store, "r-aaaa", "r-bbbb", **LIMITS)
        assert [(p.serial, p.verdict) for p in report.phones] == [
            ("P1", "no change"), ("P2", "only in A"), ("P3", "only in B")]
        assert report.phones[1].median_b_s is None and report.phones[2].n_a == 0

    def test_a_job_and_a_run_compare(self, store: Store) -> None:
        """A side may be a plain job id while the other is a run."""
        a = finished_job(store, "P1", timings(1))
        finished_job(store, "P1", timings(2), run_id="r-bbbb")
        report = compare_refs(store, str(a), "r-bbbb", **LIMITS)
        assert (report.a.ref, report.b.ref) == (f"job {a}", "run r-bbbb")


class TestUserMistakes:
    @pytest.mark.parametrize(("ref", "message"), [
        ("99", "no job 99"), ("r-nope", "no run r-nope"),
        ("x1", "'x1' is neither a job id nor a run id"), ("99999999999999", "no job"),
    ])
    def test_unknown_refs(self, store: Store, ref: str, message: str) -> None:
        """An unknown job or run, or something that is neither, is a one-line UserFault."""
        with pytest.raises(UserFault, match=message):
            load_side(store, ref)

    def test_unfinished_job(self, store: Store) -> None:
        """A queued job cannot be compared, and the error says its state."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        with pytest.raises(UserFault, match=f"job {job_id} is queued"):
            load_side(store, str(job_id))

    def test_different_workloads(self, store: Store) -> None:
        """GEMM 64 against GEMM 128 is refused, naming both workloads."""
        a = finished_job(store, "P1", timings(1), n=64)
        b = finished_job(store, "P1", timings(2), n=128)
        with pytest.raises(UserFault, match="different workloads"):
            compare_refs(store, str(a), str(b), **LIMITS)

    def test_no_common_phone(self, store: Store) -> None:
        """Two jobs on different phones have nothing to compare, and the error lists both."""
        a = finished_job(store, "P1", timings(1))
        b = finished_job(store, "P2", timings(2))
        with pytest.raises(UserFault, match=r"no phone in common \(A: P1; B: P2\)"):
            compare_refs(store, str(a), str(b), **LIMITS)


class TestRepetitions:
    def test_only_the_last_repetition_counts(self, store: Store) -> None:
        """A re-run's samples (repetition 1) replace the noisy first ones of that phone."""
        first, rerun = [1.0, 2.0, 3.0], [0.01, 0.011, 0.012]
        job_id = finished_job(store, "P1", first + rerun, repetitions=[0, 0, 0, 1, 1, 1])
        assert load_side(store, str(job_id)).timings == {"P1": tuple(rerun)}

    def test_last_repetition_is_per_job_and_phone(self) -> None:
        """Each job's and phone's highest repetition is kept; a job without re-run keeps all."""
        rows = [_row(1, "P1", 0, 5.0), _row(1, "P1", 1, 1.0), _row(2, "P1", 0, 2.0),
                _row(2, "P2", 0, 3.0), _row(2, None, 0, 4.0)]
        assert by_phone(rows) == {"P1": {1: [1.0], 2: [2.0]}, "P2": {2: [3.0]}}

    def test_non_timings_are_refused(self) -> None:
        """Samples in another unit than seconds cannot be judged as timings."""
        with pytest.raises(UserFault, match="only timings in seconds"):
            by_phone([_row(1, "P1", 0, 5.0, unit="GFLOPS")])


class TestCompareSides:
    def test_identical_timings_are_no_change(self) -> None:
        """Comparing a side with itself flags nothing (ratio 1, p = 1)."""
        side = Side("job 1", "gemm", {"P1": tuple(timings(1))})
        [phone] = compare_sides(side, side, **LIMITS).phones
        assert phone.comparison is not None and phone.comparison.ratio == 1.0
        assert phone.verdict == "no change"

    def test_emulated_timings_are_never_compared_with_a_real_devices(self) -> None:
        """A side timed on a board under QEMU against one timed on a real board is refused in
        one line naming both, as is a phone emulated in only one side."""
        emulated = Side("job 1", "gemm", {"va1": tuple(timings(1))}, emulated=frozenset({"va1"}))
        real = Side("job 2", "gemm", {"rk3399": tuple(timings(2))})
        for a, b in ((emulated, real), (real, emulated)):
            with pytest.raises(UserFault) as raised:
                compare_sides(a, b, **LIMITS)
            message = str(raised.value)
            assert "\n" not in message and "va1" in message and "rk3399" in message
            assert "emulated" in message
        flipped = Side("job 3", "gemm", {"va1": tuple(timings(3))})
        with pytest.raises(UserFault, match="va1 ran emulated in job 1 but not in job 3"):
            compare_sides(emulated, flipped, **LIMITS)

    def test_emulated_timings_compare_with_their_own(self) -> None:
        """Two runs on the same emulated board compare as any phone's do."""
        a = Side("job 1", "gemm", {"va1": tuple(timings(1))}, emulated=frozenset({"va1"}))
        b = Side("job 2", "gemm", {"va1": tuple(timings(2))}, emulated=frozenset({"va1"}))
        [phone] = compare_sides(a, b, **LIMITS).phones
        assert phone.serial == "va1" and phone.verdict == "no change"


def _row(job_id: int, serial: str | None, repetition: int, value: float,
         unit: str = "s") -> SampleRow:
    return SampleRow(job_id, None, serial, None, None, None, "gemm", repetition, 0, value, unit,
                     None)


def _noisy(seed: int, median_s: float) -> list[float]:
    """30 timings with 3% log-normal noise and a 1.5x outlier in every 20th run."""
    values = timings(seed, median_s=median_s, noise=0.03)
    return [v * 1.5 if i % 20 == 7 else v for i, v in enumerate(values)]


class TestVerdictRate:
    """The default threshold and alpha on phone-like noise, as the issue's "Must show" asks."""

    @staticmethod
    def _flags(seed_a: int, seed_b: int, median_b_s: float) -> bool:
        a = Side("job a", "gemm", {"P1": tuple(_noisy(seed_a, 0.010))})
        b = Side("job b", "gemm", {"P1": tuple(_noisy(seed_b, median_b_s))})
        return any(p.verdict != "no change" for p in compare_sides(a, b, **LIMITS).phones)

    def test_ten_percent_slower_is_flagged_every_time(self) -> None:
        """Five tries, fresh samples each: a phone 10% slower is flagged in all five."""
        assert sum(self._flags(100 + i, 200 + i, 0.011) for i in range(5)) == 5

    def test_unchanged_is_flagged_at_most_once_in_twenty(self) -> None:
        """Twenty tries of the same speed: at most one flags a change (the issue's 19 of 20)."""
        assert sum(self._flags(300 + i, 400 + i, 0.010) for i in range(20)) <= 1


class TestUndecidedAndNoisy:
    def test_three_against_three_is_undecided_and_exits_4(self) -> None:
        """The issue's default run (3 samples a phone): undecided with the reason, exit code 4."""
        a = Side("run a", "gemm", {"P1": tuple(timings(1, n=3))})
        b = Side("run b", "gemm", {"P1": tuple(timings(2, n=3, median_s=0.0115))})
        report = compare_sides(a, b, **LIMITS)
        [phone] = report.phones
        assert phone.verdict == "undecided" and report.undecided == ["P1"]
        assert report.exit_code == EXIT_UNDECIDED == 4 and not report.regressed
        data = report.to_json()
        assert data["exit_code"] == 4 and "cannot reach alpha" in data["phones"][0]["reason"]

    def test_slower_wins_over_undecided(self) -> None:
        """One phone slower and one undecided: the regression's exit code."""
        a = Side("a", "gemm", {"P1": tuple(timings(1)), "P2": tuple(timings(2, n=3))})
        b = Side("b", "gemm", {"P1": tuple(timings(3, median_s=0.011)),
                               "P2": tuple(timings(4, n=3))})
        assert compare_sides(a, b, **LIMITS).exit_code == EXIT_REGRESSED

    def test_noisy_phones_are_flagged_with_the_reason(self) -> None:
        """CV above max_cv on A and a thermal status change on B are both named."""
        a = Side("a", "gemm", {"P1": tuple(timings(1, noise=0.2)), "P2": tuple(timings(2))})
        b = Side("b", "gemm", {"P1": tuple(timings(3)), "P2": tuple(timings(4))},
                 thermal={"P2": (0, 2)})
        report = compare_sides(a, b, **LIMITS, max_cv=0.05)
        noisy = {p.serial: p.noisy for p in report.phones}
        assert noisy["P1"] == "A: CV 15% > 5%"
        assert noisy["P2"] == "B: thermal status 0->2"
        assert report.to_json()["phones"][1]["noisy"] == "B: thermal status 0->2"
        steady = compare_sides(Side("a", "gemm", {"P1": tuple(timings(1))}),
                               Side("b", "gemm", {"P1": tuple(timings(2))}), **LIMITS, max_cv=0.05)
        assert steady.phones[0].noisy == ""


#: The outcome of a tune whose tuned build applied no tuning record (tune_outcome.decide).
NO_RECORD = {"best_build": "untuned", "records_tuned": 0, "records_applied": 0}
SAME = ("A and B ran the same library: tune job {} applied no tuning record; "
        "the difference is the phones' noise, not a build's")


class TestSameLibrary:
    def test_a_tune_that_applied_no_record_is_never_slower(self, store: Store) -> None:
        """Untuned vs --tuned N of a no-record tune, 79.5% apart: undecided with why, exit 4."""
        tune = model_tune_on(store, "P1", timings(1), timings(2), **NO_RECORD)
        a = model_job_on(store, "P1", timings(3))
        b = model_job_on(store, "P1", timings(4, median_s=0.01795), tuned=tune)
        report = compare_refs(store, str(a), str(b), **LIMITS)
        [phone] = report.phones
        assert phone.verdict == "undecided" and not report.regressed
        assert phone.comparison is not None
        assert phone.comparison.reason.startswith(SAME.format(tune) + " (the timings read slower")
        assert report.exit_code == EXIT_UNDECIDED and report.to_confirm == []
        assert report.to_json()["same_library"] == SAME.format(tune)

    def test_a_narrow_ci_inside_the_threshold_is_no_change(self, store: Store) -> None:
        """3.5% apart with a CI inside ±5% (slower by the timings alone): no change, exit 0."""
        tune = model_tune_on(store, "P1", timings(1), timings(2), **NO_RECORD)
        a = model_job_on(store, "P1", timings(3, noise=0.002))
        b = model_job_on(store, "P1", timings(4, noise=0.002, median_s=0.01035), tuned=tune)
        [phone] = compare_refs(store, str(a), str(b), **LIMITS).phones
        assert phone.verdict == "no change" and phone.comparison is not None
        assert "(the timings read slower" in phone.comparison.reason
        assert compare_refs(store, str(a), str(b), **LIMITS).exit_code == 0

    def test_a_tune_with_records_is_judged_as_before(self, store: Store) -> None:
        """The same timings against --tuned N of a tune that applied records: slower, exit 3."""
        tune = model_tune_on(store, "P1", timings(1), timings(2), best_build="tuned",
                             records_tuned=3, records_applied=3)
        a = model_job_on(store, "P1", timings(3))
        b = model_job_on(store, "P1", timings(4, median_s=0.01795), tuned=tune)
        report = compare_refs(store, str(a), str(b), **LIMITS)
        assert [p.verdict for p in report.phones] == ["slower"]
        assert report.exit_code == EXIT_REGRESSED and report.same_library == ""

    def test_a_tunes_own_two_timings_of_one_library(self, store: Store) -> None:
        """N:untuned vs N of a no-record tune (a result before the counts: same_build)."""
        tune = model_tune_on(store, "P1", timings(1), timings(2, median_s=0.013),
                             same_build=True)
        report = compare_refs(store, f"{tune}:untuned", str(tune), **LIMITS)
        assert [p.verdict for p in report.phones] == ["undecided"]
        assert report.same_library == SAME.format(tune)

    def test_a_kept_untuned_build_is_the_untuned_library_of_tuned_n(self, store: Store) -> None:
        """Records tuned but not faster: --tuned N builds the untuned library; N's own
        tuned timings applied records and stay a build of their own."""
        tune = model_tune_on(store, "P1", timings(1), timings(2, median_s=0.013),
                             best_build="untuned", records_tuned=2, records_applied=0)
        a = model_job_on(store, "P1", timings(3))
        b = model_job_on(store, "P1", timings(4, median_s=0.013), tuned=tune)
        assert load_side(store, str(b)).build == Build(
            load_side(store, str(a)).build.identity,  # type: ignore[union-attr]
            f"tuned by job {tune}",
            f"tune job {tune} kept the untuned build (its tuned one was not faster), "
            "so its library applies no tuning record")
        assert compare_refs(store, str(a), str(b), **LIMITS).exit_code == EXIT_UNDECIDED
        own = compare_refs(store, str(a), str(tune), **LIMITS)
        assert own.same_library == "" and own.exit_code == EXIT_REGRESSED

    def test_one_label_is_no_claim(self) -> None:
        """Two untuned builds are two runs, not 'the same library'; nor are other models'."""
        plain = Build("m", "tuned by job 6", "tune job 6 applied no tuning record")
        assert same_library(Build("m", UNTUNED), Build("m", UNTUNED)) == ""
        assert same_library(Build("other", UNTUNED), plain) == ""
        assert same_library(Build("m", UNTUNED), plain) == SAME.format(6)
        assert same_library(None, plain) == ""
