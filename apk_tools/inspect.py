"""Read what farm needs to know about an APK without installing it.

The parser is pyaxmlparser (a maintained, small fork of androguard's ``APK``
class, already a farm dependency for the virtual package manager). Checked on
this machine against apps built with aapt and signed with apksigner: it decodes
the binary ``AndroidManifest.xml`` (resolving attributes by resource id, so
obfuscated attribute names still read right) and extracts the signer
certificates of all three schemes: v1 from the JAR PKCS#7 block, v2 and v3 from
the APK Signing Block (AOSP ``apksig`` ``V2SchemeConstants``/``V3SchemeConstants``
block ids 0x7109871a and 0xf05368c0). It does not *verify* signatures; that is
:mod:`apk_tools.verify`'s job, through apksigner itself.

``signers`` lists the certificates of the strongest scheme present (v3, else
v2, else v1), as SHA-256 of the DER certificate: the same digest that
``apksigner verify --print-certs`` prints as "certificate SHA-256 digest".
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from pyaxmlparser import APK

from apk_tools.archive import apk_entries
from farm.errors import ApkError

_ANDROID_NS = "{http://schemas.android.com/apk/res/android}"
_MAIN = "android.intent.action.MAIN"
_LAUNCHER = "android.intent.category.LAUNCHER"


@dataclass(frozen=True)
class ActivityInfo:
    """One ``<activity>`` of the manifest.

    Attributes:
        name: fully qualified class name, e.g. ``org.apache.tvm.tvmrpc.MainActivity``.
        exported: whether other apps (and ``am start`` from the shell) may start it.
    """

    name: str
    exported: bool


@dataclass(frozen=True)
class ApkInfo:
    """What an APK declares about itself.

    Attributes:
        package: the application id, e.g. ``org.apache.tvm.tvmrpc``.
        version_code: ``android:versionCode``.
        version_name: ``android:versionName`` (``""`` when absent).
        min_sdk: ``uses-sdk minSdkVersion`` (1 when absent, as Android assumes).
        target_sdk: ``uses-sdk targetSdkVersion`` (``min_sdk`` when absent).
        native_abis: ABIs with native libraries under ``lib/<abi>/``, sorted.
        launchable_activity: the MAIN/LAUNCHER activity, fully qualified, or None.
        activities: every declared activity, in manifest order.
        debuggable: ``application android:debuggable``.
        permissions: ``uses-permission`` names, in manifest order.
        signers: SHA-256 (lowercase hex) of each signer certificate; empty if unsigned.
        schemes: signature schemes present (1, 2, 3), verified or not.
    """

    package: str
    version_code: int
    version_name: str
    min_sdk: int
    target_sdk: int
    native_abis: tuple[str, ...]
    launchable_activity: str | None
    activities: tuple[ActivityInfo, ...]
    debuggable: bool
    permissions: tuple[str, ...]
    signers: tuple[str, ...]
    schemes: tuple[int, ...]


def _qualify(package: str, name: str) -> str:
    """Resolve a manifest class name as PackageParser does (``.X`` and ``X`` are relative)."""
    if name.startswith("."):
        return package + name
    if "." not in name:
        return f"{package}.{name}"
    return name


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def _int_or(value: object, default: int) -> int:
    try:
        return int(str(value), 0)
    except (TypeError, ValueError):
        return default


def _activities(apk: APK, package: str) -> tuple[tuple[ActivityInfo, ...], str | None]:
    """All activities, and the first one with a MAIN action and LAUNCHER category."""
    manifest = apk.get_android_manifest_xml()
    infos: list[ActivityInfo] = []
    launchable: str | None = None
    for element in manifest.iter("activity", "activity-alias"):
        name = _qualify(package, element.get(f"{_ANDROID_NS}name", ""))
        filters = element.findall("intent-filter")
        exported_attr = element.get(f"{_ANDROID_NS}exported")
        # Before Android 12 an activity with an intent filter is exported by
        # default (AOSP ParsedActivityUtils); target 31+ must say so explicitly.
        exported = _is_true(exported_attr) if exported_attr is not None else bool(filters)
        for intent_filter in filters:
            actions = {a.get(f"{_ANDROID_NS}name") for a in intent_filter.iter("action")}
            categories = {c.get(f"{_ANDROID_NS}name") for c in intent_filter.iter("category")}
            if launchable is None and _MAIN in actions and _LAUNCHER in categories:
                launchable = name
        if element.tag == "activity":
            infos.append(ActivityInfo(name=name, exported=exported))
    return tuple(infos), launchable


def _signers(apk: APK) -> tuple[tuple[str, ...], tuple[int, ...]]:
    schemes = tuple(
        scheme
        for scheme, present in (
            (1, apk.is_signed_v1()),
            (2, apk.is_signed_v2()),
            (3, apk.is_signed_v3()),
        )
        if present
    )
    if 3 in schemes:
        ders = apk.get_certificates_der_v3()
    elif 2 in schemes:
        ders = apk.get_certificates_der_v2()
    elif 1 in schemes:
        ders = [cert.dump() for cert in apk.get_certificates_v1()]
    else:
        ders = []
    digests = tuple(dict.fromkeys(hashlib.sha256(der).hexdigest() for der in ders))
    return digests, schemes


def inspect_apk(path: Path) -> ApkInfo:
    """Parse an APK's manifest, native libraries and signer certificates.

    Args:
        path: the ``.apk`` file.

    Returns:
        The APK's :class:`ApkInfo`.

    Raises:
        ApkError: the path is missing or a folder, the file is not a zip or
            corrupt (:func:`apk_tools.archive.apk_entries`), or a zip that is
            not an APK (no binary ``AndroidManifest.xml`` with a package name).
    """
    path = Path(path)
    names = apk_entries(path, check_crc=True)
    if "AndroidManifest.xml" not in names:
        raise ApkError(str(path), "not an APK: the zip has no AndroidManifest.xml")

    # pyaxmlparser logs (not raises) on a manifest it cannot decode; we report
    # that through ApkError below, so its own log lines would only repeat it.
    parser_log = logging.getLogger("pyaxmlparser")
    previous_level = parser_log.level
    parser_log.setLevel(logging.CRITICAL)
    try:
        apk = APK(str(path))
        if not apk.is_valid_APK() or not apk.get_package():
            raise ApkError(str(path), "not an APK: AndroidManifest.xml is not a binary manifest")
        package = apk.get_package()
        activities, launchable = _activities(apk, package)
        signers, schemes = _signers(apk)
        min_sdk = _int_or(apk.get_min_sdk_version(), 1)
        info = ApkInfo(
            package=package,
            version_code=_int_or(apk.version_code, 0),
            version_name=apk.version_name or "",
            min_sdk=min_sdk,
            target_sdk=_int_or(apk.get_target_sdk_version(), min_sdk),
            native_abis=tuple(
                sorted(
                    {
                        n.split("/")[1]
                        for n in names
                        if n.startswith("lib/") and n.endswith(".so") and n.count("/") >= 2
                    }
                )
            ),
            launchable_activity=launchable,
            activities=activities,
            debuggable=_is_true(apk.get_attribute_value("application", "debuggable")),
            permissions=tuple(dict.fromkeys(apk.get_permissions())),
            signers=signers,
            schemes=schemes,
        )
    except ApkError:
        raise
    except Exception as exc:  # pyaxmlparser raises many unrelated types on bad input
        raise ApkError(str(path), f"cannot parse the APK ({type(exc).__name__}: {exc})") from exc
    finally:
        parser_log.setLevel(previous_level)
    return info
