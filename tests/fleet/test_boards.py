"""Linux boards over SSH: virtual boards under a real sshd, driven by the board controller.

Every board here is a real OpenSSH ``sshd`` on a loopback port with its own host
key (farm checks it: strict policy) and a key made for the test; the RPC server
is the real ``python -m tvm.exec.rpc_server`` the controller starts through SSH,
registered at a real tracker under the board's key. Faults come through the
board (its server killed, its thermal zone heated, its sshd stopped).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from bundle_example import build_example, example_env
from structlog.testing import capture_logs

from farm.clock import wait_until
from farm.config import Settings
from farm.controllers.board import BoardController
from farm.daemon import Farmd
from farm.demo_model import write_small_cnn
from farm.errors import ToolMissing
from farm.health.verdict import Condition, Limits, verdict
from farm.jobs.bundle import TunedModel, write_bundle
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import run_gemm
from farm.jobs.model import build_model, run_model
from farm.jobs.params import GemmParams, ModelParams, TimingParams, TrackerParams
from farm.jobs.tuning_db import TUNED_LIBRARY, applied_database, tune_work_dir
from farm.kinds.model_inputs import outputs_by_serial, put_inputs
from farm.kinds.run import COMPILE_CACHE_DIR
from farm.procs import signal_group
from farm.queue.models import DeviceState, JobState
from farm.queue.records import DeviceRecord, JobView
from farm.queue.store import Store
from farm.results.rows import sample_rows
from farm.ssh import SshClient, SshError, SshTimeout
from farm.tuning.outcome import outcome_lines
from farm.tvm.tracker import TrackerProcess, summary
from farm.virtual.android.spec import profiles
from farm.virtual.board import VirtualBoard
from farm.virtual.board_main import accepts
from farm.virtual.board_testing import virtual_boards
from farm.virtual.fleet import Fleet
from farm.virtual.qemu import ensure_runtime
from farm.virtual.testing import AdbServerHandle
from farm.virtual.testing import adb_server as adb_server_at
from farm.zoo import MODELS, write_model

pytestmark = [
    pytest.mark.fleet,
    pytest.mark.skipif(not shutil.which("sshd") and not Path("/usr/sbin/sshd").exists(),
                       reason="OpenSSH's sshd is not installed (setup.sh installs it)"),
]

REGISTER_DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrackerProcess]:
    """A real TVM tracker on a free loopback port, shared by the module's tests.

    Each test's servers register under their own keys and are stopped after it.
    """
    log_path = tmp_path_factory.mktemp("tracker") / "tracker.log"
    with TrackerProcess.start(log_path=log_path) as process:
        yield process


@pytest.fixture
def small_cnn(tmp_path: Path) -> Path:
    """A small real CNN saved as ONNX."""
    return write_small_cnn(tmp_path / "small_cnn.onnx")


@pytest.fixture(scope="module")
def shared_boards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VirtualBoard]]:
    """Two virtual boards for the module's tests, ended with everything they ran at its end."""
    with virtual_boards(2, tmp_path_factory.mktemp("boards")) as running:
        yield running


@pytest.fixture
def boards(shared_boards: list[VirtualBoard]) -> Iterator[list[VirtualBoard]]:
    """The two shared boards, given back after the test as it found them: cool and plugged."""
    yield shared_boards
    for board in shared_boards:
        board.cool()
        if not accepts(board.port):
            board.replug()


@pytest.fixture
def controller(boards: list[VirtualBoard], tracker: TrackerProcess) -> Iterator[BoardController]:
    """The board controller of both boards, their servers stopped after the test."""
    ctl = BoardController([b.settings() for b in boards], tracker.host, tracker.port)
    yield ctl
    for board in boards:
        ctl.stop_server(board.name)
    ctl.close()


def _registered(tracker: TrackerProcess, key: str) -> bool:
    return key in {server.key for server in summary(tracker.host, tracker.port).servers}


def _wait_registered(tracker: TrackerProcess, key: str) -> None:
    wait_until(lambda: _registered(tracker, key), REGISTER_DEADLINE_S, f"{key} registered")


