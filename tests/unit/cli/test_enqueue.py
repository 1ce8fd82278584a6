"""``farmctl enqueue``: flags to a stored spec, errors in the words of the flags, never a traceback.

Through click's CliRunner, in-process, against a real SQLite queue in a temp folder.
"""

from __future__ import annotations

import json
import tempfile
import traceback
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from npz_bombs import zeros_npz

from farm.cli.enqueue import enqueue
from farm.cli.main import cli
from farm.config import JobSettings
from farm.demo_model import write_small_cnn
from farm.kinds import KINDS
from farm.queue import Store
from farm.queue.spec import parse_spec
from farm.runner.pidfile import write_pidfile

#: A real ONNX file for flags that need a valid model; removed when the interpreter exits.
_MODEL_DIR = tempfile.TemporaryDirectory(prefix="farm-enqueue-test-")
_MODEL = str(write_small_cnn(Path(_MODEL_DIR.name) / "small_cnn.onnx"))


def _npz(name: str, **arrays: np.ndarray) -> str:
    """An ``.npz`` of ``arrays`` beside the model; its path."""
    path = Path(_MODEL_DIR.name) / name
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return str(path)


#: An empty file and a folder, each named like a model.
_EMPTY = Path(_MODEL_DIR.name) / "empty.onnx"
_EMPTY.write_bytes(b"")
_FOLDER = Path(_MODEL_DIR.name) / "folder.onnx"
_FOLDER.mkdir()

#: small_cnn takes x: float32[1, 3, 16, 16].
_INPUTS = _npz("inputs.npz", x=np.ones((1, 3, 16, 16), "float32"))
#: 2 MB holding x: 2 GiB of float32 zeros.
_ZEROS = str(zeros_npz(Path(_MODEL_DIR.name) / "zeros.npz", "x", (1 << 29,)))


def _config(folder: Path) -> Path:
    path = folder / "farm.toml"
    path.write_text(f'data_dir = "{folder / "data"}"\n\n[jobs]\ntune_timeout_s = 7200\n')
    return path


