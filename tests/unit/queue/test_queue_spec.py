"""Tests of farm.queue.spec: every bad spec is refused naming its field, and only with SpecError."""

from __future__ import annotations

import json
import os
import typing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from farm.config import JobSettings
from farm.errors import SpecError
from farm.kinds import KINDS
from farm.kinds.gemm import GemmJob
from farm.kinds.model import ModelJob
from farm.kinds.tune import TuneJob
from farm.queue.spec import MAX_TIMEOUT_S, parse_spec


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
    ("bad target", gemm(target="metal"), "params.target"),
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
    (
        "tune task cap on a gemm",
        {"kind": "tune", "params": {"gemm": {"n": 64}, "max_tasks": 2}},
        "params.max_tasks",
    ),
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
    (
        "tune behind the proxy",
        {"kind": "tune", "params": {"gemm": {"n": 64}}, "devices": {"kind": "proxy"}},
        "devices.kind",
    ),
    ("count zero", {**gemm(), "devices": {"count": 0}}, "devices.count"),
    ("count above serials", {**gemm(), "devices": {"serials": ["a"], "count": 2}}, "devices.count"),
    ("serials empty", {**gemm(), "devices": {"serials": []}}, "devices.serials"),
    ("serial twice", {**gemm(), "devices": {"serials": ["a", "a"]}}, "devices.serials"),
    ("sdk_min zero", {**gemm(), "devices": {"sdk_min": 0}}, "devices.sdk_min"),
    ("preference empty", {**gemm(), "devices": {"prefer_serials": []}},
     "devices.prefer_serials"),
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
        assert spec.devices.kind == "android"  # never planned onto a board or a GPU host

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


# --- hostile input: anything JSON-like ends in SpecError or a spec that can be stored -------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
    st.sampled_from([
        0, -1, 1, 16, 32, 64, 1024, 2**63, -(2**63) - 1, 10**30, float("inf"), float("nan"),
        "", "\x00", "\ud800", "~nosuchuser/m.onnx", "/", "/dev/null", __file__,
        "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "2025-06-01T12:00:00",
        "gemm", "model", "tune", "cpu", "opencl", "vulkan", "float16",
    ]),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


_PLAUSIBLE = st.sampled_from([1, 2, 3, 8, 16, 32, 64, 128, 0.5, "cpu", "opencl", "vulkan",
                              "float32", "float16", "arm64-v8a", __file__, "2030-01-01T00:00:00"])