def _tracker_params(tracker: TrackerProcess, ctl: BoardController, serial: str) -> TrackerParams:
    return TrackerParams(host=tracker.host, port=tracker.port, key=ctl.tracker_key(serial),
                         serial=serial, session_timeout_s=120, connect_timeout_s=60)


class TestBoardsServeJobs:
    def test_two_boards_register_and_run_gemm_and_a_model(
        self, boards: list[VirtualBoard], controller: BoardController,
        tracker: TrackerProcess, small_cnn: Path, tmp_path: Path,
    ) -> None:
        """Both boards answer over SSH, register their own key, and run GEMM and a model checked
        against numpy and onnxruntime with the controller's target."""
        names = [b.name for b in boards]
        assert [(d.serial, d.state) for d in controller.discover()] == [
            (name, "device") for name in names]
        cache = CompileCache(tmp_path / "cache")
        for name in names:
            facts = controller.facts(name)
            assert facts["kind"] == "board" and facts["num_cores"] >= 1
            controller.start_server(name)
            _wait_registered(tracker, controller.tracker_key(name))
            spec = controller.compile_target(facts)
            params = GemmParams(n=64, bn=16, timing=TimingParams(number=2, repeat=3,
                                                                 min_repeat_ms=1))
            result = run_gemm(params, spec.target, _tracker_params(tracker, controller, name),
                              cache)
            assert result.max_abs_err < 1e-2  # load_gemm also checked C against numpy
            assert result.gflops > 0
            sample = controller.read_health(name, datetime.now(UTC), registered=True)
            assert sample.app_running is True
            assert verdict(sample, Limits()).condition is Condition.GOOD
        first = names[0]
        model = run_model(ModelParams(small_cnn, timing=TimingParams(number=2, repeat=2,
                                                                      min_repeat_ms=1)),
                          controller.compile_target(controller.facts(first)).target,
                          _tracker_params(tracker, controller, first), cache)
        assert model.max_abs_err < 1e-4  # run_model compared it with onnxruntime
        assert len(model.samples_s) == 2


class TestBoardFaults:
    def test_killed_server_comes_back_through_the_first_rung(
        self, boards: list[VirtualBoard], controller: BoardController, tracker: TrackerProcess,
    ) -> None:
        """A killed server reads as not running and unregistered; restart_app brings it back."""
        board = boards[0]
        controller.start_server(board.name)
        key = controller.tracker_key(board.name)
        _wait_registered(tracker, key)
        assert board.kill_server()
        wait_until(lambda: not _registered(tracker, key), REGISTER_DEADLINE_S, "unregistered")
        sample = controller.read_health(board.name, datetime.now(UTC), registered=False)
        assert sample.app_running is False
        assert verdict(sample, Limits()).condition is Condition.UNHEALTHY
        steps = controller.recovery_steps(board.name)
        assert [s.name for s in steps] == ["restart_app"]  # reboot_allowed is off
        steps[0].run()
        _wait_registered(tracker, key)
        assert controller.read_health(board.name, datetime.now(UTC)).app_running is True

    def test_server_reaches_the_tracker_through_an_ssh_forward(
        self, boards: list[VirtualBoard], tracker: TrackerProcess, tmp_path: Path,
    ) -> None:
        """tracker_via = forward: the server dials the board's loopback, the SSH connection
        carries it to the tracker, and a GEMM session reaches it at the board's address."""
        board = boards[1]
        ctl = BoardController([board.settings(tracker_via="forward")], "10.255.255.1",
                              tracker.port, (tracker.host, tracker.port))  # unreachable direct
        try:
            ctl.start_server(board.name)
            key = ctl.tracker_key(board.name)
            _wait_registered(tracker, key)
            [server] = [s for s in summary(tracker.host, tracker.port).servers if s.key == key]
            assert server.host == "127.0.0.1"  # the custom address: the board's host
            spec = ctl.compile_target(ctl.facts(board.name))
            result = run_gemm(GemmParams(n=32, bn=16, timing=TimingParams(1, 2, 1)), spec.target,
                              _tracker_params(tracker, ctl, board.name),
                              CompileCache(tmp_path / "cache"))
            assert result.gflops > 0
        finally:
            ctl.stop_server(board.name)
            ctl.close()

    def test_heat_holds_the_gate_until_the_board_cools(
        self, boards: list[VirtualBoard], controller: BoardController,
    ) -> None:
        """A hot thermal zone makes the board cooling; cooled, it is good again."""
        board = boards[1]
        limits = replace(Limits(), zone_temp_max_c=70.0)
        board.heat(85.0)
        hot = controller.gating_reading(board.name, datetime.now(UTC))
        assert hot.value("max_zone_temp_c") == pytest.approx(85.0)
        assert verdict(hot, limits).condition is Condition.COOLING
        board.cool()
        cool = controller.gating_reading(board.name, datetime.now(UTC))
        assert verdict(cool, limits).condition is Condition.GOOD

    def test_unplugged_board_is_offline_until_replugged(
        self, boards: list[VirtualBoard], controller: BoardController,
    ) -> None:
        """With its sshd stopped a board is discovered offline; replugged, it is a device again."""
        board = boards[0]
        assert controller.facts(board.name)["abi"]  # the connection is open now
        board.unplug()
        states = {d.serial: d.state for d in controller.discover()}
        assert states == {boards[0].name: "offline", boards[1].name: "device"}
        board.replug()
        wait_until(lambda: {d.serial: d.state for d in controller.discover()}[board.name]
                   == "device", 30, "board back")


