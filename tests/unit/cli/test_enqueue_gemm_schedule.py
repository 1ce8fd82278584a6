"""``farmctl enqueue gemm --schedule naive|tiled``: the schedule is stored, labelled and checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from click.testing import Result

from farm.kinds import gemm
from farm.queue.spec import SpecError, parse_spec
from farm.queue.store import Store


class TestGemmSchedule:
    def test_default_is_tiled(self) -> None:
        """A spec without a schedule is tiled, as every gemm was before the flag."""
        spec = parse_spec({"kind": "gemm", "params": {"n": 64}})
        assert spec.params.schedule == "tiled"  # type: ignore[union-attr]

    def test_naive_reaches_the_jobs_parameters(self) -> None:
        """--schedule naive travels into the parameters the job runs with."""
        spec = parse_spec({"kind": "gemm", "params": {"n": 64, "schedule": "naive"}})
        assert gemm.gemm_params(spec.params).schedule.value == "naive"  # type: ignore[arg-type]

    def test_naive_on_a_gpu_is_refused(self) -> None:
        """The naive kernel has no thread binding, so only the CPU runs it."""
        with pytest.raises(SpecError, match="cpu only"):
            parse_spec({"kind": "gemm", "params": {"n": 64, "schedule": "naive",
                                                    "target": "opencl"}})

    @pytest.mark.parametrize(
        ("params", "label"),
        [
            ({"n": 512}, "gemm n=512 float32"),
            ({"n": 512, "schedule": "tiled"}, "gemm n=512 float32"),
            ({"n": 512, "schedule": "naive"}, "gemm n=512 float32 naive"),
            ({"n": 512, "target": "opencl"}, "gemm n=512 float32 opencl"),
        ],
    )
    def test_schedule_is_part_of_the_workload_label(
        self, params: dict[str, Any], label: str
    ) -> None:
        """A naive GEMM is never labelled like a tiled one (tiled, the default, is implied)."""
        assert gemm.workload({"kind": "gemm", "params": params}) == label

    def test_enqueue_flag_stores_the_schedule(
        self, farmctl: Callable[..., Result], store: Store
    ) -> None:
        """farmctl enqueue gemm --schedule naive stores it in the job's spec."""
        result = farmctl("enqueue", "gemm", "--n", "64", "--schedule", "naive")
        assert result.exit_code == 0, result.output
        [job] = store.list_jobs()
        assert job.spec["params"]["schedule"] == "naive"

    def test_naive_on_a_gpu_is_a_one_line_error(self, farmctl: Callable[..., Result]) -> None:
        """The CLI names the flag and exits 2, no traceback."""
        result = farmctl("enqueue", "gemm", "--n", "64", "--schedule", "naive",
                         "--target", "opencl")
        assert result.exit_code == 2
        assert "--schedule" in result.output and "Traceback" not in result.output
