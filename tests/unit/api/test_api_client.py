"""``farm.client``: the Python client against a real ApiServer (HTTP on loopback), no mocks."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from api_helpers import T0
from click.testing import CliRunner, Result
from device_states import put_state
from exported_models import write_computed_reshape
from stored_results import ab_job, ab_rounds, finished_job, timings
from tuned_jobs import finished_tune, nothing_searched_summary

from farm.api.context import ApiContext
from farm.api.errors import NotFound, Unauthorized
from farm.cli.jobs import WaitTimedOut
from farm.cli.main import cli
from farm.client import Farm, JobFailed
from farm.client.bundle import unpack_bundle
from farm.clock import FakeClock
from farm.config import Settings
from farm.demo_model import write_small_cnn
from farm.errors import InfraFault, SpecError, UserFault
from farm.jobs.model_io import outputs_npz
from farm.queue import DeviceState, Outcome, Store
from farm.queue.scheduler import Assignment
from farm.results.ab import ab_phones
from farm.serve.server import ApiServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Farm, Store]]:
    """A client with carol's token for an ApiServer over a fresh database with one ready phone."""
    store = Store(f"sqlite:///{tmp_path / 'farm.db'}")
    store.upsert_device("phone-1", T0, {"abi": "arm64-v8a", "soc": "SM8150", "sdk": 30})
    put_state(store, "phone-1", DeviceState.READY, "test", T0)
    settings = Settings(data_dir=tmp_path / "server", database_url=store.url)
    api = ApiServer(ApiContext(store, settings, FakeClock(T0)), "127.0.0.1", 0)
    api.start()
    farm = Farm(api.url, store.create_token("carol", T0))
    try:
        yield farm, store
    finally:
        farm.close()
        api.stop()
        store.close()


