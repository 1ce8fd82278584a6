"""Benchmark jobs end to end on virtual phones, through farm's real queue and farmd.

farmd runs in-process as ``farmctl demo`` builds it (private adb server, its
own tracker, the signed stand-in APK); N usb-only virtual phones are plugged
into its adb server and provisioned to ``ready`` by its fleet manager with no
other action. The test enqueues specs in farmd's store and reads the result rows.
The jobs run in farmd's child processes against the phones' real TVM RPC
servers, so every number here was measured through adb tunnels and the tracker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from farm.config import Settings
from farm.daemon import Farmd
from farm.demo_model import write_small_cnn
from farm.netaddr import free_port
from farm.provision.standin import demo_apk
from farm.queue.models import DeviceState, JobState
from farm.queue.store import Store
from farm.runner.dispatcher import CHILD_LOG
from farm.virtual.android.spec import profiles
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle, wait_until

pytestmark = pytest.mark.fleet

READY_DEADLINE_S = 150.0
JOB_DEADLINE_S = 240.0
FINISHED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass
class RunningFarmd:
    """An in-process farmd with its virtual phones."""

    farmd: Farmd
    fleet: Fleet

    @property
    def store(self) -> Store:
        """farmd's queue."""
        return self.farmd.store

    @property
    def serials(self) -> list[str]:
        """The virtual phones' serials."""
        return list(self.fleet.serials)

    @property
    def data_dir(self) -> Path:
        """farmd's data folder."""
        return self.farmd.data_dir

    def wait_ready(self, deadline_s: float = READY_DEADLINE_S) -> None:
        """Wait until every phone is provisioned, registered and ``ready``."""
        def ready() -> bool:
            return all((d := self.store.get_device(s)) is not None and d.state is DeviceState.READY
                       for s in self.serials)

        wait_until(ready, deadline_s, "every phone ready")

    def enqueue(self, spec: dict[str, Any]) -> int:
        """Put ``spec`` on the queue now."""
        return self.store.enqueue(spec, datetime.now(UTC))

    def wait_finished(self, job_ids: list[int], deadline_s: float = JOB_DEADLINE_S) -> None:
        """Wait until every job reached a final state."""
        wait_until(lambda: all(self.store.get_job(i).state in FINISHED for i in job_ids),  # type: ignore[union-attr]
                   deadline_s, f"jobs {job_ids} finished")

    def child_logs(self, job_ids: list[int]) -> str:
        """The child logs of every attempt of ``job_ids``, concatenated."""
        runs = self.data_dir / "runs"
        return "".join(
            (runs / f"attempt-{a.id}" / CHILD_LOG).read_text(errors="replace")
            for i in job_ids for a in self.store.attempts(i)
            if (runs / f"attempt-{a.id}" / CHILD_LOG).is_file()
        )


def farmd_settings(data_dir: Path, adb_port: int, apk: Path, **jobs: float) -> Settings:
    """Hermetic farmd settings: tmp data folder, private adb server, free ports, usb-only."""
    return Settings.model_validate({
        "data_dir": str(data_dir),
        "adb": {"port": adb_port},
        "apk": {"path": str(apk)},
        "tracker": {"port": free_port(), "network": "usb-only"},
        "metrics": {"enabled": False},
        "jobs": jobs,
    })


@pytest.fixture
def start_farmd(adb_server: AdbServerHandle, tmp_path: Path) -> Iterator[Callable[..., RunningFarmd]]:
    """Factory: ``start_farmd(phones, same_model=False)`` -> farmd with ready phones; all stopped after.

    The phones are plugged into farmd's adb server the way USB phones are; with
    ``same_model`` they are all the first built-in model, so they share one
    compile target.
    """
    with contextlib.ExitStack() as stack:
        def start(phones: int, *, same_model: bool = False, **jobs: float) -> RunningFarmd:
            specs = profiles(1 if same_model else phones, "usb-only")
            specs = [specs[i % len(specs)] for i in range(phones)]
            fleet = stack.enter_context(
                Fleet(phones, specs=specs, adb_port=adb_server.port, data_dir=tmp_path / "phones"))
            apk = demo_apk(tmp_path / "apk")
            farmd = Farmd(farmd_settings(tmp_path / "farm", adb_server.port, apk, **jobs))
            stack.callback(farmd.stop)
            farmd.start()
            running = RunningFarmd(farmd, fleet)
            running.wait_ready()
            return running

        yield start


def gemm_spec(serial: str, n: int = 96, repeat: int = 4) -> dict[str, Any]:
    """A CPU GEMM pinned to one phone."""
    return {"kind": "gemm", "params": {"n": n, "number": 2, "repeat": repeat},
            "devices": {"serials": [serial]}}


class TestGemmAndCompileOnce:
    def test_four_phones_one_build_every_repeat_stored(self, start_farmd) -> None:  # type: ignore[no-untyped-def]
        """Four GEMM jobs, one per phone, all succeed with every repeat stored, and only one of them compiled."""
        farm = start_farmd(4, same_model=True)
        repeat = 4
        job_ids = [farm.enqueue(gemm_spec(s, repeat=repeat)) for s in farm.serials]
        farm.wait_finished(job_ids)
        for job_id, serial in zip(job_ids, farm.serials, strict=True):
            view = farm.store.get_job(job_id)
            assert view.state is JobState.SUCCEEDED, view.error  # type: ignore[union-attr]
            [result] = farm.store.results(job_id)
            assert len(result.samples) == repeat and all(s > 0 for s in result.samples)
            [run] = result.summary["runs"]
            assert run["serial"] == serial
            assert run["gflops"] > 0 and result.summary["gflops"] > 0
            # The job compared C with numpy's A @ B before timing.
            assert run["max_abs_err"] < 1e-3
            flop = 2 * 96**3
            assert result.summary["gflops"] == pytest.approx(flop / np.mean(result.samples) / 1e9)
        logs = farm.child_logs(job_ids)
        assert logs.count("compile_cache_built") == 1
        assert logs.count("compile_cache_hit") == 3
        assert len(list((farm.data_dir / "compile-cache").glob("*/lib.so"))) == 1


class TestModelJob:
    def test_small_cnn_matches_onnxruntime(self, start_farmd, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
        """A small CNN built now runs on the phone and its output matches onnxruntime's."""
        farm = start_farmd(1)
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        job_id = farm.enqueue({"kind": "model",
                               "params": {"path": str(model), "number": 2, "repeat": 3,
                                          "tolerance": {"rtol": 1e-4, "atol": 1e-4}}})
        farm.wait_finished([job_id])
        view = farm.store.get_job(job_id)
        assert view.state is JobState.SUCCEEDED, view.error  # type: ignore[union-attr]
        [result] = farm.store.results(job_id)
        assert len(result.samples) == 3 and all(s > 0 for s in result.samples)
        [run] = result.summary["runs"]
        assert run["max_abs_err"] < 1e-3
        assert result.summary["model"] == "small_cnn.onnx"
