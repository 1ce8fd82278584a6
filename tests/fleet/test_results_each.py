"""``enqueue gemm --each`` and ``results`` end to end on virtual phones, through farmctl.

farmd runs in-process with three ready usb-only virtual phones (``start_farmd``);
farmctl runs as its own process against farmd's database, as a user would run
it. Every number was measured on the phones' real TVM RPC servers.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from farm.queue.models import JobState

pytestmark = pytest.mark.fleet

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FARMCTL_TIMEOUT_S = 120


def farmctl(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run farmctl with ``config``; fails the test on a non-zero exit."""
    result = subprocess.run(
        [sys.executable, "-c", "from farm.cli.main import main; main()", "--config", str(config),
         *args], capture_output=True, text=True, timeout=FARMCTL_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stderr
    return result


class TestEach:
    def test_three_phones_three_results_one_run(self, start_farmd, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
        """--each on 3 phones gives 3 results, one per serial under one run id, never one pooled
        figure; the CSV carries serial and temperature per sample, and the plot is a PNG."""
        farm = start_farmd(3, same_model=True)
        config = tmp_path / "farmctl.toml"
        config.write_text(f'data_dir = "{farm.data_dir}"\n')
        queued = json.loads(farmctl(config, "enqueue", "gemm", "--n", "64", "--number", "2",
                                    "--samples", "5", "--each", "--json").stdout)
        run_id = queued["run_id"]
        job_ids = [job["id"] for job in queued["jobs"]]
        farm.wait_finished(job_ids)

        pinned = []
        for job_id in job_ids:
            view = farm.store.get_job(job_id)
            assert view.state is JobState.SUCCEEDED, view.error  # type: ignore[union-attr]
            assert view.run_id == run_id  # type: ignore[union-attr]
            [result] = farm.store.results(job_id)
            [serial] = set(result.serials)  # every sample of a result is of its one phone
            assert list(result.summary["per_serial"]) == [serial]
            assert result.summary["gflops"] > 0
            pinned.append(serial)
        assert sorted(pinned) == sorted(farm.serials)

        rows = list(csv.DictReader(io.StringIO(
            farmctl(config, "results", "--run", run_id, "--format", "csv").stdout)))
        assert {r["serial"] for r in rows} == set(farm.serials)
        assert all(r["battery_temp_c"] and r["run_id"] == run_id for r in rows)
        assert {r["job_id"] for r in rows} == {str(j) for j in job_ids}

        plot = tmp_path / "run.png"
        table = farmctl(config, "results", "--run", run_id, "--plot", str(plot)).stdout
        assert all(sum(s in line.split("\t") for line in table.splitlines()) == 1
                   for s in farm.serials)  # one line per phone (piped: tab-separated, whole)
        data = plot.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000
