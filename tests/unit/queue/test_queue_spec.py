"""Tests of farm.queue.spec: every bad spec is refused naming its field, and only with SpecError."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from farm.errors import SpecError
from farm.kinds.gemm import GemmJob
from farm.kinds.model import ModelJob
from farm.kinds.tune import TuneJob
from farm.queue.spec import parse_spec


def gemm(**params: object) -> dict:
    return {"kind": "gemm", "params": {"n": 256, **params}}


BAD_SPECS = [
    # (id, spec, field the error must name)
    ("not a mapping", ["gemm"], "spec"),
    ("missing kind", {"params": {"n": 64}}, "kind"),
    ("unknown kind", {"kind": "conv", "params": {}}, "kind"),
    ("unknown top-level field", {**gemm(), "prority": 3}, "prority"),
    ("missing params", {"kind": "gemm"}, "params"),
    ("n too small", gemm(n=8), "params.n"),
    ("n too large", gemm(n=16384), "params.n"),
    ("n not an int", gemm(n="big"), "params.n"),
    ("bad dtype", gemm(dtype="float64"), "params.dtype"),
    ("int8 dtype", gemm(dtype="int8"), "params.dtype"),
    ("bn does not divide n", gemm(bn=48), "params.bn"),
    ("bn larger than n", {"kind": "gemm", "params": {"n": 16, "bn": 32}}, "params.bn"),
    ("bad target", gemm(target="cuda"), "params.target"),
    ("opencl bn over any work-group", gemm(bn=64, target="opencl"), "params.bn"),
    ("vulkan bn over any work-group", gemm(bn=64, target="vulkan"), "params.bn"),
    ("number zero", gemm(number=0), "params.number"),
    ("repeat negative", gemm(repeat=-1), "params.repeat"),
    ("min_repeat_ms negative", gemm(min_repeat_ms=-5), "params.min_repeat_ms"),
    ("unknown param", gemm(block=4), "params.block"),
    ("model missing path", {"kind": "model", "params": {}}, "params.path"),
    (
        "model path absent",
        {"kind": "model", "params": {"path": "/nonexistent/m.onnx"}},
        "params.path",
    ),
    (
        "model dtype (the model's own input types apply)",
        {"kind": "model", "params": {"path": __file__, "dtype": "float32"}},
        "params.dtype",
    ),
    ("tune without workload", {"kind": "tune", "params": {"trials": 8}}, "params.gemm"),
    (
        "tune with two workloads",
        {"kind": "tune", "params": {"gemm": {"n": 64}, "model": {"path": __file__}}},
        "params.gemm",
    ),
    (
        "tune model path absent",
        {"kind": "tune", "params": {"model": {"path": "/x.onnx"}}},
        "params.model.path",
    ),
    ("tune a model", {"kind": "tune", "params": {"model": {"path": __file__}}}, "params.model"),
    (
        "tune zero trials",
        {"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 0}},
        "params.trials",
    ),
    (
        "tune batch over trials",
        {"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 4, "trials_per_batch": 8}},
        "params.trials_per_batch",
    ),
    ("tune bad gemm", {"kind": "tune", "params": {"gemm": {"n": 64, "bn": 5}}}, "params.gemm.bn"),
    (
        "tune opencl bn over any work-group",
        {"kind": "tune", "params": {"gemm": {"n": 128, "bn": 64, "target": "opencl"}}},
        "params.gemm.bn",
    ),
    (
        "tune count differs from phones",
        {"kind": "tune", "params": {"gemm": {"n": 64}, "phones": 2}, "devices": {"count": 3}},
        "devices.count",
    ),
    ("count zero", {**gemm(), "devices": {"count": 0}}, "devices.count"),
    ("count above serials", {**gemm(), "devices": {"serials": ["a"], "count": 2}}, "devices.count"),
    ("serials empty", {**gemm(), "devices": {"serials": []}}, "devices.serials"),
    ("serial twice", {**gemm(), "devices": {"serials": ["a", "a"]}}, "devices.serials"),
    ("sdk_min zero", {**gemm(), "devices": {"sdk_min": 0}}, "devices.sdk_min"),
    ("unknown device attribute", {**gemm(), "devices": {"ram_gb": 8}}, "devices.ram_gb"),
    ("priority too high", {**gemm(), "priority": 5000}, "priority"),
    ("attempts zero", {**gemm(), "attempts": 0}, "attempts"),
    ("timeout zero", {**gemm(), "timeout_s": 0}, "timeout_s"),
    ("not_before garbage", {**gemm(), "not_before": "tomorrow-ish"}, "not_before"),
    ("repetitions zero", {**gemm(), "repetitions": 0}, "repetitions"),
]


class TestParseSpec:
    """parse_spec validates, fills defaults and names the bad field."""

    @pytest.mark.parametrize(
        ("spec", "field"), [(s, f) for _, s, f in BAD_SPECS], ids=[i for i, _, _ in BAD_SPECS]
    )
    def test_bad_spec_names_its_field(self, spec: object, field: str) -> None:
        """Each bad spec raises SpecError whose field is the offending dotted path."""
        with pytest.raises(SpecError) as caught:
            parse_spec(spec)  # type: ignore[arg-type]
        assert caught.value.field == field
        assert caught.value.reason
        assert str(caught.value).startswith(f"{field}: ")

    def test_gemm_defaults(self) -> None:
        """A minimal gemm spec gets a dividing block size and the documented defaults."""
        spec = parse_spec({"kind": "gemm", "params": {"n": 48}})
        assert isinstance(spec, GemmJob)
        assert spec.params.bn == 16
        assert (spec.params.dtype, spec.params.target) == ("float32", "cpu")
        assert (spec.priority, spec.attempts, spec.phones_needed, spec.repetitions) == (0, 3, 1, 1)
        assert spec.effective_timeout_s == 600.0

    @pytest.mark.parametrize(("n", "bn"), [(1024, 16), (48, 16), (24, 8)])
    def test_gpu_default_block_fits_a_work_group(self, n: int, bn: int) -> None:
        """Without bn, a GPU gemm gets the largest dividing block with bn*bn <= 256."""
        for target in ("opencl", "vulkan"):
            spec = parse_spec({"kind": "gemm", "params": {"n": n, "target": target}})
            assert spec.params.bn == bn  # type: ignore[union-attr]

    def test_model_path_is_resolved(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A relative readable model path is stored absolute."""
        (tmp_path / "m.onnx").write_bytes(b"\x08\x09")
        monkeypatch.chdir(tmp_path)
        spec = parse_spec(
            {"kind": "model", "params": {"path": "m.onnx", "input_shapes": {"x": [1, 3]}}}
        )
        assert isinstance(spec, ModelJob)
        assert spec.params.path == str(tmp_path / "m.onnx")
        assert spec.params.input_shapes == {"x": [1, 3]}

    @pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
    def test_unreadable_model_refused(self, tmp_path: Path) -> None:
        """A model file without read permission is refused naming params.path."""
        path = tmp_path / "m.onnx"
        path.write_bytes(b"")
        path.chmod(0)
        with pytest.raises(SpecError) as caught:
            parse_spec({"kind": "model", "params": {"path": str(path)}})
        assert caught.value.field == "params.path"

    def test_tune_holds_its_phones(self) -> None:
        """A tune job's device count follows params.phones and defaults a small batch."""
        spec = parse_spec({"kind": "tune", "params": {"gemm": {"n": 64}, "phones": 3, "trials": 4}})
        assert isinstance(spec, TuneJob)
        assert spec.phones_needed == 3
        assert spec.params.trials_per_batch == 4

    def test_not_before_naive_is_utc(self) -> None:
        """A naive not_before is read as UTC, an aware one converted to UTC."""
        naive = parse_spec({**gemm(), "not_before": "2025-06-01T12:00:00"})
        aware = parse_spec({**gemm(), "not_before": "2025-06-01T14:00:00+02:00"})
        expected = datetime(2025, 6, 1, 12, tzinfo=UTC)
        assert naive.not_before == expected == aware.not_before

    def test_round_trip_through_json(self) -> None:
        """The stored JSON form parses back to an equal spec."""
        spec = parse_spec(
            {
                "kind": "tune",
                "params": {"gemm": {"n": 64}, "phones": 2},
                "devices": {"abi": "arm64-v8a", "sdk_min": 28},
                "priority": 7,
            }
        )
        assert parse_spec(spec.to_json()) == spec
