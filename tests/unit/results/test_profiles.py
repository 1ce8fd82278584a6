"""Which kernels' time changed most between two builds' profiles on one phone."""

from __future__ import annotations

import pytest

from farm.results.profiles import KernelChange, kernel_changes, kernel_totals


def profile(**total_ms: float) -> dict[str, list[dict[str, object]]]:
    """A stored profile with one kernel entry per name."""
    return {"kernels": [{"name": name, "total_ms": ms} for name, ms in total_ms.items()]}


class TestKernelChanges:
    def test_largest_absolute_change_first_whichever_way(self) -> None:
        """A kernel 0.5 ms faster outranks one 0.2 ms slower, which outranks an unchanged one."""
        changes = kernel_changes(profile(conv=1.0, pool=0.1, dense=0.3),
                                 profile(conv=0.5, pool=0.3, dense=0.3))
        assert [c.name for c in changes] == ["conv", "pool", "dense"]
        assert changes[0] == KernelChange("conv", 1.0, 0.5, 0.5, -0.5)
        assert changes[1].ratio == pytest.approx(3.0)
        assert changes[1].change_ms == pytest.approx(0.2)

    def test_a_kernel_only_one_build_has_counts_zero_on_the_other(self) -> None:
        """A kernel B fused away is all change; one new in B has no ratio."""
        changes = {c.name: c for c in kernel_changes(profile(old=0.4), profile(new=0.1))}
        assert changes["old"] == KernelChange("old", 0.4, 0.0, 0.0, -0.4)
        assert changes["new"] == KernelChange("new", 0.0, 0.1, None, 0.1)

    def test_calls_with_other_shapes_add_up_and_junk_is_skipped(self) -> None:
        """Two entries of one name (two argument shapes) are one kernel's time."""
        stored = {"kernels": [{"name": "conv", "total_ms": 0.25}, {"name": "conv", "total_ms": 1},
                              {"name": "bad", "total_ms": "x"}, "junk"]}
        assert kernel_totals(stored) == {"conv": 1.25}
        assert kernel_totals({"kernels": None}) == {}
