"""The export bundle's README and manifest say which build the library is (farm.jobs.bundle)."""

from __future__ import annotations

from typing import Any

from tuned_jobs import nothing_searched_summary

from farm.jobs.bundle import readme
from farm.tuning.outcome import decide


def _content(summary: dict[str, Any]) -> dict[str, Any]:
    """A manifest's content as :func:`farm.jobs.bundle.manifest` writes it from ``summary``."""
    return {"model": "m.onnx", "model_sha256": "ab" * 32, "tune_job": 7,
            "tvm_version": "0.22.0", "device": "cpu",
            "inputs": [{"name": "x", "shape": [1, 3, 8, 8], "dtype": "float32"}],
            "best_build": summary.get("best_build"), "best_note": summary.get("best_note"),
            "records_applied": summary.get("records_applied")}


class TestBundleReadme:
    def test_an_untuned_best_build_is_not_called_tuned(self) -> None:
        """A job whose tuned build applied nothing exports the untuned build, and says so."""
        text = readme(_content(nothing_searched_summary()))
        assert "with the tuning records applied" not in text
        assert ("compiled by TVM 0.22.0 without tuning records: the job's best build is the "
                "untuned one (no tuning record applied (nothing was searched") in text

    def test_a_tuned_best_build_counts_its_records(self) -> None:
        """A tuned best build names how many records it applies and why it is the best."""
        summary = decide(1.2, same_build=False, records_tuned=3).to_summary()
        text = readme(_content(summary))
        assert ("compiled by TVM 0.22.0 with 3 tuning records applied (tuned 1.20x untuned "
                "with 3 tuning records applied: the tuned build is the best)") in text
