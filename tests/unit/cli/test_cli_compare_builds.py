"""farmctl compare between builds of one model: untuned vs tuned by job N, labelled."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from device_states import put_state
from stored_results import NOW, timings

from farm.queue import DeviceState, Outcome, Store
from farm.queue.scheduler import Assignment

SHA = "a" * 64
OTHER_SHA = "b" * 64
SHAPES = {"images": [1, 3, 8, 8]}


def _finish(store: Store, spec: Mapping[str, Any], summary: Mapping[str, Any],
            samples: Sequence[float], serial: str = "P1") -> int:
    if store.get_device(serial) is None:
        store.upsert_device(serial, NOW, {"abi": "arm64-v8a", "sdk": 34})
    put_state(store, serial, DeviceState.READY, "test", NOW)
    job_id = store.enqueue(dict(spec), NOW)
    [claim] = store.claim([Assignment(job_id, (serial,), 60.0)], NOW)
    store.finish(claim.attempt.id, Outcome(dict(summary), list(samples),
                                           sample_serials=[serial] * len(samples)), NOW)
    return job_id


def _model_job(store: Store, median_s: float, seed: int, *, sha: str = SHA,
               tuned: int | None = None) -> int:
    params = {"sha256": sha, "name": "m.onnx", "input_shapes": SHAPES, "tuned": tuned}
    return _finish(store, {"kind": "model", "params": params}, {"kind": "model"},
                   timings(seed, median_s=median_s))


@pytest.fixture
def builds(store: Store) -> dict[str, int]:
    """On P1: an untuned model job (10 ms), tune job N (untuned 10 ms, tuned 5 ms), --tuned N."""
    tune_spec = {"kind": "tune", "params": {
        "model": {"sha256": SHA, "name": "m.onnx", "input_shapes": SHAPES},
        "trials": 2, "trials_per_batch": 2}}
    tuned_s = timings(2, median_s=0.005)
    summary = {"kind": "tune", "runs": [{"serial": "P1", "untuned_samples_s": timings(3),
                                         "tuned_samples_s": tuned_s}]}
    tune = _finish(store, tune_spec, summary, tuned_s)
    return {"untuned": _model_job(store, 0.01, 1), "tune": tune,
            "tuned": _model_job(store, 0.005, 4, tuned=tune),
            "other": _model_job(store, 0.01, 5, sha=OTHER_SHA)}


class TestBuilds:
    def test_untuned_model_job_vs_tune_job(self, farmctl, builds: dict[str, int]) -> None:
        """A model job and the tune job of the same model and shapes compare, each labelled."""
        result = farmctl("compare", str(builds["untuned"]), str(builds["tune"]), "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["a"]["build"] == "untuned"
        assert data["b"]["build"] == f"tuned by job {builds['tune']}"
        [phone] = data["phones"]
        assert phone["verdict"] == "faster"

    def test_untuned_vs_tuned_model_jobs_table(self, farmctl, builds: dict[str, int]) -> None:
        """The table's title says which side is which build."""
        result = farmctl("compare", str(builds["untuned"]), str(builds["tuned"]))
        assert result.exit_code == 0, result.output
        assert (f"job {builds['tuned']} (tuned by job {builds['tune']}) vs "
                f"job {builds['untuned']} (untuned)") in result.stdout
        assert "faster" in result.stdout

    def test_tune_jobs_own_untuned_and_tuned(self, farmctl, builds: dict[str, int]) -> None:
        """JOB:untuned is the tune job's own untuned timings; reversed, tuned->untuned is slower."""
        tune = builds["tune"]
        result = farmctl("compare", f"{tune}:untuned", f"{tune}:tuned", "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert (data["a"]["build"], data["phones"][0]["verdict"]) == ("untuned", "faster")
        assert farmctl("compare", str(tune), f"{tune}:untuned").exit_code == 3

    def test_another_model_is_still_refused(self, farmctl, builds: dict[str, int]) -> None:
        """Builds of another model (digest) are different workloads: one line, exit 2."""
        result = farmctl("compare", str(builds["other"]), str(builds["tuned"]))
        assert result.exit_code == 2
        assert "measure different workloads" in result.stderr
        assert result.stderr.count("\n") == 1

    def test_untuned_of_a_model_job_is_refused(self, farmctl, builds: dict[str, int]) -> None:
        """':untuned' of a job that is no tune job says so in one line."""
        result = farmctl("compare", f"{builds['untuned']}:untuned", str(builds["tuned"]))
        assert result.exit_code == 2
        assert "only a tune --model job has its own untuned timings" in result.stderr
        assert farmctl("compare", f"{builds['tune']}:best", "1").exit_code == 2


def _profiled(store: Store, median_s: float, seed: int, kernels_ms: Mapping[str, float],
              *, tuned: int | None = None) -> int:
    """A model --profile job on P1 whose profile holds ``kernels_ms``, heaviest first."""
    kernels = [{"name": n, "calls": 1, "per_call_ms": ms, "total_ms": ms, "share_pct": 0.0}
               for n, ms in sorted(kernels_ms.items(), key=lambda kv: -kv[1])]
    profile = {"kernels": kernels, "kernels_ms": sum(kernels_ms.values()),
               "model_ms": median_s * 1e3, "ratio": 1.0, "missing": []}
    params = {"sha256": SHA, "name": "m.onnx", "input_shapes": SHAPES, "tuned": tuned}
    return _finish(store, {"kind": "model", "params": params},
                   {"kind": "model", "runs": [{"serial": "P1", "profile": profile}]},
                   timings(seed, median_s=median_s))


class TestKernelChanges:
    def test_profiled_builds_show_the_kernels_that_changed_most(self, farmctl,
                                                                store: Store) -> None:
        """Two profiled model jobs: the table lists the conv that got 4 ms faster first."""
        a = _profiled(store, 0.01, 1, {"fused_conv2d": 8.0, "mean": 1.5, "matmul": 0.5})
        b = _profiled(store, 0.005, 2, {"fused_conv2d": 4.0, "mean": 0.5, "matmul": 0.5})
        result = farmctl("compare", str(a), str(b), "--json")
        assert result.exit_code == 0, result.output
        [conv, mean, matmul] = json.loads(result.stdout)["operators"]["P1"]
        assert (conv["name"], conv["a_ms"], conv["b_ms"], conv["ratio"]) == (
            "fused_conv2d", 8.0, 4.0, 0.5)
        assert (mean["name"], mean["change_ms"], matmul["change_ms"]) == ("mean", -1.0, 0.0)
        table = farmctl("compare", str(a), str(b), "--operators").stdout
        lines = [line for line in table.splitlines() if line.startswith(("fused", "mean"))]
        assert lines[0].split("\t")[:5] == ["fused_conv2d", "8.0000", "4.0000", "0.500",
                                            "-4.0000"]

    def test_operators_without_profiles_is_one_line(self, farmctl,
                                                    builds: dict[str, int]) -> None:
        """--operators of jobs with no profile: exit 2 naming both; without it, no table."""
        a, b = str(builds["untuned"]), str(builds["tuned"])
        result = farmctl("compare", a, b, "--operators")
        assert result.exit_code == 2
        assert f"{a} and {b} are not" in result.stderr and result.stderr.count("\n") == 1
        assert "operators" not in json.loads(farmctl("compare", a, b, "--json").stdout)