def _run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), *args], env={"FARM_CONFIG": None})


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A farm.toml in tmp_path whose tune time limit (7200 s) is not the default."""
    return _config(tmp_path)


class TestEnqueue:
    def test_enqueue_is_durable_without_farmd(self, farmctl, store: Store) -> None:
        """A job enqueued with no farmd running is stored, and farmctl says farmd is not running."""
        result = farmctl("enqueue", "gemm", "--n", "256", "--abi", "arm64-v8a", "--priority", "5")
        assert result.exit_code == 0, result.output
        assert "job 1 queued" in result.stdout
        assert "no farmd is running" in result.stderr
        view = store.get_job(1)
        assert view is not None and view.spec["params"]["n"] == 256
        assert view.spec["devices"]["abi"] == "arm64-v8a" and view.priority == 5

    def test_no_note_when_farmd_runs(self, farmctl, config: Path) -> None:
        """With a live farmd.json, farmctl does not warn."""
        write_pidfile(config.parent / "data", parse_spec({"kind": "gemm", "params": {"n": 64},
                                                          "not_before": "2025-01-01"}).not_before)
        result = farmctl("enqueue", "gemm", "--n", "64")
        assert result.exit_code == 0
        assert "no farmd" not in result.stderr

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["gemm"], "--n is required"),
            (["gemm", "--n", "8"], "--n: Input should be greater than or equal to 16"),
            (["gemm", "--n", "512", "--bn", "12"], "--bn: block size 12 does not divide --n 512"),
            (["gemm", "--n", "64", "--dtype", "float64"], "--dtype: "),
            (["gemm", "--n", "64", "--dtype", "int8"], "--dtype: "),
            (
                ["gemm", "--n", "1024", "--bn", "64", "--target", "opencl"],
                "--bn: block size 64 needs 4096 threads",
            ),
            (["gemm", "--n", "64", "--samples", "0"], "--samples: "),
            (["gemm", "--n", "64", "--priority", "5000"], "--priority: "),
            (["gemm", "--n", "64", "--attempts", "0"], "--attempts: "),
            (["gemm", "--n", "64", "--timeout", "-1"], "--timeout: "),
            (
                ["gemm", "--n", "64", "--timeout", "inf"],
                "--timeout: Input should be a finite number",
            ),
            (["gemm", "--n", "64", "--timeout", "nan"], "--timeout: "),
            (["gemm", "--n", "64", "--timeout", "604801"], "--timeout: "),
            (["gemm", "--n", "64", "--not-before", "tomorrow"], "--not-before: "),
            (["gemm", "--n", "64", "--not-before", "9999-12-31T23:00:00-05:00"], "--not-before: "),
            (["gemm", "--n", "64", "--not-before", "0001-01-01T00:00:00+05:00"], "--not-before: "),
            (["gemm", "--n", "64", "--repeat", "0"], "--repeat: "),
            (["gemm", "--n", "64", "--count", "0"], "--count: "),
            (["gemm", "--n", "64", "--count", "1000000000"], "--count: "),
            (["gemm", "--n", "64", "--sdk-min", "0"], "--sdk-min: "),
            (["gemm", "--n", "64", "--serial", "A", "--count", "2"], "--count: needs 2 phones"),
            (
                ["gemm", "--n", "64", "--serial", "A", "--serial", "A"],
                "--serial: lists a serial twice",
            ),
            (["gemm", "--n", "64", "--serial", "A\x00B"], "--serial: "),
            (["model", "--model", "/no/such/model.onnx"], "--model: no such file"),
            (["model", "--model", "~nosuchuser/m.onnx"], "--model: "),
            (["model"], "--model is required"),
            (["model", "--model", "x", "--input-shape", "data"], "--input-shape: "),
            (["model", "--model", _MODEL, "--rtol", "inf"], "--rtol: "),
            (["model", "--model", __file__], "--model: not an ONNX model: test_enqueue.py: "),
            (["model", "--model", _MODEL, "--tuned", "7"], "--tuned: no job 7"),
            (["model", "--model", _MODEL, "--tuned", "9223372036854775808"],
             "--tuned: Input should be less than or equal to 2147483647"),
            (["model", "--model", _MODEL, "--inputs", _npz("s.npz", x=np.ones((1, 3, 8, 8), "f4"))],
             "--inputs: s.npz: input 'x' has shape (1, 3, 8, 8), the model takes (1, 3, 16, 16)"),
            (["model", "--model", _MODEL, "--inputs", _npz("d.npz", x=np.ones((1, 3, 16, 16)))],
             "--inputs: d.npz: input 'x' is float64, the model takes float32"),
            (["model", "--model", _MODEL, "--inputs", _npz("n.npz", y=np.ones(2, "f4"))],
             "--inputs: n.npz has ['y'], which the model does not take (its inputs: ['x'])"),
            (["model", "--model", _MODEL, "--inputs", _MODEL],
             "--inputs: small_cnn.onnx is not a numpy .npz archive"),
            (["model", "--model", _MODEL, "--inputs", "/no/such.npz"], "--inputs: cannot read"),
            (["model", "--model", _MODEL, "--inputs", _ZEROS],
             (f"--inputs: zeros.npz: 'x' declares [536870912] float32 (2147483776 bytes); "
              f"at most {JobSettings().inputs_max_bytes} bytes of inputs are taken")),
            (["model", "--model", str(_EMPTY)], "--model: not an ONNX model: empty.onnx is empty"),
            (["tune", "--model", str(_EMPTY)], "--model: not an ONNX model: empty.onnx is empty"),
            # An id of its own: the message holds a temporary path, and pytest-xdist's workers
            # must collect the same test names.
            pytest.param(["model", "--model", str(_FOLDER)],
                         f"--model: {str(_FOLDER)!r} is a folder", id="model-folder"),
            (["model", "--model", _MODEL, "--input-shape", "x=1,3,16,16", "--input-shape",
              "x=2,3,16,16"], "--input-shape: input 'x' given twice"),
            (["tune", "--model", _MODEL, "--input-shape", "x=1,,3"],
             "--input-shape: 'x=1,,3' is not NAME=D1,D2,..."),
            (["tune", "--n", "64", "--model", _MODEL],
             "--model: --n set a gemm to tune: give them or --model, not both"),
            (["tune", "--n", "64", "--trials", "0"], "--trials: "),
            (["tune", "--model", _MODEL, "--trials", "-3"], "--trials: "),
            (["tune"], "--n is required"),
            (["tune", "--n", "64", "--trials", "99999999999999"], "--trials: "),
            (["tune", "--n", "64", "--trials", "4", "--trials-per-batch", "8"],
             "--trials-per-batch: must not exceed --trials 4"),
            (["tune", "--n", "64", "--phones", "2", "--count", "3"],
             "--count: must equal --phones 2 for a tune job"),
            (["tune", "--n", "64", "--phones", "1000"], "--phones: "),
        ],
    )
    def test_bad_flags_are_refused_naming_the_flag(
        self, farmctl, store: Store, args: list[str], message: str
    ) -> None:
        """Each bad value exits 2 with one line 'Error: <flag>...' and stores nothing."""
        result = farmctl("enqueue", *args)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"Error: {message}"), result.stderr
        assert result.stderr.count("\n") == 1
        assert store.list_jobs() == []

    def test_inputs_are_stored_as_a_blob_the_spec_names(self, farmctl, store: Store) -> None:
        """--inputs FILE.npz that fits the model: the spec names its blob and file, no path."""
        result = farmctl("enqueue", "model", "--model", _MODEL, "--inputs", _INPUTS, "--json")
        assert result.exit_code == 0, result.output
        inputs = json.loads(result.stdout)["spec"]["params"]["inputs"]
        assert inputs["name"] == "inputs.npz"
        assert store.get_blob(inputs["sha256"]) == Path(_INPUTS).read_bytes()

    def test_json_prints_the_stored_job(self, farmctl) -> None:
        """--json prints the job as stored, defaults filled in."""
        result = farmctl("enqueue", "gemm", "--n", "64", "--json")
        job = json.loads(result.stdout)
        assert job["id"] == 1 and job["state"] == "queued" and job["spec"]["params"]["bn"] == 32

    def test_tune_spec(self, farmctl, store: Store) -> None:
        """A tune job stores its gemm workload and its phone count as devices.count."""
        assert (
            farmctl("enqueue", "tune", "--n", "128", "--trials", "16", "--phones", "2").exit_code
            == 0
        )
        spec = store.get_job(1).spec  # type: ignore[union-attr]
        assert spec["params"]["gemm"]["n"] == 128 and spec["devices"]["count"] == 2

    def test_gpu_block_up_to_a_work_group_of_1024(self, farmctl, store: Store) -> None:
        """bn=32 on a GPU (1024 threads, as Adreno allows) is queued; the phone's limit is matched
        later."""
        assert (
            farmctl("enqueue", "gemm", "--n", "1024", "--bn", "32", "--target", "opencl").exit_code
            == 0
        )
        assert store.get_job(1).spec["params"]["bn"] == 32  # type: ignore[union-attr]

    def test_time_limit_defaults_to_the_configs_for_the_kind(self, farmctl, store: Store) -> None:
        """Without --timeout the job gets [jobs] of the config: tune_timeout_s for tune, the default
        for gemm."""
        assert farmctl("enqueue", "tune", "--n", "64").exit_code == 0
        assert farmctl("enqueue", "gemm", "--n", "64").exit_code == 0
        tune, gemm = store.get_job(1), store.get_job(2)
        assert tune is not None and gemm is not None
        assert (tune.timeout_s, tune.spec["timeout_s"]) == (7200.0, 7200.0)
        assert gemm.timeout_s == JobSettings().default_timeout_s

    def test_one_command_per_registered_kind(self, farmctl) -> None:
        """`farmctl enqueue` has exactly the registry's kinds, each with its help."""
        assert list(enqueue.commands) == list(KINDS)
        result = farmctl("enqueue", "--help")
        assert all(kind.enqueue.help in result.stdout for kind in KINDS.values())


