"""The gpu DeviceController on NVML readings recorded on an H100, and its real rpc_server.

NVML is replayed (tests/fixtures/nvml); the RPC server is farm's
(:mod:`farm.gpu.server`: TVM's listen loop, each session served in its own
process), registering at a real tracker. No GPU is needed: the server only
serves CUDA once a session asks for it.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from farm.clock import wait_until
from farm.config import GpuSettings, Settings, TrackerSettings
from farm.controllers import GPU, ControllerContext, DeviceController, controller_for
from farm.controllers.gpu import GpuController
from farm.errors import PhoneFault, SpecError
from farm.gpu.nvml import RecordedReader, parse
from farm.gpu.server import server_argv
from farm.health.sample import HealthSample
from farm.health.verdict import Condition, Limits, verdict
from farm.procs import group_alive, signal_group
from farm.tvm.tracker import TrackerProcess, summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"
NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


def idle() -> dict[str, Any]:
    return dict(json.loads((FIXTURES / "h100_idle.json").read_text())["readings"][0])


def controller(raw: dict[str, Any] | None = None, **gpu: Any) -> GpuController:
    settings = Settings(gpu=GpuSettings(enabled=True, **gpu))
    return GpuController(settings, RecordedReader([raw or idle()]))


def with_gpu(**fields: Any) -> dict[str, Any]:
    """The idle H100 reading with some raw fields changed (no recording shows heat)."""
    raw = copy.deepcopy(idle())
    raw["gpus"][0].update(fields)
    return raw


SERIAL = idle()["gpus"][0]["uuid"].lower()


class TestDiscoveryAndFacts:
    def test_registry_builds_a_gpu_controller(self) -> None:
        """The registry's "gpu" kind is this controller, and it meets the protocol."""
        ctrl = controller_for(GPU, ControllerContext(
            Settings(), {"nvml": RecordedReader([idle()])}))
        assert isinstance(ctrl, GpuController)
        assert isinstance(ctrl, DeviceController)

    def test_disabled_gpu_section_reads_no_nvml(self) -> None:
        """With [gpu] off (the default) discovery is empty and NVML is never read."""
        class Untouchable:
            def read(self) -> dict[str, Any]:
                raise AssertionError("NVML was read")

        assert GpuController(Settings(), Untouchable()).discover() == []

    def test_each_gpu_is_a_device_named_by_its_uuid(self) -> None:
        """discover() lists the H100 in state device, its serial its lower-case UUID."""
        (found,) = controller().discover()
        assert found.serial == SERIAL and found.serial.startswith("gpu-")
        assert found.state == "device"

    @pytest.mark.parametrize(("chosen", "count"), [((), 1), (("0",), 1), (("1",), 0)])
    def test_gpus_setting_chooses_by_index(self, chosen: tuple[str, ...], count: int) -> None:
        """[gpu] gpus picks GPUs by NVML index; empty serves all."""
        assert len(controller(gpus=chosen).discover()) == count

    def test_gpus_setting_chooses_by_uuid(self) -> None:
        """[gpu] gpus also accepts NVML's UUID as NVML spells it."""
        assert len(controller(gpus=(idle()["gpus"][0]["uuid"],)).discover()) == 1

    def test_facts_name_compute_capability_memory_driver_and_cuda(self) -> None:
        """facts() carries what the scheduler and the compile target read."""
        facts = controller().facts(SERIAL)
        assert facts["gpu"] == "NVIDIA H100 80GB HBM3"
        assert facts["compute_capability"] == "9.0"
        assert facts["arch"] == "sm_90"
        assert facts["memory_total_mb"] == 81559
        assert facts["driver_version"] == "580.159.04"
        assert facts["cuda_version"] == "13.0"
        assert facts["gpu_limits"]["cuda"]["max_threads_per_block"] == 1024
        assert facts["host_runtime"] is True

    def test_facts_of_a_vanished_gpu_are_a_phone_fault(self) -> None:
        """A serial NVML no longer lists: PhoneFault naming it."""
        with pytest.raises(PhoneFault, match="gpu-gone"):
            controller().facts("gpu-gone")

    def test_tracker_key_is_prefix_and_uuid_head(self) -> None:
        """Keys are <key_prefix>-<8 hex digits>: letters, digits and '-' only."""
        assert controller(key_prefix="lab").tracker_key(SERIAL) == "lab-" + SERIAL[4:12]


