"""zipalign: 4-byte alignment of stored entries, page alignment of native libraries.

``-p`` aligns uncompressed ``.so`` files to 4 KiB pages so the platform can
``mmap`` them straight from the APK (``extractNativeLibs=false``); see the
zipalign page of the Android SDK build-tools docs. Align *before* signing with
v2/v3: zipalign rewrites offsets, which the APK Signing Block covers.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from apk_tools.archive import apk_entries
from apk_tools.tools import run_tool
from farm.errors import ApkError

ALIGNMENT_BYTES = 4


def align(apk_in: Path, apk_out: Path) -> Path:
    """Write a zipaligned copy of ``apk_in`` to ``apk_out``, atomically.

    Args:
        apk_in: the APK to align (unchanged).
        apk_out: the aligned APK; replaced if it exists, never half-written.

    Returns:
        ``apk_out``.

    Raises:
        ApkError: the input is missing, a folder or not a zip
            (:func:`apk_tools.archive.apk_entries`), or zipalign refused it.
        ToolMissing: zipalign is not installed.
    """
    apk_in, apk_out = Path(apk_in), Path(apk_out)
    apk_entries(apk_in)
    apk_out.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=apk_out.parent, prefix=".align-", suffix=".apk")
    os.close(fd)
    temp = Path(temp_name)
    try:
        result = run_tool("zipalign", ["-f", "-p", str(ALIGNMENT_BYTES), str(apk_in), str(temp)])
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise ApkError(str(apk_in), f"zipalign failed: {detail[0] if detail else 'no output'}")
        os.chmod(temp, 0o644)  # mkstemp makes 0600; an APK is not secret
        os.replace(temp, apk_out)
    finally:
        temp.unlink(missing_ok=True)
    return apk_out


def is_aligned(apk: Path) -> bool:
    """Whether ``apk`` is already aligned as :func:`align` would align it.

    Raises:
        ToolMissing: zipalign is not installed.
    """
    result = run_tool("zipalign", ["-c", "-p", str(ALIGNMENT_BYTES), str(apk)])
    return result.returncode == 0
