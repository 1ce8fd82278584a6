"""Benchmark jobs end to end on virtual phones, through farm's real queue and farmd.

farmd runs in-process as ``farmctl demo`` builds it (private adb server, its
own tracker, the signed stand-in APK); N usb-only virtual phones are plugged
into its adb server and provisioned to ``ready`` by its fleet manager with no
other action. The GEMM test enqueues specs in farmd's store and reads the result
rows; the model test is a user of ``farm.client`` against farmd's HTTP API.
The jobs run in farmd's child processes against the phones' real TVM RPC
servers, so every number here was measured through adb tunnels and the tracker.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest

from farm.client import Farm
from farm.demo_model import write_small_cnn
from farm.queue.models import JobState

pytestmark = pytest.mark.fleet

#: Seconds a job may take here (the fleet fixtures' JOB_DEADLINE_S).
JOB_DEADLINE_S = 240.0


def gemm_spec(serial: str, n: int = 96, repeat: int = 4) -> dict[str, Any]:
    """A CPU GEMM pinned to one phone."""
    return {"kind": "gemm", "params": {"n": n, "number": 2, "repeat": repeat},
            "devices": {"serials": [serial]}}


class TestGemmAndCompileOnce:
    def test_four_phones_one_build_every_repeat_stored(self, start_farmd) -> None:  # type: ignore[no-untyped-def]
        """Four GEMM jobs, one per phone, all succeed with every repeat stored, and only one of them
        compiled."""
        farm = start_farmd(4, same_model=True)
        repeat = 4
        job_ids = [farm.enqueue(gemm_spec(s, repeat=repeat)) for s in farm.serials]
        farm.wait_finished(job_ids)
        for job_id, serial in zip(job_ids, farm.serials, strict=True):
            view = farm.store.get_job(job_id)
            assert view.state is JobState.SUCCEEDED, view.error  # type: ignore[union-attr]
            [result] = farm.store.results(job_id)
            # A noisy phone is measured once more ([results] rerun_noisy): repetition 1.
            last = max(result.repetitions)
            kept = [v for v, r in zip(result.samples, result.repetitions, strict=True) if r == last]
            run = result.summary["runs"][-1]
            # At least ``repeat``: more until the median is known ([results] sampling rule);
            # every one the run took is stored, after a warm-up it counted but threw away.
            assert len(kept) == run["samples"] >= repeat and all(s > 0 for s in result.samples)
            assert run["warmup_runs"] >= 6 and result.summary["per_serial"][serial]["warmup_runs"]
            assert {r["serial"] for r in result.summary["runs"]} == {serial}
            assert run["gflops"] > 0 and result.summary["gflops"] > 0
            # The job compared C with numpy's A @ B before timing.
            assert run["max_abs_err"] < 1e-3
            flop = 2 * 96**3
            assert result.summary["gflops"] == pytest.approx(flop / np.mean(kept) / 1e9)
        logs = farm.child_logs(job_ids)
        runs = sum(len(farm.store.results(j)[0].summary["runs"]) for j in job_ids)  # re-runs too
        assert logs.count("compile_cache_built") == 1
        assert logs.count("compile_cache_hit") == runs - 1
        assert len(list((farm.data_dir / "compile-cache").glob("*/lib.so"))) == 1


class TestModelJob:
    def test_small_cnn_through_the_client_matches_onnxruntime(  # type: ignore[no-untyped-def]
        self, start_farmd, tmp_path: Path
    ) -> None:
        """A small CNN submitted with ``farm.client`` to farmd's HTTP API runs on the phone and
        its output on the user's inputs matches onnxruntime's.

        Submitted with an ``.npz`` of inputs and ``profile=True`` (``enqueue model --profile
        --inputs``): the client waits, reads the result (with the peak memory of the app's
        process), the profile (heaviest kernel first, kernels summing near the model's time)
        and the phone's outputs, which equal onnxruntime's on the same inputs.
        """
        farm = start_farmd(1, api=True)
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        x = np.linspace(-1, 1, 3 * 16 * 16, dtype="float32").reshape(1, 3, 16, 16)
        np.savez(tmp_path / "inputs.npz", x=x)
        token = farm.store.create_token("alice", datetime.now(UTC))
        with Farm(farm.farmd.api_server.url, token) as client:
            job = client.submit_model(model, inputs=tmp_path / "inputs.npz", profile=True,
                                      number=2, repeat=3)
            result = job.wait(timeout_s=JOB_DEADLINE_S).result()
            [(serial, profile)] = job.profile().items()
            outputs = job.outputs()
        assert serial == farm.serials[0] and list(outputs) == [serial]
        run = result.summary["runs"][-1]
        # Every sample the runs took is stored (a noisy phone's re-run too), at least ``repeat``.
        assert len(result.samples) == sum(r["samples"] for r in result.summary["runs"])
        assert run["samples"] >= 3 and all(s > 0 for s in result.samples)
        assert run["max_abs_err"] < 1e-3
        assert result.summary["model"] == "small_cnn.onnx"
        # Read through adb from the phone's /proc while the session ran: the session's
        # process holds Python and the TVM runtime, tens of MiB at least.
        assert isinstance(run["peak_memory_kb"], int) and run["peak_memory_kb"] > 20 * 1024, run
        names = [k["name"] for k in profile["kernels"]]
        # small_cnn's 3x3 convolutions over 16x16 maps are its heaviest work.
        assert names[0].startswith("fused_conv2d"), names
        assert not profile["missing"] and 0.3 < profile["ratio"] < 3, profile
        session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        [want] = session.run(None, {"x": x})
        assert list(outputs[serial]) == ["output_0"]
        np.testing.assert_allclose(outputs[serial]["output_0"], want, rtol=1e-4, atol=1e-4)