class TestTarget:
    def test_cuda_target_has_the_gpus_arch_and_limits(self) -> None:
        """compile_target(cuda) is TVM's cuda kind for sm_90 with the host's LLVM as host."""
        ctrl = controller()
        spec = ctrl.compile_target(ctrl.facts(SERIAL), "cuda")
        assert spec.target["kind"] == "cuda"
        assert spec.target["arch"] == "sm_90"
        assert spec.target["max_threads_per_block"] == 1024
        assert spec.target["host"] == spec.host == {"kind": "llvm"}

    def test_cpu_target_is_the_hosts(self) -> None:
        """compile_target(cpu) is the host's own LLVM."""
        ctrl = controller()
        assert ctrl.compile_target(ctrl.facts(SERIAL), "cpu").target == {"kind": "llvm"}

    def test_other_devices_are_a_spec_error(self) -> None:
        """A GPU host has no OpenCL device: the user's SpecError."""
        ctrl = controller()
        with pytest.raises(SpecError, match="opencl"):
            ctrl.compile_target(ctrl.facts(SERIAL), "opencl")


def condition(ctrl: GpuController, reading: HealthSample) -> Condition:
    """The verdict on a GPU's reading under the controller's own settings (no app checks)."""
    return verdict(reading, Limits.of(ctrl.settings)).condition


class TestThermalGating:
    def test_idle_and_loaded_h100_are_cool(self) -> None:
        """Both recordings pass the gate: 33 °C idle, 47 °C under load, no heat reason."""
        for name in ("h100_idle.json", "h100_load.json"):
            raw = json.loads((FIXTURES / name).read_text())["readings"][-1]
            ctrl = GpuController(Settings(gpu=GpuSettings(enabled=True, temp_max_c=83.0)),
                                 RecordedReader([raw]))
            serial = parse(raw)[0].uuid.lower()
            assert condition(ctrl, ctrl.gating_reading(serial, NOW)) is Condition.GOOD

    def test_above_the_temperature_limit_is_hot(self) -> None:
        """A GPU above [gpu] temp_max_c breaks its gpu_temp_c limit, so the gate waits."""
        ctrl = controller(temp_max_c=30.0)
        reading = ctrl.gating_reading(SERIAL, NOW)
        assert reading.value("gpu_temp_c") == 33
        assert verdict(reading, Limits.of(ctrl.settings)).reasons == ("gpu_temp_c 33 > 30",)

    @pytest.mark.parametrize("bit", [0x8, 0x20, 0x40, 0x80])
    def test_heat_and_power_brake_reasons_are_hot(self, bit: int) -> None:
        """Slowdowns for heat or a power brake hold the GPU back whatever its temperature."""
        ctrl = controller(with_gpu(clock_event_reasons=bit))
        reading = ctrl.gating_reading(SERIAL, NOW)
        assert reading.value("heat_reasons") == 1
        assert condition(ctrl, reading) is Condition.COOLING

    def test_running_at_the_power_cap_is_not_heat(self) -> None:
        """sw_power_cap is a busy GPU's normal state: it does not hold the GPU back."""
        ctrl = controller(with_gpu(clock_event_reasons=0x4))
        reading = ctrl.gating_reading(SERIAL, NOW)
        assert reading.value("heat_reasons") == 0
        assert condition(ctrl, reading) is Condition.GOOD

    def test_vanished_gpu_reads_absent(self) -> None:
        """A GPU NVML no longer lists reads adb_state absent (the verdict: offline)."""
        assert controller().gating_reading("gpu-gone", NOW).adb_state == "absent"

    def test_health_says_no_server_before_start(self) -> None:
        """read_health reports the server not running before start_server."""
        sample = controller().read_health(SERIAL, NOW, registered=False)
        assert sample.app_running is False and sample.registered is False
        assert sample.at == NOW and sample.kind == "gpu"
        assert sample.value("gpu_temp_c") == 33 and sample.value("memory_used_mb") is not None


@pytest.fixture
def tracker() -> Iterator[TrackerProcess]:
    with TrackerProcess.start() as process:
        yield process


def serving(tracker: TrackerProcess, key: str) -> bool:
    return summary(tracker.host, tracker.port).queue(key).free > 0


def served_controller(tracker: TrackerProcess, log_dir: Path) -> GpuController:
    """A controller of the idle H100 whose servers register at ``tracker``."""
    settings = Settings(tracker=TrackerSettings(host=tracker.host, port=tracker.port),
                        gpu=GpuSettings(enabled=True))
    return GpuController(settings, RecordedReader([idle()]), log_dir=log_dir)


