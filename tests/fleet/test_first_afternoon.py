"""A first afternoon with one's own model, step by step as docs/guide.md walks it.

One farmd with one virtual phone at a user's defaults ([results] and [jobs] as
farm/config.py sets them). Every step is a farmctl command on farmd's config,
in the guide's order: an exported ONNX with a symbolic batch is timed on an
``.npz`` of inputs (no ``--input-shape``), profiled, tuned with a budget too
short to search (enqueue warns), timed again ``--tuned`` by that tune, the two
compared, the tune exported and the bundle's C++ example built with cmake and
run on the host. Each step exits 0 or with its documented code and never with a
traceback, and no line any step prints claims tuning records were applied:
none were.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from bundle_example import build_example, example_env, run_example
from click.testing import CliRunner, Result
from exported_models import write_computed_reshape

from farm.cli.main import cli

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.timeout(1200),
              pytest.mark.stock_app_delay]

#: Seconds one ``farmctl wait`` may take (a job takes tens on a loaded host).
WAIT_S = 600

#: A number of tuning records said to be applied: ``tuning records applied: 2``,
#: ``3 tuning records applied``, ``the tuned build applied 2``, ``with 1 tuning record``.
_APPLIED = re.compile(r"applied:? (\d+)|(\d+) tuning records? applied|with (\d+) tuning record")


def records_claimed(text: str) -> list[str]:
    """The lines of ``text`` that say a positive number of tuning records (or "the records")
    were applied."""
    return [line for line in text.splitlines()
            if any(int(n) > 0 for group in _APPLIED.findall(line) for n in group if n)
            or "with the tuning records applied" in line]


class TestRecordsClaimed:
    def test_finds_only_a_positive_count(self) -> None:
        """The check below can fail: a count above 0 is a claim, 0 and "no record" are not."""
        assert records_claimed("tuning records applied: 2 in the job's library\n"
                               "best build: tuned (tuned 1.20x untuned with 3 tuning records "
                               "applied: the tuned build is the best)") != []
        assert records_claimed("tuning records applied: 0 in the job's library (the tuned "
                               "build applied 0)\nbest build: untuned (no tuning record applied "
                               "(nothing was searched))") == []


def job_id_of(result: Result, kind: str) -> int:
    """The id in ``job N queued (kind)``."""
    match = re.search(rf"^job (\d+) queued \({kind}\)$", result.stdout, re.MULTILINE)
    assert match, result.output
    return int(match[1])


def test_own_model_from_inputs_to_a_built_bundle(
    start_farmd: Callable[..., object], tmp_path: Path,
) -> None:
    """Each step of the guide exits as documented; nothing claims records a short tune lacks."""
    running = start_farmd(1, results={})  # the [results] a user gets, not the plumbing ones
    config = tmp_path / "farmctl.toml"
    config.write_text(f'data_dir = "{running.data_dir}"\n')  # type: ignore[attr-defined]
    [serial] = running.serials  # type: ignore[attr-defined]
    printed: list[str] = []

    def farmctl(*args: str, codes: tuple[int, ...] = (0,)) -> Result:
        result = CliRunner().invoke(cli, ["--config", str(config), *args],
                                    env={"FARM_CONFIG": None})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            pytest.fail(f"farmctl {' '.join(args)} raised:\n"
                        + "".join(traceback.format_exception(result.exception)))
        assert result.exit_code in codes, (args, result.output)
        printed.append(result.output)
        return result

    # An exporter's ONNX (symbolic batch) and the user's arrays for it.
    model = write_computed_reshape(tmp_path / "detector.onnx")
    images = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32")
    np.savez(tmp_path / "in.npz", images=images)

    # Time it on the arrays, kernels profiled; the shapes come from the arrays.
    first = job_id_of(farmctl("enqueue", "model", "--model", str(model), "--inputs",
                              str(tmp_path / "in.npz"), "--profile"), "model")
    farmctl("wait", str(first), "--timeout", str(WAIT_S))
    table = farmctl("results", "--job", str(first)).stdout
    assert "median" in table and "95% CI" in table and serial in table, table
    farmctl("results", "--job", str(first), "--outputs", str(tmp_path / "outputs"))
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    [want] = session.run(None, {"images": images})
    np.testing.assert_allclose(np.load(tmp_path / "outputs" / serial / "logits.npy"), want,
                               rtol=1e-4, atol=1e-4)
    assert serial in farmctl("profile", str(first)).stdout

    # A tune too short to search: enqueue warns, and the outcome says no record applied.
    enqueued = farmctl("enqueue", "tune", "--model", str(model),
                       "--input-shape", "images=1,3,8,8", "--trials", "2")
    tune = job_id_of(enqueued, "tune")
    assert "warning: --trials 2 cannot reach a search batch on detector.onnx's" in \
        enqueued.output, enqueued.output
    assert "best build untuned" in farmctl("wait", str(tune), "--timeout", str(WAIT_S)).stdout
    outcome = farmctl("job", str(tune)).stdout
    assert "best build: untuned (no tuning record applied (nothing was searched" in outcome
    assert "speed-up: none: no tuned build exists" in outcome
    assert "tuning records applied: 0 in the job's library" in outcome, outcome
    farmctl("results", "--job", str(tune))

    # The model again with the tune's records (none), then the two builds compared.
    tuned = job_id_of(farmctl("enqueue", "model", "--model", str(model), "--inputs",
                              str(tmp_path / "in.npz"), "--tuned", str(tune)), "model")
    farmctl("wait", str(tuned), "--timeout", str(WAIT_S))
    farmctl("job", str(tuned))
    # The same library timed twice on a shared CPU: any verdict but no traceback (3: a
    # phone slower, 4: one undecided, each with its reason).
    compared = farmctl("compare", str(first), str(tuned), codes=(0, 3, 4)).stdout
    assert "untuned" in compared and f"tuned by job {tune}" in compared, compared

    # The bundle, usable without farm: its C++ example built on the host and run.
    bundle = tmp_path / "bundle"
    assert farmctl("export", str(tune), "--out", str(bundle)).stdout.strip() == \
        f"job {tune} exported to {bundle}"
    readme = (bundle / "README.md").read_text()
    assert "without tuning records" in readme
    env = example_env(tmp_path)
    ran = run_example(build_example(bundle, tmp_path / "build", env), bundle, env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "output 0: matches" in ran.stdout and "latency: median" in ran.stdout

    claims = records_claimed("\n".join([*printed, readme, ran.stdout]))
    assert claims == [], claims