class TestSshClient:
    def test_arguments_reach_the_board_literally(self, boards: list[VirtualBoard]) -> None:
        """An argv element with spaces, quotes and $(...) arrives as one literal argument."""
        client = SshClient(boards[0].settings())
        try:
            nasty = "a b 'c' $(touch pwned) `touch pwned2`; echo no"
            result = client.run(["printf", "%s", nasty])
            assert result.stdout.decode() == nasty
            assert not list(boards[0].root.glob("**/pwned*"))
        finally:
            client.close()

    def test_failure_carries_exit_code_and_stderr(self, boards: list[VirtualBoard]) -> None:
        """A non-zero exit is an SshError (a PhoneFault naming the board) with code and stderr."""
        client = SshClient(boards[0].settings())
        try:
            with pytest.raises(SshError) as info:
                client.run(["sh", "-c", "echo broken >&2; exit 3"])
            assert info.value.exit_code == 3
            assert "broken" in info.value.stderr
            assert info.value.serial == boards[0].name
            assert client.run(["false"], check=False).exit_code == 1
        finally:
            client.close()

    def test_deadline(self, boards: list[VirtualBoard]) -> None:
        """A command outliving its deadline is an SshTimeout; the connection stays usable."""
        client = SshClient(boards[0].settings())
        try:
            with pytest.raises(SshTimeout):
                client.run(["sleep", "30"], timeout_s=0.5)
            assert client.run(["echo", "ok"]).stdout == b"ok\n"
        finally:
            client.close()


class TestBoardSetupErrors:
    def test_missing_tvm_runtime_is_a_clear_user_error(
        self, boards: list[VirtualBoard], tracker: TrackerProcess,
    ) -> None:
        """A board whose python lacks TVM fails start_server with ToolMissing naming the fix."""
        board = boards[0]
        ctl = BoardController([board.settings(python="/usr/bin/python3-no-such")],
                              tracker.host, tracker.port)
        try:
            with pytest.raises(ToolMissing, match="pip install apache-tvm"):
                ctl.start_server(board.name)
        finally:
            ctl.close()

    def test_unknown_host_key_is_refused(self, boards: list[VirtualBoard],
                                         tracker: TrackerProcess, tmp_path: Path) -> None:
        """Strict host key policy: a board whose key is not in known_hosts is offline, and the
        log says why, once."""
        board = boards[0]
        empty = tmp_path / "empty_known_hosts"
        empty.write_text("")
        ctl = BoardController([board.settings(known_hosts=empty)], tracker.host, tracker.port)
        try:
            with capture_logs() as logs:
                assert [d.state for d in ctl.discover()] == ["offline"]
                assert [d.state for d in ctl.discover()] == ["offline"]
            [event] = [e for e in logs if e["event"] == "board_unreachable"]
            assert "known_hosts" in event["reason"] and event["serial"] == board.name
        finally:
            ctl.close()


