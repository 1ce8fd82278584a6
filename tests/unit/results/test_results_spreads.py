"""Per-phone figures: one spread per job and phone, never pooled; noisy marks."""

from __future__ import annotations

from datetime import UTC, datetime

from farm.results.rows import SampleRow
from farm.results.spreads import by_workload, noise_label, phone_spreads

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _rows(job_id: int, serial: str, values: list[float], repetition: int = 0,
          workload: str = "gemm n=64 float32", temps: tuple[float, ...] = (30.0,),
          ) -> list[SampleRow]:
    return [SampleRow(job_id, "r-1", serial, "M", "soc", "arm64-v8a", workload, repetition, i, v,
                      "s", NOW, readings={"battery_temp_c": temps[i % len(temps)],
                                          "thermal_status": 0})
            for i, v in enumerate(values)]


class TestPhoneSpreads:
    def test_two_phones_are_never_pooled(self) -> None:
        """A job's samples from two phones give two figures, each of its own phone's samples."""
        rows = _rows(1, "A", [1.0, 1.0, 1.0]) + _rows(1, "B", [2.0, 2.0, 2.0])
        figures = phone_spreads(rows, max_cv=0.05)
        assert [(f.serial, f.spread.median, f.spread.n) for f in figures] == [
            ("A", 1.0, 3), ("B", 2.0, 3)]

    def test_a_value_that_is_not_finite_is_left_out(self) -> None:
        """A NaN or inf sample (a newer host's row, a hand edit) is left out; none left: none."""
        rows = _rows(1, "A", [1.0, float("nan"), 1.0, float("inf")]) + _rows(1, "B", [float("nan")])
        [figure] = phone_spreads(rows, max_cv=0.05)
        assert (figure.serial, figure.spread.n, figure.spread.median) == ("A", 2, 1.0)

    def test_noisy_above_max_cv(self) -> None:
        """A CV above max_cv is noisy; the same samples under a looser max_cv are not."""
        rows = _rows(1, "A", [1.0, 2.0, 0.5, 1.5])
        [strict] = phone_spreads(rows, max_cv=0.05)
        [loose] = phone_spreads(rows, max_cv=1.0)
        assert strict.noisy and noise_label(strict) == "noisy: CV 52%"
        assert not loose.noisy and noise_label(loose) == ""

    def test_rerun_replaces_the_first_measurement(self) -> None:
        """With a repetition 1, the figure is the re-run's, and says it was re-run."""
        rows = _rows(1, "A", [1.0, 2.0, 0.5, 1.5]) + _rows(1, "A", [1.0, 1.01, 0.99], 1)
        [figure] = phone_spreads(rows, max_cv=0.05)
        assert figure.rerun and figure.spread.n == 3 and noise_label(figure) == "re-run: steady"
        rows = _rows(1, "A", [1.0, 2.0]) + _rows(1, "A", [1.0, 3.0], 1)
        assert noise_label(phone_spreads(rows, max_cv=0.05)[0]) == "re-run: noisy: CV 71%"

    def test_hottest_temperature_is_reported(self) -> None:
        """The figure carries the hottest battery temperature seen before its runs."""
        [figure] = phone_spreads(_rows(1, "A", [1.0, 1.0], temps=(30.0, 36.5)), max_cv=0.05)
        assert figure.readings["battery_temp_c"] == 36.5

    def test_by_workload_keeps_one_workload(self) -> None:
        """by_workload leaves out other workloads."""
        rows = _rows(1, "A", [1.0]) + _rows(2, "A", [1.0], workload="gemm n=128 float32")
        figures = by_workload(phone_spreads(rows, 0.05), "gemm n=128 float32")
        assert [f.job_id for f in figures] == [2]
