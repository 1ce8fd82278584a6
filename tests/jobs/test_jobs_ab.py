"""A/B rounds on one virtual phone's real RPC process, at the ``[ab]`` defaults, not made quiet.

The throttle knob (:mod:`farm.virtual.throttle`; its own effect is
tests/jobs/test_jobs_throttle_compare.py's) turned to 0.9 in the middle of
an A/A job slows both builds from that round on: the rounds' ratios do not
move, so the verdict is neither slower nor faster. Through the queue on two
phones: tests/fleet/test_ab_fleet.py; the rates over many tries:
``bench/bench_ab.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from exported_models import write_computed_reshape

from farm.config import AbSettings, ResultSettings
from farm.jobs.ab import AbRule, run_ab
from farm.jobs.cache import CompileCache
from farm.jobs.params import DeviceFacts, GemmParams, TrackerParams
from farm.jobs.targets import target_for
from farm.sampling import SamplingRule
from farm.stats import Verdict
from farm.virtual.testing import RpcApp, rpc_app

RULE = AbRule.of(AbSettings(), ResultSettings())
SAMPLING = SamplingRule.of(ResultSettings())


@dataclass
class Phone:
    """One virtual phone's RPC process and what a session to it needs."""

    app: RpcApp
    tracker: TrackerParams
    target: dict[str, object]
    cache: CompileCache


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phone]:
    """A virtual phone's RPC process (its default priority: not quiet)."""
    root = tmp_path_factory.mktemp("ab")
    with rpc_app(root, key="ab") as app:
        tracker = TrackerParams(app.tracker_host, app.tracker_port, app.key,
                                session_timeout_s=900, serial="virtual", connect_timeout_s=60)
        target = target_for(DeviceFacts(abi="x86_64", host_runtime=True, num_cores=2))
        yield Phone(app, tracker, target, CompileCache(root / "cache"))


class TestThrottleInTheMiddle:
    def test_an_aa_job_throttled_midway_is_neither_slower_nor_faster(self, phone: Phone) -> None:
        """Throttled to 0.9 before round 10 (of at least 20): no slower or faster verdict."""
        throttled_at = RULE.min_rounds // 2

        def before_round(index: int) -> None:
            if index == throttled_at:
                phone.app.set_speed(0.9)

        try:
            result = run_ab(GemmParams(n=256), GemmParams(n=256), phone.target, phone.tracker,
                            phone.cache, RULE, SAMPLING, before_round=before_round)
        finally:
            phone.app.set_speed(1.0)
        rounds = result.rounds
        assert len(rounds.a_s) > throttled_at
        assert rounds.comparison.verdict not in (Verdict.SLOWER, Verdict.FASTER), rounds.comparison
        assert result.same_library
        assert rounds.phone_s <= RULE.max_phone_s + 5


class TestModels:
    def test_two_exports_of_one_shape_are_neither_slower_nor_faster(
            self, phone: Phone, tmp_path: Path) -> None:
        """Two models shaped like real exports (symbolic batch, computed reshape), other weights:
        both checked against onnxruntime, the same work timed in turns is no slower or faster."""
        from farm.kinds.model import ModelSpec, model_params

        builds = []
        for seed in (0, 1):
            path = write_computed_reshape(tmp_path / f"export-{seed}.onnx", seed=seed)
            spec = ModelSpec(path=str(path), input_shapes={"images": [1, 3, 8, 8]})
            builds.append(model_params(spec, path))
        result = run_ab(builds[0], builds[1], phone.target, phone.tracker, phone.cache, RULE,
                        SAMPLING)
        assert not result.same_library
        assert max(result.max_abs_err_a, result.max_abs_err_b) <= 1e-3
        named = result.rounds.comparison.verdict
        if named in (Verdict.SLOWER, Verdict.FASTER):
            # Each look names a change that is not there with a chance of alpha (1%), and
            # this host's other test file loads the cores: a change the builds really have
            # is named again by a second A/B, one of chance is not.
            again = run_ab(builds[0], builds[1], phone.target, phone.tracker, phone.cache, RULE,
                           SAMPLING)
            assert again.rounds.comparison.verdict != named, (result.rounds.comparison,
                                                              again.rounds.comparison)