# -- farmd: boards as fleet members beside phones ------------------------------------------

FARMD_READY_S = 180.0
FARMD_JOB_S = 300.0


@dataclass
class BoardsFarmd:
    """An in-process farmd with virtual boards (and maybe virtual phones)."""

    farmd: Farmd
    boards: list[VirtualBoard]
    phones: list[str]

    @property
    def store(self) -> Store:
        """farmd's queue."""
        return self.farmd.store

    def device(self, serial: str) -> DeviceRecord:
        """The device's row now."""
        record = self.store.get_device(serial)
        assert record is not None, serial
        return record

    def wait_state(self, serials: list[str], state: DeviceState,
                   deadline_s: float = FARMD_READY_S) -> None:
        """Wait until every device of ``serials`` is in ``state``."""
        wait_until(lambda: all((d := self.store.get_device(s)) is not None and d.state is state
                               for s in serials), deadline_s, f"{serials} {state.value}")

    def run(self, spec: dict[str, Any]) -> JobView:
        """Enqueue ``spec`` and wait until it ended; returns its view."""
        job_id = self.store.enqueue(spec, datetime.now(UTC))
        wait_until(lambda: (v := self.store.get_job(job_id)) is not None and v.state.ended,
                   FARMD_JOB_S, f"job {job_id} ended")
        view = self.store.get_job(job_id)
        assert view is not None
        return view


def _start_boards_farmd(stack: contextlib.ExitStack, root: Path, adb_port: int,
                        settings: Callable[..., Settings], boards: int = 2, phones: int = 0,
                        arch: str = "host") -> BoardsFarmd:
    """farmd with ``boards`` virtual boards of ``arch`` and ``phones`` phones, all ready.

    Everything started is ended by ``stack``; ``settings(**sections)`` gives farmd's settings.
    """
    running = stack.enter_context(virtual_boards(boards, root / "boards", prefix="vb",
                                                 arch=arch))
    serials: list[str] = []
    if phones:
        fleet = stack.enter_context(Fleet(phones, specs=profiles(1, "usb-only") * phones,
                                          adb_port=adb_port, data_dir=root / "phones"))
        serials = list(fleet.serials)
    farmd = Farmd(settings(api={"enabled": False}, health={"interval_s": 2.0},
                           boards=[b.settings().model_dump() for b in running]))
    stack.callback(farmd.stop)
    farmd.start()
    farm = BoardsFarmd(farmd, running, serials)
    farm.wait_state([b.name for b in running] + serials, DeviceState.READY)
    return farm


@pytest.fixture
def farmd_with_boards(
    adb_server: AdbServerHandle, tmp_path: Path, hermetic_settings: Callable[..., Settings],
) -> Iterator[Callable[..., BoardsFarmd]]:
    """Factory: ``farmd_with_boards(boards=2, phones=0)`` -> farmd with every device ready."""
    with contextlib.ExitStack() as stack:
        def start(boards: int = 2, phones: int = 0, arch: str = "host") -> BoardsFarmd:
            return _start_boards_farmd(stack, tmp_path, adb_server.port, hermetic_settings,
                                       boards, phones, arch)

        yield start


@pytest.fixture(scope="class")
def aarch64_farm(tmp_path_factory: pytest.TempPathFactory,
                 farmd_settings_at: Callable[..., Settings]) -> Iterator[BoardsFarmd]:
    """farmd with one AArch64 board under QEMU, ready, shared by the class's tests."""
    root = tmp_path_factory.mktemp("aarch64")
    with adb_server_at() as adb, contextlib.ExitStack() as stack:
        yield _start_boards_farmd(
            stack, root, adb.port,
            lambda **sections: farmd_settings_at(root / "farm", adb.port, **sections),
            boards=1, arch="aarch64")


