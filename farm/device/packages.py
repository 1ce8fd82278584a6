"""Parse package manager output.

Covers ``pm install``, ``pm path``, ``pm list packages`` and
``dumpsys package <name>``.

``pm`` prints ``Success`` or ``Failure [CODE: message]`` on stdout (AOSP
``services/core/java/com/android/server/pm/PackageManagerShellCommand.java``);
the host ``adb install`` wraps the latter as
``adb: failed to install <path>: Failure [...]`` after its own
``Performing Streamed Install`` line. Codes are the
``PackageManager.INSTALL_FAILED_*`` / ``INSTALL_PARSE_FAILED_*`` names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from farm.device._text import as_text, excerpt

_FAILURE = re.compile(r"Failure \[([A-Z0-9_]+)(?::\s*(.*?))?\]\s*$", re.MULTILINE)
_ERROR = re.compile(r"^(?:Error|Exception occurred while executing[^:]*):\s*(.*)$", re.MULTILINE)

# Farm's own code for a refusal that ``pm`` printed without a ``Failure [CODE]``,
# e.g. ``Error: Unable to open file: x.apk`` for a path that does not exist.
PM_ERROR = "PM_ERROR"


@dataclass(frozen=True)
class InstallOutcome:
    """What ``pm install`` (or host ``adb install``) reported.

    Attributes:
        ok: the package was installed.
        code: ``""`` on success; else the package manager's code, e.g.
            ``INSTALL_FAILED_UPDATE_INCOMPATIBLE``, or :data:`PM_ERROR`.
        message: the text after the code (``""`` if none).
    """

    ok: bool
    code: str
    message: str


def parse_pm_install(stdout: str | bytes, stderr: str | bytes = "") -> InstallOutcome:
    """Judge the output of ``pm install`` / ``cmd package install`` / ``adb install``.

    Args:
        stdout: what the command printed on stdout.
        stderr: what it printed on stderr (host adb and ``Error:`` lines go there).

    Returns:
        The outcome.

    Raises:
        ValueError: neither ``Success`` nor a failure is in the output.
    """
    out, err = as_text(stdout), as_text(stderr)
    both = out + "\n" + err
    if match := _FAILURE.search(both):
        return InstallOutcome(ok=False, code=match.group(1), message=(match.group(2) or "").strip())
    if any(line.strip() == "Success" for line in out.split("\n")):
        return InstallOutcome(ok=True, code="", message="")
    if match := _ERROR.search(both):
        return InstallOutcome(ok=False, code=PM_ERROR, message=match.group(1).strip())
    raise ValueError(f"pm install: neither Success nor Failure in {excerpt(both)!r}")


def _package_lines(output: str | bytes, command: str) -> list[str]:
    values = []
    for line in as_text(output).split("\n"):
        if not line.strip():
            continue
        if not line.startswith("package:"):
            raise ValueError(f"{command}: cannot read line {line!r}")
        values.append(line[len("package:") :].strip())
    return values


def parse_pm_path(output: str | bytes) -> list[str]:
    """Parse ``pm path PACKAGE``.

    Args:
        output: stdout; empty when the package is not installed.

    Returns:
        The APK paths on the phone, ``base.apk`` first then splits; ``[]`` when
        the package is not installed.

    Raises:
        ValueError: a line does not start with ``package:``.
    """
    return _package_lines(output, "pm path")


def parse_pm_list_packages(output: str | bytes) -> list[str]:
    """Parse ``pm list packages`` (also the ``-f`` form ``package:<apk>=<name>``).

    Args:
        output: stdout, one ``package:<name>`` per line.

    Returns:
        Package names in printed order.

    Raises:
        ValueError: a line does not start with ``package:``.
    """
    # With -f the APK path comes first and may itself contain "=" (Android 11+
    # paths end in "==/"), so the name is what follows the last "=".
    return [entry.rsplit("=", 1)[-1] for entry in _package_lines(output, "pm list packages")]


@dataclass(frozen=True)
class PackageVersion:
    """An installed package's version and signer, from ``dumpsys package``.

    Attributes:
        version_code: ``versionCode`` (the long version code on Android 9+).
        version_name: ``versionName`` as printed (``""`` if absent).
        signature_hashes: the ``signatures:[...]`` of ``PackageSignatures``: the
            hex ``Signature.hashCode()`` of each signer certificate (Java
            ``Arrays.hashCode`` of its DER bytes, AOSP ``android/content/pm/Signature.java``),
            so a changed signer changes it. Compare with
            :func:`signature_hash_hex` of the APK's certificate. Empty if not printed.
    """

    version_code: int
    version_name: str
    signature_hashes: tuple[str, ...]


_PACKAGE_BLOCK = re.compile(r"^  Package \[([^\]]+)\] \([0-9a-f]+\):$", re.MULTILINE)
_VERSION_CODE = re.compile(r"^ {4}versionCode=(\d+)", re.MULTILINE)
_VERSION_NAME = re.compile(r"^ {4}versionName=(.*)$", re.MULTILINE)
_SIGNATURES = re.compile(
    r"^ {4}signatures=PackageSignatures\{.*?signatures:\[([^\]]*)\]", re.MULTILINE
)


def parse_dumpsys_package_version(output: str | bytes, package: str) -> PackageVersion | None:
    """Read a package's version and signer from ``dumpsys package PACKAGE``.

    Only the first ``Package [name]`` block is read: an updated system app has
    a second one under ``Hidden system packages:`` for the factory version.

    Args:
        output: stdout of ``dumpsys package PACKAGE``.
        package: the package name whose block to read.

    Returns:
        The version, or None when the dump has no block for ``package`` (it is
        not installed).

    Raises:
        ValueError: the block has no readable ``versionCode``.
    """
    text = as_text(output)
    blocks = list(_PACKAGE_BLOCK.finditer(text))
    for index, block in enumerate(blocks):
        if block.group(1) != package:
            continue
        end = blocks[index + 1].start() if index + 1 < len(blocks) else len(text)
        body = text[block.end() : end]
        code = _VERSION_CODE.search(body)
        if code is None:
            raise ValueError(f"dumpsys package {package}: no versionCode line")
        name = _VERSION_NAME.search(body)
        signatures = _SIGNATURES.search(body)
        hashes = (
            tuple(s.strip() for s in signatures.group(1).split(",") if s.strip())
            if signatures
            else ()
        )
        return PackageVersion(int(code.group(1)), name.group(1).strip() if name else "", hashes)
    return None


def signature_hash_hex(certificate_der: bytes) -> str:
    """Return the hex ``Signature.hashCode()`` Android prints for a signer certificate.

    ``Signature.hashCode()`` is Java's ``Arrays.hashCode(byte[])`` over the
    certificate's DER bytes: ``h = 31 * h + b`` with signed bytes and 32-bit
    overflow, printed by ``Integer.toHexString`` (unsigned, no leading zeros).

    Args:
        certificate_der: the X.509 certificate, DER-encoded.

    Returns:
        e.g. ``"3cda6734"``.
    """
    value = 1
    for byte in certificate_der:
        signed = byte - 256 if byte > 127 else byte
        value = (31 * value + signed) & 0xFFFFFFFF
    return format(value, "x")
