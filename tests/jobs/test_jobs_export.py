"""``farmctl export``: a tuned model's bundle works in a process that never imports farm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from bundle_example import build_example, example_env, run_example
from click.testing import CliRunner
from tuned_jobs import model_tune_job

from farm.cli.main import cli
from farm.jobs.model import load_model, random_inputs, reference_outputs
from farm.jobs.params import DeviceFacts
from farm.jobs.targets import target_for
from farm.queue import Store

#: Run by a fresh interpreter in the bundle folder: loads the library with TVM's
#: Relax VM and the records with JSONDatabase, and proves farm was never imported.
_LOADER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    manifest = json.load(open("manifest.json"))
    lib = tvm.runtime.load_module(manifest["library"])
    dev = tvm.cpu()
    vm = relax.VirtualMachine(lib, dev)
    feeds = np.load(sys.argv[1])
    args = [tvm.runtime.tensor(feeds[i["name"]], dev) for i in manifest["inputs"]]
    out = vm["main"](*args)
    np.save(sys.argv[2], out.numpy())
    records = ms.database.JSONDatabase(work_dir=manifest["database"]).get_all_tuning_records()
    print(json.dumps({"records": len(records),
                      "farm": any(m == "farm" or m.startswith("farm.") for m in sys.modules)}))
""")


@pytest.fixture(scope="module")
def bundle(tuned_cnn: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``farmctl export`` of a finished tune of the small CNN for the host (R1 runs host code)."""
    model_path, database_dir = tuned_cnn
    root = tmp_path_factory.mktemp("export")
    data_dir = root / "data"
    config = root / "farm.toml"
    config.write_text(f'data_dir = "{data_dir}"\n')
    url = f"sqlite:///{data_dir / 'farm.db'}"
    data_dir.mkdir()
    facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=2)
    with Store(url) as store:
        job_id = model_tune_job(store, url, data_dir, model_path, database_dir,
                                target_for(facts))
    out = root / "bundle"
    result = CliRunner().invoke(cli, ["--config", str(config), "export", str(job_id),
                                      "--out", str(out)], env={"FARM_CONFIG": None})
    assert result.exit_code == 0, result.output
    return out


class TestExport:
    def test_bundle_runs_without_farm_and_matches_onnxruntime(
        self, bundle: Path, tuned_cnn: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """The exported library gives onnxruntime's output and its database loads, farm absent."""
        model_path, _ = tuned_cnn
        out = bundle
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["inputs"] == [{"name": "x", "shape": [1, 3, 16, 16], "dtype": "float32"}]
        assert manifest["phones"][0]["serial"] == "R1"
        assert manifest["phones"][0]["speedup"] == 2.0
        assert "LoadFromFile" in (out / "README.md").read_text()

        _, inputs = load_model(model_path)
        feeds = random_inputs(inputs, seed=3)
        np.savez(tmp_path / "feeds.npz", **feeds)
        proc = subprocess.run(  # no PYTHONPATH: the worktree's farm is not even importable
            [sys.executable, "-c", _LOADER, str(tmp_path / "feeds.npz"),
             str(tmp_path / "out.npy")],
            cwd=out, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
            capture_output=True, text=True, timeout=600, check=False,
        )
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        # One record per task: 7 (the depthwise conv pads its input in its own loop).
        assert report == {"records": 7, "farm": False}
        (expected,) = reference_outputs(model_path, feeds)
        np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-4, atol=1e-5)

    def test_cpp_example_builds_against_the_wheel_and_matches(
        self, bundle: Path, tuned_cnn: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """The bundle's CMake project, built as its README says, gives the shipped outputs."""
        model_path, _ = tuned_cnn
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert manifest["input_files"] == {"x": "inputs/0.npy"}
        assert manifest["expected_outputs"] == ["expected/0.npy"]
        (expected,) = reference_outputs(model_path, {"x": np.load(bundle / "inputs/0.npy")})
        np.testing.assert_array_equal(np.load(bundle / "expected/0.npy"), expected)
        readme = (bundle / "README.md").read_text()
        assert "cmake -S . -B build -DTVM_ROOT=$TVM_ROOT" in readme
        assert "android-arm64-v8a.cmake" in readme

        env = example_env(tmp_path)
        binary = build_example(bundle, tmp_path / "build", env)
        proc = run_example(binary, bundle, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "output 0: matches" in proc.stdout
        assert "latency: median" in proc.stdout

        # The check can fail: a wrong expected output makes run_model exit 1.
        wrong = tmp_path / "wrong"
        shutil.copytree(bundle, wrong)
        np.save(wrong / "expected/0.npy", expected + 1.0)
        proc = run_example(binary, wrong, env, repeat=1)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "output 0: DIFFERS" in proc.stdout