class TestFarmdBoards:
    def test_two_boards_ready_run_gemm_and_model_and_recover(
        self, farmd_with_boards: Callable[..., BoardsFarmd], tmp_path: Path,
    ) -> None:
        """Two boards reach ready as kind board, run a GEMM each and a model checked against
        numpy and onnxruntime, and come back ready after their server is killed."""
        farm = farmd_with_boards(boards=2)
        names = [b.name for b in farm.boards]
        for name in names:
            assert farm.device(name).kind == "board"
            view = farm.run({"kind": "gemm", "params": {"n": 64, "number": 2, "repeat": 3},
                             "devices": {"serials": [name], "kind": "board"}})
            assert view.state is JobState.SUCCEEDED, view.error
            [result] = farm.store.results(view.id)
            assert {r["serial"] for r in result.summary["runs"]} == {name}
            assert result.summary["runs"][-1]["max_abs_err"] < 1e-3  # C checked against numpy
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        view = farm.run({"kind": "model", "devices": {"kind": "board"},
                         "params": {"path": str(model), "number": 2, "repeat": 2,
                                    "tolerance": {"rtol": 1e-4, "atol": 1e-4}}})
        assert view.state is JobState.SUCCEEDED, view.error
        [result] = farm.store.results(view.id)
        assert result.summary["runs"][-1]["max_abs_err"] < 1e-3  # against onnxruntime
        # A tune: farmd serves the job's key on the board, then its own key for the timing.
        view = farm.run({"kind": "tune", "devices": {"kind": "board"},
                         "params": {"gemm": {"n": 32, "number": 1, "repeat": 2}, "trials": 2,
                                    "trials_per_batch": 2, "phones": 1}})
        assert view.state is JobState.SUCCEEDED, view.error
        [result] = farm.store.results(view.id)
        assert result.summary["trials_measured"] >= 2
        assert list(result.summary["per_serial"]) in ([n] for n in names)
        killed = farm.boards[0]
        old_pid = killed.server_pid()
        assert killed.kill_server()
        wait_until(lambda: killed.server_pid() not in (None, old_pid), FARMD_READY_S,
                   "server restarted by the recovery ladder")
        farm.wait_state([killed.name], DeviceState.READY)
        events = [e.reason for e in farm.store.device_events(killed.name, limit=50)]
        assert any("restart_app" in reason for reason in events), events

    def test_jobs_land_on_the_kind_they_ask_for(
        self, farmd_with_boards: Callable[..., BoardsFarmd],
    ) -> None:
        """With a phone and a board ready, kind=board runs on the board and kind=android on
        the phone."""
        farm = farmd_with_boards(boards=1, phones=1)
        board, phone = farm.boards[0].name, farm.phones[0]
        for kind, expected in (("board", board), ("android", phone)):
            view = farm.run({"kind": "gemm", "params": {"n": 32, "number": 1, "repeat": 2},
                             "devices": {"kind": kind}})
            assert view.state is JobState.SUCCEEDED, view.error
            [attempt] = farm.store.attempts(view.id)[-1:]
            assert list(attempt.serials) == [expected]


@pytest.mark.skipif(not shutil.which("qemu-aarch64-static"),
                    reason="qemu-user-static is not installed (setup.sh installs it)")
