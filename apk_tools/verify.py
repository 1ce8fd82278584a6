"""Verify an APK's signatures with apksigner and read who signed it.

apksigner is the reference verifier (AOSP ``tools/apksig``): it checks each
scheme the way the platform does for the APK's minSdk..maxSdk range, which a
Python parser would only approximate. We parse ``apksigner verify
--print-certs -v`` output, lines like::

    Verified using v2 scheme (APK Signature Scheme v2): true
    Signer #1 certificate SHA-256 digest: a216301c...

Note that v1 shows ``false`` for an APK whose minSdk is 24 or more even when a
JAR signature is present: the platform never checks v1 there, so neither does
apksigner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from apk_tools.archive import apk_entries
from apk_tools.tools import run_tool
from farm.errors import ApkError

_SCHEME = re.compile(r"^Verified using v(\d) scheme .*: (true|false)$", re.MULTILINE)
_SIGNER_SHA256 = re.compile(
    r"^Signer (?:#\d+|\(minSdkVersion.*?\)) certificate SHA-256 digest: ([0-9a-f]{64})$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Verification:
    """The result of a successful verification.

    Attributes:
        schemes: signature schemes that verified (1..4), ascending.
        signers: SHA-256 of each signer certificate (lowercase hex), in
            apksigner's order.
        warnings: apksigner's ``WARNING:`` lines.
    """

    schemes: tuple[int, ...]
    signers: tuple[str, ...]
    warnings: tuple[str, ...]


def parse_verify_output(stdout: str) -> Verification:
    """Read schemes and signer digests from ``apksigner verify --print-certs -v``.

    Args:
        stdout: apksigner's standard output of a successful verification.

    Returns:
        The parsed :class:`Verification`.
    """
    schemes = tuple(sorted(int(v) for v, ok in _SCHEME.findall(stdout) if ok == "true"))
    signers = tuple(dict.fromkeys(_SIGNER_SHA256.findall(stdout)))
    warnings = tuple(line for line in stdout.splitlines() if line.startswith("WARNING:"))
    return Verification(schemes=schemes, signers=signers, warnings=warnings)


def verify(apk: Path) -> Verification:
    """Verify ``apk`` with apksigner.

    Args:
        apk: the APK file.

    Returns:
        Schemes verified and signer digests.

    Raises:
        ApkError: the path is missing, a folder or not a zip
            (:func:`apk_tools.archive.apk_entries`), or the APK does not
            verify (unsigned, tampered): the reason is apksigner's first
            ``ERROR:`` line or exception message.
        ToolMissing: apksigner is not installed.
    """
    apk = Path(apk)
    apk_entries(apk)
    result = run_tool("apksigner", ["verify", "--print-certs", "-v", str(apk)])
    if result.returncode != 0:
        raise ApkError(str(apk), f"does not verify: {_first_error(result.stdout + result.stderr)}")
    return parse_verify_output(result.stdout)


def _first_error(output: str) -> str:
    """The most telling line of apksigner's failure output."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("ERROR:"):
            reason = line.removeprefix("ERROR:").strip()
            if reason == "Missing META-INF/MANIFEST.MF":
                # apksigner falls back to v1 when no v2/v3 block exists.
                return "the APK is not signed (no v1, v2 or v3 signature)"
            return reason
    for line in lines:
        if line.startswith(("Exception", "Caused by:")) or "Exception:" in line:
            return line.split(": ", 1)[-1]
    return lines[0] if lines else "apksigner gave no reason"
