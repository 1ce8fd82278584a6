"""prepare(): turn an APK into one aligned and signed by a given key, exactly once.

The output is named by what went in: the SHA-256 of the input file and the
SHA-256 fingerprint of the key's certificate. So preparing the same input with
the same key again finds the existing file and returns it without running any
tool, and two different inputs or keys can never collide. Work happens in a
temp file in ``out_dir`` that is renamed into place (``os.replace`` is atomic
on one filesystem), so a crash leaves either nothing or a complete file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from apk_tools.align import align
from apk_tools.inspect import inspect_apk
from apk_tools.keys import SigningKey, check_validity, fingerprint
from apk_tools.sign import sign
from farm.errors import ApkError

_NAME_DIGITS = 16  # hex digits of each hash in the file name: 64 bits, collision-free in practice
_CHUNK_BYTES = 1 << 20


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, lowercase hex."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def prepared_name(package: str, version_code: int, content_sha256: str, key_sha256: str) -> str:
    """File name of a prepared APK, e.g. ``org.apache.tvm.tvmrpc-v3-1a2b…-9f8e….apk``.

    Args:
        package: the APK's package name.
        version_code: its versionCode.
        content_sha256: SHA-256 (hex) of the input APK.
        key_sha256: SHA-256 (hex) of the signer certificate.
    """
    safe_package = re.sub(r"[^A-Za-z0-9._]", "_", package)
    return (
        f"{safe_package}-v{version_code}-{content_sha256[:_NAME_DIGITS]}"
        f"-{key_sha256[:_NAME_DIGITS]}.apk"
    )


def prepare(
    unsigned_apk: Path, key: SigningKey, out_dir: Path, *, now: dt.datetime | None = None
) -> Path:
    """Align and sign ``unsigned_apk`` with ``key`` into ``out_dir``, idempotently.

    An input that ``key`` already signed is not signed again: it is copied into
    ``out_dir`` under its content name. An input signed by another key is
    re-signed (apksigner replaces the old signatures).

    Args:
        unsigned_apk: the APK to prepare (unchanged).
        key: the signing key.
        out_dir: where prepared APKs live (created if missing).
        now: time at which the certificate must be valid (UTC); default now.

    Returns:
        Path of the signed APK in ``out_dir``.

    Raises:
        ApkError: the input is not a readable APK, the certificate is expired,
            the password is wrong, or a tool refused the input.
        ConfigError: the password reference cannot be resolved.
        ToolMissing: zipalign or apksigner is not installed.
    """
    unsigned_apk, out_dir = Path(unsigned_apk), Path(out_dir)
    info = inspect_apk(unsigned_apk)
    check_validity(key, now)
    key_sha256 = fingerprint(key)
    target = out_dir / prepared_name(
        info.package, info.version_code, file_sha256(unsigned_apk), key_sha256
    )
    if target.is_file():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    if key_sha256 in info.signers:
        if unsigned_apk.resolve().parent == out_dir.resolve():
            return unsigned_apk  # e.g. the output of an earlier prepare()
        _copy_atomic(unsigned_apk, target)
        return target
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".prepare-") as work_name:
        aligned = align(unsigned_apk, Path(work_name) / "aligned.apk")
        signed = sign(aligned, Path(work_name) / "signed.apk", key, now=now)
        if key_sha256 not in inspect_apk(signed).signers:
            raise ApkError(
                str(unsigned_apk), "apksigner produced an APK without the key's signature"
            )
        os.replace(signed, target)
    return target


def _copy_atomic(source: Path, target: Path) -> None:
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=".prepare-", suffix=".apk")
    os.close(fd)
    try:
        shutil.copyfile(source, temp_name)
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, target)
    finally:
        Path(temp_name).unlink(missing_ok=True)