class TestClient:
    def test_submit_a_model_wait_and_read_the_result(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """The model is uploaded as a blob, the job is carol's, and wait() returns its result."""
        farm, store = served
        assert [d.serial for d in farm.devices()] == ["phone-1"]
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        job = farm.submit_model(model, {"x": (1, 3, 16, 16)}, devices={"serials": ["phone-1"]})
        stored = store.get_job(job.id)
        assert stored is not None and stored.owner == "carol"
        assert stored.spec["params"]["name"] == "small_cnn.onnx"
        assert stored.spec["params"]["input_shapes"] == {"x": [1, 3, 16, 16]}
        assert stored.spec["params"]["path"] is None  # the server holds the bytes, not a path
        assert len(stored.spec["params"]["sha256"]) == 64
        with pytest.raises(WaitTimedOut, match=f"job {job.id} still queued"):
            job.wait(timeout_s=0.05)

        [claim] = store.claim([Assignment(job.id, ("phone-1",), 60.0)], T0)
        summary = {"kind": "model", "runs": [{"serial": "phone-1", "load_s": 0.2}]}
        assert store.finish(claim.attempt.id, Outcome(summary, (0.01, 0.02), "s",
                                                      ("phone-1", "phone-1")), T0)
        result = job.wait(timeout_s=30).result()
        assert result.summary["runs"][0]["load_s"] == 0.2
        assert result.samples == (0.01, 0.02)

    def test_errors_are_typed_with_the_servers_line(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """A file that is no ONNX model is a SpecError naming it; a cancelled job a JobFailed."""
        farm, _ = served
        bad = tmp_path / "notes.onnx"
        bad.write_text("not a model")
        with pytest.raises(SpecError, match=r"notes\.onnx") as caught:
            farm.submit_model(bad)
        assert caught.value.field == "params.path" and "\n" not in str(caught.value)
        job = farm.submit_model(write_small_cnn(tmp_path / "m.onnx"))
        farm.service.cancel(job.id)
        with pytest.raises(JobFailed, match=f"job {job.id} cancelled"):
            job.wait(timeout_s=30)
        with pytest.raises(JobFailed, match="no result"):
            job.result()
        with pytest.raises(Unauthorized):
            Farm(farm.service.url, "farm_not-a-token").devices()

    def test_inputs_go_up_and_outputs_and_profile_come_back(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """Inputs as arrays are uploaded as an .npz the job names; a bad archive, a wrong input,
        a server path and another phone's outputs are each one typed line; a finished job's
        outputs and profile are read back per phone."""
        farm, store = served
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        bad = tmp_path / "mine.npz"
        bad.write_bytes(b"no archive")
        with pytest.raises(SpecError, match=r"mine\.npz is not a numpy \.npz archive") as caught:
            farm.submit_model(model, inputs=bad)
        assert caught.value.field == "params.inputs"
        with pytest.raises(SpecError, match=r"inputs\.npz has \['y'\], which the model"):
            farm.submit_model(model, inputs={"y": np.zeros((1, 3, 16, 16), "float32")})
        raw = farm.service.store_models({"kind": "model", "params": {
            "path": str(model), "inputs": str(bad)}}, ["params.path"])
        with pytest.raises(SpecError, match="a path on the server is refused"):
            farm.service.submit(raw)

        x = np.ones((1, 3, 16, 16), "float32")
        job = farm.submit_model(model, inputs={"x": x}, profile=True,
                                devices={"serials": ["phone-1"]})
        params = store.get_job(job.id).spec["params"]  # type: ignore[union-attr]
        assert params["inputs"]["name"] == "inputs.npz" and params["profile"] is True
        with pytest.raises(NotFound, match=f"job {job.id} kept no outputs"):
            job.outputs()
        want = np.arange(10, dtype="float32").reshape(1, 10)
        profile = {"kernels": [{"name": "fused_conv2d", "total_ms": 1.0}], "ratio": 1.0}
        run = {"serial": "phone-1", "outputs_sha256": store.put_blob(outputs_npz([want]), T0),
               "profile": profile}
        [claim] = store.claim([Assignment(job.id, ("phone-1",), 60.0)], T0)
        assert store.finish(claim.attempt.id, Outcome({"kind": "model", "runs": [run]}, (0.01,),
                                                      "s", ("phone-1",)), T0)
        job.wait(timeout_s=30)
        assert job.profile() == {"phone-1": profile}
        [(serial, arrays)] = job.outputs().items()
        assert serial == "phone-1" and list(arrays) == ["output_0"]
        np.testing.assert_array_equal(arrays["output_0"], want)
        with pytest.raises(NotFound, match="kept no outputs of 'phone-2'"):
            farm.service._send("GET", f"/jobs/{job.id}/outputs/phone-2")

    def test_export_refuses_a_full_folder_a_job_that_is_no_tune_and_a_bad_zip(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """Job.export: a non-empty folder is refused before any request; a job with no bundle is
        the server's one line; a zip member outside the bundle's folder is refused unwritten."""
        farm, store = served
        job = farm.job(store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0))
        full = tmp_path / "full"
        full.mkdir()
        (full / "mine.txt").write_text("keep")
        with pytest.raises(SpecError, match="full exists and is not an empty folder"):
            job.export(full)
        with pytest.raises(NotFound, match=f"job {job.id} is a gemm job, not a tune of a model"):
            job.export(tmp_path / "bundle")
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr("job-1-bundle/manifest.json", "{}")
            bundle.writestr("job-1-bundle/../escaped.txt", "no")
        with pytest.raises(InfraFault, match=r"escaped\.txt"):
            unpack_bundle(archive.getvalue(), "job-1-bundle/", tmp_path / "out")
        assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out").exists()
        with pytest.raises(InfraFault, match="not a zip"):
            unpack_bundle(b"html", "job-1-bundle/", tmp_path / "out")

    def test_farmctl_server_export_downloads_through_the_same_client(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """farmctl --server export asks the server (its one line for a job with no bundle) and
        refuses a full folder as the client does; it no longer refuses --server."""
        farm, store = served
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        token = store.create_token("carol", T0)

        def export(out: Path) -> Result:
            return CliRunner().invoke(cli, ["--server", farm.service.url, "--token", token,
                                            "export", str(job_id), "--out", str(out)],
                                      env={"FARM_CONFIG": None, "FARM_SERVER": None})

        no_bundle = export(tmp_path / "bundle")
        assert (no_bundle.exit_code, no_bundle.stderr) == (
            2, f"Error: job {job_id} is a gemm job, not a tune of a model\n")
        assert not (tmp_path / "bundle").exists()
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "mine.txt").write_text("keep")
        full = export(tmp_path / "full")
        assert full.exit_code == 2 and "full exists and is not an empty folder" in full.stderr


class TestClientOnParWithFarmctl:
    def test_inputs_give_a_symbolic_batch_its_shape_and_a_wrong_name_is_named(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """submit_model(inputs=...) on a model with a symbolic batch needs no input_shapes;
        an array under a wrong name is refused by that name, not as a shape error."""
        farm, store = served
        model = write_computed_reshape(tmp_path / "m.onnx")
        with pytest.raises(SpecError, match=r"inputs\.npz has \['image'\], which the model "
                                            r"does not take \(its inputs: \['images'\]\)"):
            farm.submit_model(model, inputs={"image": np.ones((2, 3, 8, 8), "float32")})
        job = farm.submit_model(model, inputs={"images": np.ones((2, 3, 8, 8), "float32")})
        params = store.get_job(job.id).spec["params"]  # type: ignore[union-attr]
        assert params["input_shapes"] == {"images": [2, 3, 8, 8]}

    def test_submit_tune_takes_the_clis_flags_and_a_job_cancels(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """for_s, trials_per_task, max_tasks, trials_per_batch and phones reach the spec as
        enqueue tune's flags do; Job.cancel() is farmctl cancel; too few trials warn."""
        farm, store = served
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        job = farm.submit_tune(model, trials=64, for_s=180.0, trials_per_task=8, max_tasks=4,
                               trials_per_batch=4, devices={"serials": ["phone-1"]})
        params = store.get_job(job.id).spec["params"]  # type: ignore[union-attr]
        assert (params["trials"], params["for_s"], params["trials_per_task"],
                params["max_tasks"], params["trials_per_batch"]) == (64, 180.0, 8, 4, 4)
        assert job.cancel().state.value == "cancelled"
        with pytest.raises(JobFailed, match=f"job {job.id} cancelled"):
            job.wait(timeout_s=30)
        with pytest.warns(UserWarning, match=r"--trials 8 cannot reach a search batch on "
                                             r"small_cnn\.onnx's 7 tasks"):
            farm.submit_tune(model, trials=8)

    def test_a_tunes_outcome_and_a_comparison_come_back(
        self, served: tuple[Farm, Store]
    ) -> None:
        """Job.outcome() is farmctl job's outcome lines (no speed-up without a tuned build);
        Farm.compare(a, b) is farmctl compare --json, per phone."""
        farm, store = served
        tune = farm.job(finished_tune(store, nothing_searched_summary()))
        outcome = tune.outcome()
        assert outcome[0].startswith("best build: untuned (no tuning record applied")
        assert "speed-up: none: no tuned build exists (it applied no tuning record)" in outcome
        a = finished_job(store, "phone-1", timings(1, median_s=0.010))
        b = finished_job(store, "phone-1", timings(2, median_s=0.013))
        report = farm.compare(a, farm.job(b))
        [phone] = report["phones"]
        assert (phone["serial"], phone["verdict"]) == ("phone-1", "slower")
        assert report["slower"] == ["phone-1"] and report["exit_code"] == 3
        with pytest.raises(UserFault, match="no job 999"):
            farm.compare(a, 999)
        with pytest.raises(UserFault, match=f"job {a} has no tuning outcome"):
            farm.job(a).outcome()


class TestAbJobs:
    def test_submit_ab_of_each_sort_of_side(
        self, served: tuple[Farm, Store], tmp_path: Path
    ) -> None:
        """submit_ab takes the sides as farmctl enqueue ab does: GEMMs, ONNX files on this
        machine (uploaded, the spec naming their blobs), a finished job's id; a wrong side is
        the server's one line naming it, and each=True queues one job per fitting phone."""
        farm, store = served
        job = farm.submit_ab("gemm:n=64", "gemm:n=64,bn=16", threshold=0.02,
                             devices={"serials": ["phone-1"]})
        stored = store.get_job(job.id)
        assert stored is not None and stored.owner == "carol" and stored.kind == "ab"
        assert stored.spec["params"]["a"]["gemm"]["n"] == 64
        assert stored.spec["params"]["b"]["gemm"]["bn"] == 16
        assert stored.spec["params"]["threshold"] == 0.02

        a, b = (write_small_cnn(tmp_path / name) for name in ("a.onnx", "b.onnx"))
        models = store.get_job(farm.submit_ab(a, str(b), target="cpu").id)
        assert models is not None
        for side, name in (("a", "a.onnx"), ("b", "b.onnx")):
            model = models.spec["params"][side]["model"]
            assert model["name"] == name and len(model["sha256"]) == 64 and model["path"] is None

        gemm = store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        with pytest.raises(SpecError, match=f"job {gemm} has not finished well") as caught:
            farm.submit_ab(str(gemm), "gemm:n=64")
        assert caught.value.field == "params.a"
        with pytest.raises(SpecError, match=r"nothing\.onnx"):
            farm.submit_ab(a, tmp_path / "nothing.onnx")
        [claim] = store.claim([Assignment(gemm, ("phone-1",), 60.0)], T0)
        assert store.finish(claim.attempt.id, Outcome({"kind": "gemm"}, (0.01,), "s",
                                                      ("phone-1",)), T0)
        from_job = store.get_job(farm.submit_ab(str(gemm), "gemm:n=72").id)
        assert from_job is not None and from_job.spec["params"]["a"]["job"] == gemm
        [fanned] = farm.submit_ab("gemm:n=64", "gemm:n=72", each=True)
        fanned_view = store.get_job(fanned.id)
        assert fanned_view is not None and fanned_view.run_id is not None

    def test_an_ab_jobs_verdicts_and_raw_rounds(self, served: tuple[Farm, Store]) -> None:
        """A finished A/B job's verdict rows are farmctl's, and its samples carry their build
        and round, in its result and in the flat rows; another job's ab() is one line saying it
        is no A/B job."""
        farm, store = served
        rounds = ab_rounds(1, 1.10, rounds=12)
        job = farm.job(ab_job(store, {"phone-1": rounds}, now=T0))
        [phone] = job.wait(timeout_s=30).ab()
        assert phone == ab_phones(store.results(job.id)[0].summary)[0]
        assert (phone["serial"], phone["verdict"], phone["rounds"]) == ("phone-1", "slower", 12)
        result = job.result()
        assert result.arms == ("a", "b") * 12
        assert result.rounds == tuple(i for i in range(12) for _ in "ab")
        assert result.samples == tuple(t for pair in rounds for t in pair)
        rows = farm.service.sample_rows(job_id=job.id)  # farmctl --server results --format csv
        assert [(r.arm, r.round) for r in rows] == list(zip(result.arms, result.rounds,
                                                            strict=True))
        other = farm.job(store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0))
        [claim] = store.claim([Assignment(other.id, ("phone-1",), 60.0)], T0)
        assert store.finish(claim.attempt.id, Outcome({"kind": "gemm"}, (0.01,), "s",
                                                      ("phone-1",)), T0)
        with pytest.raises(UserFault, match=f"job {other.id} is a gemm job, not an A/B job"):
            other.ab()