def _fields(model: type[BaseModel], depth: int = 0) -> st.SearchStrategy[dict]:
    """Dicts with some of the model's own fields (nested models recursively), values of any
    type but often plausible ones, so that many examples pass and reach storage checks."""
    required: dict[str, st.SearchStrategy[object]] = {}
    optional: dict[str, st.SearchStrategy[object]] = {}
    for name, info in model.model_fields.items():
        nested = [a for a in typing.get_args(info.annotation) or (info.annotation,)
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        values = [_PLAUSIBLE, _JSON]
        if not info.is_required():
            values.insert(0, st.just(info.get_default(call_default_factory=True)).map(
                lambda v: v.model_dump(mode="json") if isinstance(v, BaseModel) else v))
        if nested and depth < 3:
            values.insert(0, _fields(nested[0], depth + 1))
        (required if info.is_required() else optional)[name] = st.one_of(values)
    return st.fixed_dictionaries(required, optional=optional)


_VALID = {"gemm": gemm(), "model": {"kind": "model", "params": {"path": __file__}},
          "tune": {"kind": "tune", "params": {"gemm": {"n": 64}}},
          "ab": {"kind": "ab", "params": {"a": {"gemm": {"n": 64}}, "b": {"job": 1}}}}


def _paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field path of a spec model, nested models included."""
    paths = []
    for name, info in model.model_fields.items():
        paths.append((*prefix, name))
        for arg in typing.get_args(info.annotation) or (info.annotation,):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                paths += _paths(arg, (*prefix, name))
    return paths


def _with(spec: dict, path: tuple[str, ...], value: object) -> dict:
    """A deep copy of ``spec`` with ``value`` at ``path`` (dicts created on the way)."""
    spec = json.loads(json.dumps(spec))
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key, {}), dict) else {}
    node[path[-1]] = value
    return spec


#: A valid spec of each kind with one or two fields set to anything, plausible or hostile:
#: every validator is reached alone, and many examples pass on to the storage checks.
_MUTATED = st.sampled_from([(k, p) for k, kind in KINDS.items() for p in _paths(kind.spec)
                            if p != ("kind",)]).flatmap(
    lambda kp: st.tuples(st.just(kp), st.one_of(_PLAUSIBLE, _JSON))
).map(lambda kpv: _with(_VALID[kpv[0][0]], kpv[0][1], kpv[1]))

_SPECS = st.one_of(
    _JSON,
    _MUTATED,
    st.sampled_from(list(KINDS.values())).flatmap(
        lambda kind: _fields(kind.spec).map(lambda d, name=kind.name: {**d, "kind": name})
    ),
)


class TestHostileSpecs:
    @settings(max_examples=2000, deadline=None)
    @given(raw=_SPECS)
    def test_only_spec_error_or_a_storable_spec(self, raw: object) -> None:
        """Any JSON-like data raises SpecError, or gives a spec that is valid JSON and
        round-trips."""
        try:
            spec = parse_spec(raw)  # type: ignore[arg-type]
        except SpecError as exc:
            event(f"refused: {exc.field.split('.')[0]}")
            return
        event(f"accepted: {spec.kind}")
        stored = json.loads(json.dumps(spec.to_json(), allow_nan=False))
        assert parse_spec(stored) == spec
        assert 0 < spec.effective_timeout_s <= MAX_TIMEOUT_S
        if spec.not_before is not None:  # the scheduler's arithmetic holds it
            assert spec.not_before + timedelta(seconds=MAX_TIMEOUT_S) > spec.not_before

    @pytest.mark.parametrize(
        ("raw", "field"),
        [
            ({"kind": []}, "kind"),
            ({"kind": {"a": 1}}, "kind"),
            ({"kind": "x" * 10_000}, "kind"),
            ({**gemm(), "not_before": "0001-01-01T00:00:00+05:00"}, "not_before"),
            ({**gemm(), "not_before": "9999-12-31T23:59:59-05:00"}, "not_before"),
            ({**gemm(), "not_before": 10**20}, "not_before"),
            ({"kind": "model", "params": {"path": "~nosuchuser/m.onnx"}}, "params.path"),
            ({"kind": "model", "params": {"path": "a\x00b"}}, "params.path"),
            ({"kind": "model", "params": {"path": "x" * 5000}}, "params.path"),
            ({**gemm(), "timeout_s": float("inf")}, "timeout_s"),
            ({**gemm(), "timeout_s": float("nan")}, "timeout_s"),
            ({**gemm(), "timeout_s": 8 * 24 * 3600}, "timeout_s"),
            ({**gemm(), "devices": {"count": 1_000_000_000}}, "devices.count"),
            (
                {"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 99999999999999}},
                "params.trials",
            ),
            ({**gemm(), "attempts": 10**6}, "attempts"),
            ({**gemm(), "repetitions": 10**6}, "repetitions"),
            ({**gemm(), "devices": {"serials": ["a\x00"]}}, "devices.serials.0"),
            (gemm(number=10**9), "params.number"),
            (gemm(repeat=10**9), "params.repeat"),
            ({"kind": "model", "params": {"path": __file__, "tolerance": {"rtol": float("inf")}}},
             "params.tolerance.rtol"),
        ],
    )
    def test_hostile_values_name_their_field(self, raw: dict, field: str) -> None:
        """The issue's crashes (TypeError, OverflowError, RuntimeError, Infinity) are SpecErrors
        now."""
        with pytest.raises(SpecError) as caught:
            parse_spec(raw)
        assert caught.value.field == field

    def test_gpu_block_of_1024_threads_is_accepted(self) -> None:
        """bn=32 on a GPU is 1024 threads, which Adreno allows; the phone's own limit is the
        scheduler's."""
        spec = parse_spec(gemm(n=1024, bn=32, target="opencl"))
        assert spec.params.bn == 32  # type: ignore[attr-defined]

    def test_default_timeouts_come_from_the_config(self) -> None:
        """Each kind's default time limit is the config's [jobs] value for it."""
        jobs = JobSettings(default_timeout_s=11.0, model_timeout_s=22.0, tune_timeout_s=33.0)
        specs = [gemm(), {"kind": "model", "params": {"path": __file__}},
                 {"kind": "tune", "params": {"gemm": {"n": 64}}}]
        assert [parse_spec(s).timeout_for(jobs) for s in specs] == [11.0, 22.0, 33.0]
