"""System properties: a real phone's ``getprop`` dump per model, made this phone's.

A profile that names a capture (``PhoneSpec.getprop_fixture``, files in
``fixtures/``) reports that phone's hundreds of properties as captured, with
only what must differ replaced (:func:`build_props`): the serial, the ABI (a
virtual phone runs host code, see :mod:`farm.virtual.android.spec`), the build
type when the profile is a user build of a userdebug capture, boot state, and
``ro.hardware.vulkan`` dropped (the phone has no GPU driver).
Keys the capture lacks (the Pixel 8 capture keeps 208 of them) come from the
profile. A profile without a capture reports only the properties its spec
defines plus the few every Android 13+ phone has.

``getprop`` lists ``[key]: [value]`` lines sorted by raw byte order, so
uppercase keys come first (fixture ``getprop__mtk_tb8168_android13.txt``
starts with ``[Build.BRAND]``); empty values print as ``[]``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from farm.device.getprop import parse_getprop
from farm.virtual.android.spec import PhoneSpec

#: Set to "1" by farm's virtual phones (never by a real phone): the phone runs
#: host code. Read by :func:`farm.device.facts.facts_from` as ``host_runtime``.
HOST_RUNTIME_PROP = "ro.farm.host_runtime"

# Prefixes the shell user may set (AOSP system/sepolicy property_contexts give
# the shell domain write access to debug.*, log.tag.*, persist.log.tag.* and a
# few others; ro.* can be set once, by init only).
SHELL_SETTABLE = ("debug.", "log.tag.", "persist.log.tag.", "persist.debug.", "service.adb.")

# What an x86_64 Android image reports (the emulator's system images, which run
# arm64 apps through native bridge translation).
_X86_64_ABILIST = "x86_64,arm64-v8a"


@cache
def fixture_props(name: str) -> dict[str, str]:
    """The properties of one ``getprop`` capture in ``fixtures/`` (parsed once)."""
    text = resources.files("farm.virtual.android").joinpath(f"fixtures/{name}").read_text()
    return parse_getprop(text)


def abi_props(spec: PhoneSpec) -> dict[str, str]:
    """``ro.product.cpu.abi*`` for the spec's ABI."""
    abilist = _X86_64_ABILIST if spec.cpu_abi == "x86_64" else spec.cpu_abi
    return {
        "ro.product.cpu.abi": spec.cpu_abi,
        "ro.product.cpu.abilist": abilist,
        "ro.product.cpu.abilist32": "",
        "ro.product.cpu.abilist64": abilist,
    }


def identity_props(spec: PhoneSpec) -> dict[str, str]:
    """The properties the spec defines: model, build, SoC, display."""
    tags = "release-keys" if spec.build_type == "user" else "dev-keys"
    return {
        "ro.board.platform": spec.board_platform,
        "ro.boot.hardware": spec.hardware,
        "ro.build.description": (
            f"{spec.product}-{spec.build_type} {spec.release} {spec.build_id} "
            f"{spec.build_incremental} {tags}"
        ),
        "ro.build.display.id": spec.build_id,
        "ro.build.fingerprint": spec.fingerprint,
        "ro.build.id": spec.build_id,
        "ro.build.tags": tags,
        "ro.build.type": spec.build_type,
        "ro.build.version.incremental": spec.build_incremental,
        "ro.build.version.release": spec.release,
        "ro.build.version.release_or_codename": spec.release,
        "ro.build.version.sdk": str(spec.sdk),
        "ro.debuggable": "1" if spec.debuggable else "0",
        "ro.hardware": spec.hardware,
        "ro.hardware.egl": {"mali": "mali", "adreno": "adreno", "none": "swiftshader"}[spec.gpu],
        "ro.product.board": spec.device,
        "ro.product.brand": spec.brand,
        "ro.product.device": spec.device,
        "ro.product.manufacturer": spec.manufacturer,
        "ro.product.model": spec.model,
        "ro.product.name": spec.product,
        "ro.sf.lcd_density": str(spec.density_dpi),
        "ro.soc.manufacturer": spec.soc_manufacturer,
        "ro.soc.model": spec.soc_model,
        **abi_props(spec),
    }


def _common_props(spec: PhoneSpec) -> dict[str, str]:
    """Properties every Android 13+ phone has, for a profile without a capture."""
    return {
        "dalvik.vm.heapgrowthlimit": "256m",
        "dalvik.vm.heapsize": "512m",
        "persist.sys.timezone": "Etc/UTC",
        "persist.sys.usb.config": "adb",
        "ro.adb.secure": "1",
        "ro.boot.verifiedbootstate": "green" if spec.build_type == "user" else "orange",
        "ro.bootmode": "normal",
        "ro.build.version.codename": "REL",
        "ro.product.first_api_level": str(spec.sdk),
        "ro.product.locale": "en-US",
        "ro.secure": "1",
        "ro.vendor.build.fingerprint": spec.fingerprint,
        "sys.usb.config": "adb",
        "sys.usb.state": "adb",
    }


def _booted_props(serialno: str) -> dict[str, str]:
    """This phone's serial and the state of a booted phone whose adbd runs as shell."""
    return {
        "dev.bootcomplete": "1",
        "init.svc.adbd": "running",
        "ro.boot.serialno": serialno,
        "ro.serialno": serialno,
        "service.adb.root": "0",
        "sys.boot_completed": "1",
    }


def build_props(spec: PhoneSpec, serialno: str) -> dict[str, str]:
    """Every property the phone reports.

    Args:
        spec: the phone.
        serialno: ``ro.serialno`` (distinct per phone).
    """
    if not spec.getprop_fixture:
        props = {**_common_props(spec), **identity_props(spec)}
    else:
        captured = fixture_props(spec.getprop_fixture)
        old_serial = captured.get("ro.serialno")
        props = {k: serialno if old_serial and v == old_serial else v for k, v in captured.items()}
        for key, value in identity_props(spec).items():
            props.setdefault(key, value)
        props.update(abi_props(spec))
        if captured.get("ro.build.type") != spec.build_type:
            build = identity_props(spec)
            for key in ("ro.build.type", "ro.build.tags", "ro.build.fingerprint",
                        "ro.build.description", "ro.build.display.id", "ro.debuggable"):
                props[key] = build[key]
    # No GPU driver is installed (no libOpenCL.so, no vulkan.<name>.so), so the
    # phone must not announce a Vulkan HAL: farm would place Vulkan jobs on it.
    props.pop("ro.hardware.vulkan", None)
    props.update(_booted_props(serialno))
    # The phone's TVM RPC process is this host's own Python: modules must be
    # built for the host (glibc), not for Android (farm.jobs.targets).
    props[HOST_RUNTIME_PROP] = "1"
    props.update(dict(spec.extra_props))
    return props


def render_getprop(props: dict[str, str]) -> str:
    """All properties as ``getprop`` prints them, sorted by byte order."""
    keys = sorted(props, key=lambda k: k.encode())
    return "".join(f"[{k}]: [{props[k]}]\n" for k in keys)
