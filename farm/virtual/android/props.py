"""System properties: built from the spec, rendered as ``getprop`` prints them.

``getprop`` lists ``[key]: [value]`` lines sorted by raw byte order, so
uppercase keys come first (fixture ``getprop__mtk_tb8168_android13.txt``
starts with ``[Build.BRAND]``); empty values print as ``[]``.
"""

from __future__ import annotations

from farm.virtual.android.spec import PhoneSpec

# Prefixes the shell user may set (AOSP system/sepolicy property_contexts give
# the shell domain write access to debug.*, log.tag.*, persist.log.tag.* and a
# few others; ro.* can be set once, by init only).
SHELL_SETTABLE = ("debug.", "log.tag.", "persist.log.tag.", "persist.debug.", "service.adb.")


def build_props(spec: PhoneSpec, serialno: str) -> dict[str, str]:
    """Every property the phone reports.

    Args:
        spec: the phone.
        serialno: ``ro.serialno`` (distinct per phone).
    """
    abilist = "x86_64,arm64-v8a" if spec.cpu_abi == "x86_64" else spec.cpu_abi
    props = {
        "Build.BRAND": spec.brand.upper(),
        "dalvik.vm.heapgrowthlimit": "256m",
        "dalvik.vm.heapsize": "512m",
        "dev.bootcomplete": "1",
        "init.svc.adbd": "running",
        "persist.sys.timezone": "Etc/UTC",
        "persist.sys.usb.config": "adb",
        "ro.adb.secure": "1",
        "ro.board.platform": spec.board_platform,
        "ro.boot.hardware": spec.hardware,
        "ro.boot.serialno": serialno,
        "ro.boot.verifiedbootstate": "green" if spec.build_type == "user" else "orange",
        "ro.bootmode": "normal",
        "ro.build.characteristics": "tablet" if "tb" in spec.device else "nosdcard",
        "ro.build.description": (
            f"{spec.product}-{spec.build_type} {spec.release} {spec.build_id} "
            f"{spec.build_incremental} {'release-keys' if spec.build_type == 'user' else 'dev-keys'}"
        ),
        "ro.build.display.id": spec.build_id,
        "ro.build.fingerprint": spec.fingerprint,
        "ro.build.id": spec.build_id,
        "ro.build.tags": "release-keys" if spec.build_type == "user" else "dev-keys",
        "ro.build.type": spec.build_type,
        "ro.build.user": "android-build",
        "ro.build.version.codename": "REL",
        "ro.build.version.incremental": spec.build_incremental,
        "ro.build.version.release": spec.release,
        "ro.build.version.release_or_codename": spec.release,
        "ro.build.version.sdk": str(spec.sdk),
        "ro.build.version.security_patch": "2024-01-05",
        "ro.debuggable": "1" if spec.debuggable else "0",
        "ro.hardware": spec.hardware,
        "ro.hardware.egl": {"mali": "mali", "adreno": "adreno", "none": "swiftshader"}[spec.gpu],
        "ro.kernel.version": "5.10",
        "ro.product.board": spec.device,
        "ro.product.brand": spec.brand,
        "ro.product.cpu.abi": spec.cpu_abi,
        "ro.product.cpu.abilist": abilist,
        "ro.product.cpu.abilist32": "",
        "ro.product.cpu.abilist64": abilist,
        "ro.product.device": spec.device,
        "ro.product.first_api_level": str(spec.sdk),
        "ro.product.locale": "en-US",
        "ro.product.manufacturer": spec.manufacturer,
        "ro.product.model": spec.model,
        "ro.product.name": spec.product,
        "ro.secure": "1",
        "ro.serialno": serialno,
        "ro.sf.lcd_density": str(spec.density_dpi),
        "ro.soc.manufacturer": spec.soc_manufacturer,
        "ro.soc.model": spec.soc_model,
        "ro.vendor.build.fingerprint": spec.fingerprint,
        "service.adb.root": "0",
        "sys.boot_completed": "1",
        "sys.usb.config": "adb",
        "sys.usb.state": "adb",
    }
    props.update(dict(spec.extra_props))
    return props


def render_getprop(props: dict[str, str]) -> str:
    """All properties as ``getprop`` prints them, sorted by byte order."""
    keys = sorted(props, key=lambda k: k.encode())
    return "".join(f"[{k}]: [{props[k]}]\n" for k in keys)