class TestFarmdAarch64Board:
    def test_emulated_aarch64_board_runs_gemm_and_a_zoo_model_through_the_queue(
        self, aarch64_farm: BoardsFarmd, tmp_path: Path,
    ) -> None:
        """An AArch64 board under QEMU becomes ready with aarch64, emulated facts and runs a
        GEMM 128 and a small zoo model (profiled, on the user's inputs) through the queue,
        checked against numpy and onnxruntime; the model's export bundle example, cross-built,
        matches under QEMU."""
        farm = aarch64_farm
        name = farm.boards[0].name
        facts = farm.device(name).facts
        assert (facts["abi"], facts["emulated"]) == ("aarch64", True)
        view = farm.run({"kind": "gemm", "params": {"n": 128, "number": 1, "repeat": 2},
                         "devices": {"serials": [name]}})
        assert view.state is JobState.SUCCEEDED, view.error
        [result] = farm.store.results(view.id)
        run = result.summary["runs"][-1]
        assert run["target"]["mtriple"] == "aarch64-linux-gnu" and run["emulated"]
        assert run["max_abs_err"] < 1e-3  # C checked against numpy
        assert result.summary["per_serial"][name]["emulated"]
        zoo = MODELS["mobilenet_v3_small"]
        model = write_model(zoo, tmp_path / "zoo", small=True)
        shape = zoo.input_shapes(small=True)["x"]
        np.savez(tmp_path / "inputs.npz", x=np.linspace(-1, 1, math.prod(shape),
                                                        dtype="float32").reshape(shape))
        inputs = put_inputs(farm.store, tmp_path / "inputs.npz", "inputs.npz", datetime.now(UTC),
                            farm.farmd.settings.jobs.inputs_max_bytes)
        view = farm.run({"kind": "model", "devices": {"serials": [name]},
                         "params": {"path": str(model), "number": 1, "repeat": 1,
                                    "input_shapes": zoo.input_shapes(small=True),
                                    "inputs": inputs.model_dump(), "profile": True}})
        assert view.state is JobState.SUCCEEDED, view.error
        [result] = farm.store.results(view.id)
        # On the user's inputs, against onnxruntime; the board's outputs kept.
        assert result.summary["runs"][-1]["max_abs_err"] < 1e-3
        assert list(outputs_by_serial(result)) == [name]
        assert result.summary["runs"][-1]["profile"]["kernels"]  # each kernel timed there
        # The export bundle of that build (farmd's cached library as the job's best build):
        # its C++ example cross-built for aarch64 and run under QEMU.
        target = result.summary["runs"][-1]["target"]
        cache = CompileCache(Path(farm.farmd.settings.data_dir) / COMPILE_CACHE_DIR)
        library, _ = build_model(ModelParams(model, zoo.input_shapes(small=True)), target, cache)
        work_dir = tmp_path / "tune"
        work_dir.mkdir()
        shutil.copyfile(library, work_dir / TUNED_LIBRARY)
        tuned = TunedModel(view.id, model, "0" * 64, model.name, zoo.input_shapes(small=True),
                           target, work_dir, {})
        bundle = write_bundle(tuned, tmp_path / "bundle", cache)
        assert "On a Linux ARM board (aarch64)" in (bundle / "README.md").read_text()
        runtime = ensure_runtime()
        env = example_env(tmp_path)
        binary = build_example(bundle, tmp_path / "build-aarch64", env, [
            "-DCMAKE_TOOLCHAIN_FILE=linux-aarch64.cmake", f"-DTVM_ROOT={runtime.root}",
            f"-DTVM_FFI_ROOT={runtime.root}"])
        ran = subprocess.run(runtime.argv(binary, str(bundle), "--repeat", "1"), env=env,
                             capture_output=True, text=True, timeout=600, check=False)
        assert ran.returncode == 0 and "output 0: matches" in ran.stdout, ran.stdout + ran.stderr

    def test_a_gemm_tune_on_the_emulated_board_checks_both_libraries_against_numpy(
        self, aarch64_farm: BoardsFarmd,
    ) -> None:
        """A GEMM tune on the emulated board runs one batch, then its tuned and untuned
        libraries under QEMU, each C checked against numpy; it keeps no tuning record."""
        farm = aarch64_farm
        name = farm.boards[0].name
        view = farm.run({"kind": "tune", "devices": {"kind": "board"},
                         "params": {"gemm": {"n": 64, "number": 1, "repeat": 1},
                                    "trials": 50, "trials_per_batch": 2}})
        assert view.state is JobState.SUCCEEDED, view.error
        [result] = farm.store.results(view.id)
        summary = result.summary
        assert summary["emulated"] and summary["outputs_matched"]
        assert summary["trials_measured"] == 2  # one batch of the 50 asked
        [run] = summary["runs"]
        assert run["serial"] == name and run["max_abs_err"] < 1e-3
        assert farm.store.tuning_records(view.id) == []
        assert outcome_lines(summary) == [
            f"{name} is emulated: the tune checked the path and the outputs and ranked nothing"]

    def test_a_tune_on_the_emulated_board_checks_the_path_and_ranks_nothing(
        self, aarch64_farm: BoardsFarmd, tmp_path: Path,
    ) -> None:
        """A model tune on the emulated board ends done after one batch through the path, its
        outputs matched, nothing ranked: no fleet record, no record a --tuned build applies, no
        picks check, one outcome line."""
        farm = aarch64_farm
        name = farm.boards[0].name
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        view = farm.run({"kind": "tune", "devices": {"kind": "board"},
                         "params": {"model": {"path": str(model), "number": 1, "repeat": 1},
                                    "trials": 50, "trials_per_batch": 2, "max_tasks": 1}})
        assert view.state is JobState.SUCCEEDED, view.error
        [result] = farm.store.results(view.id)
        summary = result.summary
        note = f"{name} is emulated: the tune checked the path and the outputs and ranked nothing"
        assert outcome_lines(summary) == [note]  # what farmctl job shows
        assert summary["emulated"] and summary["outputs_matched"]
        assert summary["trials_measured"] == 2  # one batch (of 50 asked), built and run there
        [run] = summary["runs"]
        assert run["serial"] == name and run["max_abs_err"] < 1e-3  # against onnxruntime
        assert (summary["speedup"], summary["picks_checked"], summary["records_applied"]) == (
            None, None, 0)
        assert [r.emulated for r in sample_rows(farm.store, job_ids=[view.id])] == [True]
        assert farm.store.tuning_records(view.id) == []
        assert farm.store.tuning_record_summaries() == []  # nothing for later tunes to seed from
        work_dir = tune_work_dir(Path(farm.farmd.settings.data_dir), view.id)
        assert applied_database(work_dir) is None  # a --tuned build applies no record