class TestServer:
    def test_argv_runs_farms_server_pinned_to_port_and_key(self) -> None:
        """The server command pins the port, the tracker and the tracker key."""
        argv = server_argv(tracker_host="127.0.0.1", tracker_port=9190, key="gpu-1", host="h",
                           port=5000, parent_pid=7)
        assert argv[1:3] == ["-m", "farm.gpu.server"]
        assert argv[argv.index("--tracker") + 1] == "127.0.0.1:9190"
        assert argv[argv.index("--key") + 1] == "gpu-1"
        assert argv[argv.index("--port-end") + 1] == "5001"

    def test_started_server_registers_and_stop_ends_its_group(
            self, tracker: TrackerProcess, tmp_path: Path) -> None:
        """start_server registers the GPU's key at the tracker; stop_server ends the whole group."""
        ctrl = served_controller(tracker, tmp_path)
        key = ctrl.tracker_key(SERIAL)
        try:
            ctrl.start_server(SERIAL)
            wait_until(lambda: serving(tracker, key), 120, f"{key} registered")
            assert ctrl.read_health(SERIAL, NOW).app_running is True
            first = ctrl.server_pid(SERIAL)
            assert first is not None
            # The GPU is pinned by UUID, whatever CUDA's index order.
            environ = psutil.Process(first).environ()
            assert environ["CUDA_VISIBLE_DEVICES"] == idle()["gpus"][0]["uuid"]
            assert "farm.gpu.server" in psutil.Process(first).cmdline()
            (restart,) = ctrl.recovery_steps(SERIAL)
            assert restart.name == "restart_app"
            restart.run()
            assert not group_alive(first)
            wait_until(lambda: serving(tracker, key), 120, f"{key} registered again")
            second = ctrl.server_pid(SERIAL)
        finally:
            ctrl.close()
        assert second is not None and second != first
        assert not group_alive(second)
        assert ctrl.read_health(SERIAL, NOW).app_running is False

    def test_sessions_are_served_in_the_servers_own_process(
            self, tracker: TrackerProcess, tmp_path: Path) -> None:
        """Each session runs in the server itself: no child per session, one after another.

        TVM's server serves a session in a child process, spawned under
        ``--no-fork``: a fresh Python and CUDA per session, seconds a tuning
        candidate on a GPU host (farm.gpu.server).
        """
        from tvm import rpc

        ctrl = served_controller(tracker, tmp_path)
        key = ctrl.tracker_key(SERIAL)
        try:
            ctrl.start_server(SERIAL)
            for n in range(2):
                wait_until(lambda: serving(tracker, key), 120, f"{key} registered ({n})")
                pid = ctrl.server_pid(SERIAL)
                assert pid is not None
                session = rpc.connect_tracker(tracker.host, tracker.port).request(
                    key, session_timeout=60)
                assert session.cpu(0).exist
                assert psutil.Process(pid).children(recursive=True) == []
                del session
        finally:
            ctrl.close()

    def test_a_session_past_its_timeout_ends_the_server(
            self, tracker: TrackerProcess) -> None:
        """A session served in process cannot be killed alone: past its timeout the server exits."""
        from tvm import rpc

        from farm.gpu.server import EXIT_SESSION_EXPIRED
        from farm.netaddr import free_port

        key = "gpu-timeout"
        server = subprocess.Popen(
            server_argv(tracker_host=tracker.host, tracker_port=tracker.port, key=key,
                        host="127.0.0.1", port=free_port("127.0.0.1"), parent_pid=os.getpid()),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_until(lambda: serving(tracker, key), 120, f"{key} registered")
            session = rpc.connect_tracker(tracker.host, tracker.port).request(
                key, session_timeout=2)
            assert session.cpu(0).exist
            assert server.wait(timeout=30) == EXIT_SESSION_EXPIRED
        finally:
            signal_group(server.pid)
            server.wait()

    def test_server_ends_when_farmd_is_killed(self, tracker: TrackerProcess,
                                              tmp_path: Path) -> None:
        """kill -9 of the process that started a GPU server ends the server's group too."""
        script = textwrap.dedent(f"""
            import json, sys, time
            from farm.config import GpuSettings, Settings, TrackerSettings
            from farm.controllers.gpu import GpuController
            from farm.gpu.nvml import RecordedReader
            raw = json.loads(open({str(FIXTURES / "h100_idle.json")!r}).read())["readings"]
            settings = Settings(tracker=TrackerSettings(host={tracker.host!r},
                                port={tracker.port}), gpu=GpuSettings(enabled=True))
            ctrl = GpuController(settings, RecordedReader(raw))
            ctrl.start_server({SERIAL!r})
            print("PID", ctrl.server_pid({SERIAL!r}), flush=True)
            time.sleep(600)
        """)
        farmd = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                 start_new_session=True, env={**os.environ})
        try:
            assert farmd.stdout is not None
            line = b""
            while not line.startswith(b"PID "):  # structlog writes to stdout too
                line = farmd.stdout.readline()
                assert line, "the farmd stand-in exited before starting the server"
            server = int(line.split()[1])
            key = GpuController(Settings(), RecordedReader([idle()])).tracker_key(SERIAL)
            wait_until(lambda: serving(tracker, key), 120, f"{key} registered")
            os.kill(farmd.pid, signal.SIGKILL)
            farmd.wait()
            assert wait_until(lambda: not group_alive(server), 30)
        finally:
            signal_group(farmd.pid)
            farmd.wait()
