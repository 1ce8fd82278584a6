"""The Android controller's parts that need no phone: targets, keys, construction, facts."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from farm.config import Settings
from farm.controllers import ControllerContext, DeviceController, controller_for
from farm.controllers.android import AndroidController, NdkFcompile
from farm.controllers.options import FleetOptions
from farm.device.facts import facts_from
from farm.errors import ConfigError, SpecError
from farm.jobs.targets import needs_ndk
from farm.provision.facts import facts_record
from farm.tvm.keys import phone_key
from farm.virtual.android.props import HOST_RUNTIME_PROP, build_props
from farm.virtual.android.spec import profiles

PROPS = {
    "ro.build.version.sdk": "34", "ro.product.cpu.abi": "x86_64",
    "ro.product.model": "sdk_gphone64_x86_64", "ro.product.manufacturer": "Google",
    "ro.build.version.release": "14", "ro.build.fingerprint": "google/sdk/emu:14/X/1:user/k",
}


@pytest.fixture
def controller(tmp_path: Path) -> AndroidController:
    settings = Settings.model_validate({"data_dir": str(tmp_path)})
    return AndroidController(FleetOptions.from_settings(settings))


class TestCompileTarget:
    """``compile_target`` maps the stored facts as the jobs do."""

    def test_x86_64_phone_is_android(self, controller: AndroidController) -> None:
        """A real x86_64 Android device (an emulator) gets the Android triple and the NDK."""
        spec = controller.compile_target({"abi": "x86_64", "num_cores": 4})
        assert spec.target == {"kind": "llvm", "mtriple": "x86_64-linux-android",
                               "num-cores": 4}
        assert spec.host is spec.target and needs_ndk(spec.target)

    def test_host_runtime_phone_is_the_host(self, controller: AndroidController) -> None:
        """A phone announcing host code (a virtual phone) gets the host's target."""
        spec = controller.compile_target({"abi": "x86_64", "host_runtime": True})
        assert "mtriple" not in spec.target and not needs_ndk(spec.target)

    def test_fcompile_is_picklable(self, controller: AndroidController) -> None:
        """MetaSchedule's builder sends the linker to worker processes: it must pickle."""
        spec = controller.compile_target({"abi": "arm64-v8a"})
        assert isinstance(spec.fcompile, NdkFcompile)
        assert pickle.loads(pickle.dumps(spec.fcompile)) == spec.fcompile  # noqa: S301 - own bytes

    def test_opencl_host(self, controller: AndroidController) -> None:
        """A GPU target carries the CPU target as its host."""
        spec = controller.compile_target({"abi": "arm64-v8a", "has_opencl": True}, "opencl")
        assert spec.target["kind"] == "opencl"
        assert spec.host["mtriple"] == "aarch64-linux-android"

    def test_cuda_is_not_a_phone_device(self, controller: AndroidController) -> None:
        """A device a phone has no API for is a SpecError on params.device."""
        with pytest.raises(SpecError) as info:
            controller.compile_target({"abi": "arm64-v8a"}, "cuda")
        assert info.value.field == "params.device"


class TestController:
    """Construction, keys and the protocol."""

    def test_meets_the_protocol(self, controller: AndroidController) -> None:
        """The Android controller is a DeviceController of kind android."""
        assert isinstance(controller, DeviceController) and controller.kind == "android"

    def test_tracker_key_is_the_phone_key(self, controller: AndroidController) -> None:
        """The key is the one farm always gave phones."""
        key = controller.tracker_key("127.0.0.1:5555")
        assert key == phone_key("android", "127.0.0.1:5555") == "android-127-0-0-1-5555"

    def test_registry_builds_it_without_touching_adb(self, tmp_path: Path) -> None:
        """Built from settings, it makes no adb client until one is needed."""
        settings = Settings.model_validate({"data_dir": str(tmp_path)})
        built = controller_for("android", ControllerContext(settings))
        assert isinstance(built, AndroidController) and built._adb is None

    def test_needs_settings(self) -> None:
        """Without settings the factory says so (ConfigError), no traceback from within."""
        with pytest.raises(ConfigError):
            controller_for("android", ControllerContext())

    def test_no_adb_is_a_config_error(self, controller: AndroidController) -> None:
        """A controller built for targets only refuses adb work with a ConfigError."""
        with pytest.raises(ConfigError):
            controller.discover()


class TestHostRuntimeFact:
    """Only a phone that says it runs host code is treated as the host."""

    def test_virtual_phones_announce_it(self) -> None:
        """Every virtual phone profile sets ``ro.farm.host_runtime=1``."""
        for spec in profiles(3):
            assert build_props(spec, "SERIAL1")[HOST_RUNTIME_PROP] == "1"

    def test_fact_follows_the_property(self) -> None:
        """The fact is true with the property, false without it (a real emulator)."""
        real = facts_from(PROPS, [1_000_000] * 4, {"MemTotal": 1}, False, serial="emu")
        virtual = facts_from({**PROPS, HOST_RUNTIME_PROP: "1"}, [1_000_000] * 4,
                             {"MemTotal": 1}, False, serial="v")
        assert not real.host_runtime and virtual.host_runtime
        assert facts_record(virtual)["host_runtime"] is True
