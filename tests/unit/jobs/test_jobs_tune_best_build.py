"""Which build a model tune job calls its best (farm.kinds.tune_model.best_of)."""

from __future__ import annotations

from farm.kinds.tune_model import best_of


class TestBestBuild:
    def test_the_same_library_timed_twice_is_the_untuned_build(self) -> None:
        """No pick used: the tuned build is the untuned library. Timed second under another
        load it read 1.03x faster (called "the tuned build is the best") or 1.68x slower; it
        is the untuned build either way, and the note says why."""
        build, note = best_of(1.03, same_build=True)
        assert build == "untuned"
        assert "no tuning record applied" in note and "1.03x" in note
        assert best_of(1 / 1.68, same_build=True)[0] == "untuned"

    def test_a_different_build_wins_only_when_faster(self) -> None:
        assert best_of(1.19, same_build=False) == (
            "tuned", "tuned 1.19x untuned: the tuned build is the best")
        build, note = best_of(0.84, same_build=False)
        assert build == "untuned" and "not faster" in note
