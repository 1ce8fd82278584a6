"""Build a stand-in for the TVM RPC app: a real, unsigned APK made with aapt.

It declares what the stock app's manifest declares (apache/tvm
``apps/android_rpc/app/src/main/AndroidManifest.xml``): package
``org.apache.tvm.tvmrpc``, ``.MainActivity`` as the exported launcher,
``.RPCActivity`` (not exported, in process ``:RPCProcess``) and the INTERNET
permission. Package managers and ``aapt dump badging`` read it as they read the
real app; the virtual phones run a real TVM RPC server when it is launched.

It carries an empty but well-formed ``classes.dex`` because a package that
declares code (``hasCode`` defaults to true) and has no dex is refused by
Android's package parser ("code is missing", INSTALL_FAILED_INVALID_APK). Native
libraries, if asked for, are placeholders named like the stock app's
``libtvm4j_runtime_packed.so``: enough for ABI checks, not loadable.

No APK binary is committed: tests and the demo build it on the fly.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from apk_tools.tools import find_framework_res, run_tool
from farm.errors import ApkError

PACKAGE = "org.apache.tvm.tvmrpc"
MAIN_ACTIVITY = f"{PACKAGE}.MainActivity"
RPC_ACTIVITY = f"{PACKAGE}.RPCActivity"
# build.gradle of apps/android_rpc: minSdkVersion 24; targetSdkVersion 29 keeps
# the pre-Android-12 exported defaults that the stock manifest relies on.
DEFAULT_MIN_SDK = 24
DEFAULT_TARGET_SDK = 29

_MANIFEST = """<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android"
    package="org.apache.tvm.tvmrpc">
    <uses-permission android:name="android.permission.INTERNET" />
    <application android:label="@string/app_name">
        <activity android:name=".MainActivity" android:label="@string/app_name"
            android:screenOrientation="portrait" android:exported="true">
            <intent-filter>
                <action android:name="android.intent.action.MAIN" />
                <category android:name="android.intent.category.LAUNCHER" />
            </intent-filter>
        </activity>
        <activity android:name=".RPCActivity" android:label="@string/rpc_name"
            android:process=":RPCProcess" android:screenOrientation="portrait"
            android:exported="false" />
    </application>
</manifest>
"""

_STRINGS = """<?xml version="1.0" encoding="utf-8"?>
<resources>
    <string name="app_name">TVM RPC</string>
    <string name="rpc_name">TVM RPC Service</string>
</resources>
"""


def empty_dex() -> bytes:
    """A valid DEX file (format 035) that defines no classes.

    Layout per AOSP ``dalvik/docs/dex-format.html``: the 0x70-byte header, then
    a map list with two items (the header and the map itself). The checksum is
    Adler-32 of bytes 12.., the signature SHA-1 of bytes 32...

    Returns:
        140 bytes.
    """
    header_size = 0x70
    map_list = struct.pack("<I", 2) + struct.pack("<HHII", 0x0000, 0, 1, 0)
    map_list += struct.pack("<HHII", 0x1000, 0, 1, header_size)
    file_size = header_size + len(map_list)
    after_signature = struct.pack(
        "<IIIIII" + "II" * 6 + "II",
        file_size,
        header_size,
        0x12345678,  # endian_tag
        0,  # link_size
        0,  # link_off
        header_size,  # map_off
        *(0,) * 12,  # string/type/proto/field/method/class ids: none
        len(map_list),  # data_size
        header_size,  # data_off
    )
    body = after_signature + map_list
    signature = hashlib.sha1(body, usedforsecurity=False).digest()  # the format mandates SHA-1
    checksum = zlib.adler32(signature + body)
    return b"dex\n035\x00" + struct.pack("<I", checksum) + signature + body


def build_standin_apk(
    out_dir: Path,
    *,
    version_code: int = 1,
    version_name: str = "1.0",
    debuggable: bool = True,
    min_sdk: int = DEFAULT_MIN_SDK,
    target_sdk: int = DEFAULT_TARGET_SDK,
    native_abis: Sequence[str] = (),
) -> Path:
    """Build the unsigned stand-in TVM RPC APK with aapt.

    Args:
        out_dir: folder to write into (created if missing).
        version_code: ``android:versionCode``, >= 1.
        version_name: ``android:versionName``.
        debuggable: set ``application android:debuggable`` (aapt ``--debug-mode``).
        min_sdk: ``minSdkVersion``.
        target_sdk: ``targetSdkVersion``.
        native_abis: ABIs to add a placeholder ``lib/<abi>/libtvm4j_runtime_packed.so`` for.

    Returns:
        Path of the unsigned APK, ``tvmrpc-standin-v<code>[-debug].apk`` in
        ``out_dir``; it appears atomically (built in a temp folder, then renamed).

    Raises:
        ToolMissing: aapt or the framework resources are not installed.
        ApkError: aapt failed, or an argument is out of range.
    """
    if version_code < 1:
        raise ApkError("standin", f"version_code must be >= 1, got {version_code}")
    for abi in native_abis:
        if not abi or "/" in abi or abi.startswith("."):
            raise ApkError("standin", f"invalid ABI name {abi!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    framework = find_framework_res()
    suffix = "-debug" if debuggable else ""
    target = out_dir / f"tvmrpc-standin-v{version_code}{suffix}.apk"
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".standin-") as work_name:
        work = Path(work_name)
        (work / "AndroidManifest.xml").write_text(_MANIFEST, encoding="utf-8")
        (work / "res" / "values").mkdir(parents=True)
        (work / "res" / "values" / "strings.xml").write_text(_STRINGS, encoding="utf-8")
        # Files in this folder go into the APK as they are (aapt's trailing DIRS).
        raw = work / "raw"
        raw.mkdir()
        (raw / "classes.dex").write_bytes(empty_dex())
        for abi in native_abis:
            (raw / "lib" / abi).mkdir(parents=True, exist_ok=True)
            (raw / "lib" / abi / "libtvm4j_runtime_packed.so").write_bytes(
                b"\x7fELF placeholder: not a loadable library\n"
            )
        unsigned = work / "unsigned.apk"
        args = [
            "package", "-f",
            "-M", str(work / "AndroidManifest.xml"),
            "-S", str(work / "res"),
            "-I", str(framework),
            "--version-code", str(version_code),
            "--version-name", version_name,
            "--min-sdk-version", str(min_sdk),
            "--target-sdk-version", str(target_sdk),
            "-F", str(unsigned),
        ]  # fmt: skip
        if debuggable:
            args.insert(2, "--debug-mode")
        result = run_tool("aapt", [*args, str(raw)])
        if result.returncode != 0 or not unsigned.is_file():
            raise ApkError(
                str(target), f"aapt failed: {result.stderr.strip() or result.stdout.strip()}"
            )
        os.replace(unsigned, target)
    return target
