"""Benchmark jobs end to end on virtual phones, through farm's real queue and farmd.

farmd runs in-process as ``farmctl demo`` builds it (private adb server, its
own tracker, the signed stand-in APK); N usb-only virtual phones are plugged
into its adb server and provisioned to ``ready`` by its fleet manager with no
other action. The GEMM test enqueues specs in farmd's store and reads the result
rows; the model test is a user of ``farm.client`` against farmd's HTTP API, with two phones.
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
from click.testing import CliRunner
from tuned_jobs import model_tune_job

from farm.api.errors import NotFound
from farm.cli.main import cli
from farm.client import Farm
from farm.jobs.bundle import write_bundle
from farm.jobs.cache import CompileCache
from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE
from farm.kinds.run import COMPILE_CACHE_DIR
from farm.kinds.tuned import finished_tune
from farm.queue.models import JobState
from farm.tuning import tune_work_dir
from farm.tuning.model import TUNED_LIBRARY

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


def write_one_big_conv(path: Path) -> Path:
    """An ONNX model whose time is one convolution: the profile's heaviest kernel is known.

    x[1, 16, 32, 32] -> Conv 16->32, 3x3, pad 1 (4.7 M multiply-adds) -> Relu
    -> GlobalAveragePool (33 K adds) -> Flatten -> Gemm 32->10 (320) -> y[1, 10].
    On one local RPC server (``bench/bench_profile.py --model``, load average 12
    on the shared 2-core host) the fused conv took 0.88 of the kernels' 1.06 ms
    (84%), the pooling's ``mean`` 0.17 ms, the rest under 0.001 ms.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype("float32"), name)

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["p"]),
         helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1)],
        "one_big_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [weight("conv_w", (32, 16, 3, 3)), weight("conv_b", (32,)), weight("fc_w", (10, 32)),
         weight("fc_b", (10,))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 9  # onnxruntime refuses newer IR versions (farm.demo_model)
    onnx.save(model, str(path))
    return path


def farmctl_job(url: str, token: str, job_id: int) -> str:
    """``farmctl --server URL job ID``'s output, piped (tab-separated tables)."""
    result = CliRunner().invoke(cli, ["--server", url, "--token", token, "job", str(job_id)],
                                env={"FARM_CONFIG": None})
    assert result.exit_code == 0, result.output
    return result.output


def local_export(farm: Any, job_id: int, out: Path) -> Path:
    """What ``farmctl export JOB --out OUT`` on farmd's host writes (farm.cli.export)."""
    data_dir = farm.data_dir
    tune = finished_tune(farm.store, data_dir, job_id, field="JOB_ID")
    write_bundle(tune.bundle_input(farm.store, data_dir), out,
                 CompileCache(data_dir / COMPILE_CACHE_DIR))
    return out


def files(folder: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``folder``."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


class TestModelJob:
    def test_one_model_on_two_phones_through_the_client(  # type: ignore[no-untyped-def]
        self, start_farmd, tmp_path: Path
    ) -> None:
        """A model submitted with ``farm.client`` to farmd's HTTP API runs on two phones: each
        profile lists the model's one big convolution first, load time and peak memory are
        stored and shown by ``farmctl job`` for both, outputs on the user's inputs match
        onnxruntime's, and a finished tune's bundle exports through the API as farmctl's.

        Submitted with an ``.npz`` of inputs and ``profile=True`` (``enqueue model --profile
        --inputs``): the client waits, reads the result (load time and the peak memory of the
        app's process per phone), the profiles (heaviest kernel first, kernels summing near the
        model's time) and the phones' outputs.
        """
        farm = start_farmd(2, same_model=True, api=True)
        model = write_one_big_conv(tmp_path / "one_big_conv.onnx")
        x = np.linspace(-1, 1, 16 * 32 * 32, dtype="float32").reshape(1, 16, 32, 32)
        np.savez(tmp_path / "inputs.npz", x=x)
        token = farm.store.create_token("alice", datetime.now(UTC))
        url = farm.farmd.api_server.url
        with Farm(url, token) as client:
            job = client.submit_model(model, inputs=tmp_path / "inputs.npz", profile=True,
                                      number=2, repeat=3, devices={"count": 2})
            result = job.wait(timeout_s=JOB_DEADLINE_S).result()
            profiles = job.profile()
            outputs = job.outputs()
        serials = sorted(farm.serials)
        assert sorted(profiles) == sorted(outputs) == serials
        # Every sample the runs took is stored (a noisy phone's re-run too), at least ``repeat``.
        assert len(result.samples) == sum(r["samples"] for r in result.summary["runs"])
        assert result.summary["model"] == "one_big_conv.onnx"
        last = {run["serial"]: run for run in result.summary["runs"]}
        assert sorted(last) == serials
        session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        [want] = session.run(None, {"x": x})
        for serial in serials:
            run = last[serial]
            assert run["samples"] >= 3 and run["max_abs_err"] < 1e-3
            # Read through adb from the phone's /proc while the session ran: the session's
            # process holds Python and the TVM runtime, tens of MiB at least.
            assert isinstance(run["peak_memory_kb"], int) and run["peak_memory_kb"] > 20 * 1024
            assert run["load_s"] > 0 and run["first_run_s"] > 0, run
            kernels = profiles[serial]["kernels"]
            totals = [k["total_ms"] for k in kernels]
            # The one conv (with its bias and ReLU fused) first, by far, and the rest in order.
            assert kernels[0]["name"] == "fused_conv2d_add_relu", kernels
            assert kernels[0]["share_pct"] > 50 and totals == sorted(totals, reverse=True)
            assert not profiles[serial]["missing"] and 0.3 < profiles[serial]["ratio"] < 3
            assert list(outputs[serial]) == ["y"]  # the graph's output name
            np.testing.assert_allclose(outputs[serial]["y"], want, rtol=1e-4, atol=1e-4)
        shown = farmctl_job(url, token, job.id)
        for serial in serials:  # piped: phone, load, first run, peak memory
            [line] = [line for line in shown.splitlines() if line.startswith(f"{serial}\t")]
            _, load, first_run, peak = line.split("\t")
            assert load == f"{last[serial]['load_s'] * 1e3:.3f} ms", line
            assert first_run.endswith(" ms")
            assert peak == f"{last[serial]['peak_memory_kb'] / 1024:.1f} MiB", line

        # Job.export: a finished tune of the model (its records and library as a tune job leaves
        # them) downloads through the API as the very files farmctl export writes on the host.
        records = tmp_path / "records"
        records.mkdir()
        (records / WORKLOADS_FILE).write_text("")
        (records / RECORDS_FILE).write_text("")
        tune_id = model_tune_job(farm.store, farm.farmd.settings.database_url, farm.data_dir,
                                 model, records, {"kind": "llvm", "mtriple": "x86_64-linux-gnu"})
        (tune_work_dir(farm.data_dir, tune_id) / TUNED_LIBRARY).write_bytes(b"\x7fELF library")
        with Farm(url, token) as client:
            exported = client.job(tune_id).export(tmp_path / "bundle")
            with pytest.raises(NotFound, match=f"job {job.id} is a model job"):
                client.job(job.id).export(tmp_path / "not-a-tune")
        want_files = files(local_export(farm, tune_id, tmp_path / "local"))
        assert {"manifest.json", "main.cc", "CMakeLists.txt"} <= set(want_files)
        assert files(exported) == want_files