# --- hostile arguments ---------------------------------------------------------------------

_FLAGS = sorted({
    flag
    for kind in KINDS.values()
    for flag in (*kind.enqueue.flags.values(), "--serial", "--abi", "--soc", "--sdk-min", "--gpu",
                 "--count", "--priority", "--attempts", "--timeout", "--not-before", "--repeat",
                 "--json", "--input-shape", "--bogus")
})
_HOSTILE = st.sampled_from([
    "0", "-1", "1", "16", "32", "64", "1024", "99999999999999", "1" + "0" * 30, "-9" * 20,
    "inf", "-inf", "nan", "1e309", "1e-320", "", " ", "\x00", "\ud800", "~nosuchuser/m.onnx",
    "/", ".", "..", "/dev/null", "x=1,2", "x=", "=1", "x=0", "x=99999999999999999999",
    "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "2025-06-01", "1e20",
    "opencl", "vulkan", "cpu", "float16", "a" * 5000,
])
_VALUE = st.one_of(_HOSTILE, st.text(max_size=12), st.integers().map(str), st.floats().map(str))
#: Raw tokens: mostly click's own usage errors.
_TOKENS = st.lists(st.one_of(st.sampled_from(_FLAGS), _VALUE), max_size=8)
#: Flag-value pairs after a valid start: these reach the spec's validation and the store.
_PAIRS = st.tuples(
    st.sampled_from([[], ["--n", "64"], ["--model", _MODEL], ["--model", __file__]]),
    st.lists(st.tuples(st.sampled_from([f for f in _FLAGS if f != "--json"]), _VALUE), max_size=4),
).map(lambda start_pairs: [*start_pairs[0], *(t for pair in start_pairs[1] for t in pair)])
_ARGS = st.one_of(_TOKENS, _PAIRS)


class TestHostileArguments:
    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(kind=st.sampled_from([*KINDS, "quantum"]), args=_ARGS)
    @example(kind="model", args=["--inputs", "\x00"])  # once a ValueError from the OS call
    def test_only_clean_errors_or_a_valid_job(
        self, tmp_path: Path, kind: str, args: list[str]
    ) -> None:
        """Any arguments end in success, a usage error (2) or one line 'Error: ...' (2), never a
        traceback."""
        config = tmp_path / "farm.toml"
        if not config.exists():
            _config(tmp_path)
        result = _run(config, "enqueue", kind, *args)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(
                "".join(traceback.format_exception(result.exception))
            ) from result.exception
        assert result.exit_code in (0, 2), result.output
        event(f"exit code {result.exit_code}")
        assert "Traceback" not in result.output
        if result.exit_code == 2:  # click's usage error, or farm's one line
            usage = result.stderr.startswith("Usage: ") and "\nError: " in result.stderr
            one_line = result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
            assert usage or one_line, result.stderr
        else:  # stored as valid JSON that parses back to the same spec
            with Store(f"sqlite:///{tmp_path / 'data' / 'farm.db'}") as store:
                job = store.list_jobs(limit=1)[0]
            assert (
                parse_spec(json.loads(json.dumps(job.spec, allow_nan=False))).to_json() == job.spec
            )