_ORPHAN_SCRIPT = """
import sys
from pathlib import Path
from farm.controllers.board import BoardController
from farm.virtual.board_testing import virtual_boards
root, tracker_port = Path(sys.argv[1]), int(sys.argv[2])
with virtual_boards(1, root) as boards:
    ctl = BoardController([boards[0].settings()], "127.0.0.1", tracker_port)
    ctl.start_server(boards[0].name)
    print("server_pid", boards[0].server_pid(), flush=True)
    sys.stdin.read()  # until killed
"""


class TestBoardEndsWithItsOwner:
    def test_kill_9_of_the_owner_ends_sshd_and_the_server(
        self, tracker: TrackerProcess, tmp_path: Path,
    ) -> None:
        """kill -9 of the process that ran a board ends its sshd and the server started on it."""
        owner = subprocess.Popen(  # a test process of its own, killed like a crashed pytest
            [sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path / "b"), str(tracker.port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        try:
            assert owner.stdout is not None
            lines = iter(owner.stdout.readline, b"")  # structlog writes to stdout too
            server_pid = int(next(ln for ln in lines if ln.startswith(b"server_pid")).split()[1])
            assert psutil.pid_exists(server_pid)
            board_procs = [p for p in psutil.process_iter(["cmdline"])
                           if str(tmp_path / "b") in " ".join(p.info["cmdline"] or [])]
            assert board_procs  # the keeper and sshd
            owner.kill()
            owner.wait()
            wait_until(lambda: not _alive(server_pid) and not any(map(_alive_proc, board_procs)),
                       30, "board processes ended")
        finally:
            signal_group(owner.pid)
            if owner.stdin is not None:
                owner.stdin.close()
            if owner.stdout is not None:
                owner.stdout.close()


def _alive(pid: int) -> bool:
    try:
        return _alive_proc(psutil.Process(pid))
    except psutil.Error:
        return False


def _alive_proc(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
