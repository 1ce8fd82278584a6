"""Sign an APK with apksigner: schemes v1 + v2 + v3 by default.

Passwords reach apksigner as ``--ks-pass env:NAME`` or ``file:PATH`` (apksigner's
own syntax, ``apksigner sign --help``), so they are never on argv and never
logged. apksigner takes a PEM certificate but only a PKCS#8 *DER* private key,
so a PEM key is converted into a private (0700) temp folder for the duration
of the call and removed after.

v1 (JAR) signing is kept on by default although the stand-in's minSdk is 24:
it costs little and lets old tooling (``jarsigner -verify``) read the signer.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from apk_tools.archive import apk_entries
from apk_tools.keys import KeystoreKey, SigningKey, check_validity
from apk_tools.tools import run_tool
from farm.errors import ApkError

DEFAULT_SCHEMES = (1, 2, 3)


def _key_args(key: SigningKey, work: Path) -> list[str]:
    """apksigner arguments naming the key; password references only."""
    if isinstance(key, KeystoreKey):
        key.password.reveal()  # fail early, with our message, if the reference is dangling
        args = ["--ks", str(key.keystore), "--ks-pass", str(key.password)]
        if key.alias:
            args += ["--ks-key-alias", key.alias]
        return args
    try:
        private_key = serialization.load_pem_private_key(Path(key.key_pem).read_bytes(), None)
    except OSError as exc:
        raise ApkError(str(key.key_pem), f"cannot read private key: {exc.strerror}") from exc
    except (ValueError, TypeError) as exc:
        raise ApkError(str(key.key_pem), "not an unencrypted PEM private key") from exc
    der = work / "key.pk8"
    fd = os.open(der, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(
            private_key.private_bytes(
                serialization.Encoding.DER,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return ["--key", str(der), "--cert", str(key.cert_pem)]


#: apksigner's words for an input that is not a readable APK (apksig's ApkFormatException).
_APK_FAULTS = ("not a ZIP archive", "Malformed APK", "ApkFormatException", "ZipFormatException")


def _explain(output: str) -> str:
    """Map apksigner's Java stack trace to one sentence."""
    if "password was incorrect" in output or "BadPaddingException" in output:
        return "wrong keystore password"
    if "Failed to read" in output and "password" in output:
        return "cannot read the keystore password"
    if "No key with alias" in output or "does not contain key with alias" in output:
        return "the keystore has no key with that alias"
    if any(fault in output for fault in _APK_FAULTS):
        return "corrupt APK: not a valid zip file, truncated or not an APK"
    for line in output.splitlines():
        if line.strip() and not line.startswith(("\tat ", "\t...")):
            return line.strip()
    return "apksigner gave no reason"


def _refusal(output: str, apk_in: Path, key: SigningKey) -> ApkError:
    """apksigner's refusal as an ApkError naming what is at fault: the APK or the keystore."""
    about_apk = any(fault in output for fault in _APK_FAULTS) or not isinstance(key, KeystoreKey)
    return ApkError(str(apk_in if about_apk else key), _explain(output))


def sign(
    apk_in: Path,
    apk_out: Path,
    key: SigningKey,
    *,
    schemes: Iterable[int] = DEFAULT_SCHEMES,
    now: dt.datetime | None = None,
) -> Path:
    """Sign ``apk_in`` into ``apk_out`` (atomically) with ``key``.

    ``apk_in`` should already be zipaligned (:func:`apk_tools.align.align`):
    aligning after a v2/v3 signature breaks it.

    Args:
        apk_in: the APK to sign (unchanged).
        apk_out: the signed APK; replaced if present, never half-written.
        key: the keystore or PEM key to sign with.
        schemes: signature schemes to produce, from 1, 2, 3.
        now: time at which the certificate must be valid (UTC); default now.

    Returns:
        ``apk_out``.

    Raises:
        ApkError: the input is missing, a folder or corrupt (named as the
            APK's fault), bad scheme list, expired certificate, wrong password
            (named as the keystore's), or apksigner refused the APK.
        ConfigError: the password reference cannot be resolved.
        ToolMissing: apksigner is not installed.
    """
    apk_in, apk_out = Path(apk_in), Path(apk_out)
    wanted = set(schemes)
    if not wanted or not wanted <= {1, 2, 3}:
        raise ApkError(
            str(apk_in), f"schemes must be a non-empty subset of 1, 2, 3; got {sorted(wanted)}"
        )
    apk_entries(apk_in)
    check_validity(key, now)
    apk_out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="apk-sign-") as work_name:
        work = Path(work_name)
        os.chmod(work, 0o700)
        key_args = _key_args(key, work)
        fd, temp_name = tempfile.mkstemp(dir=apk_out.parent, prefix=".sign-", suffix=".apk")
        os.close(fd)
        temp = Path(temp_name)
        try:
            args = ["sign", *key_args]
            for scheme in (1, 2, 3):
                args += [f"--v{scheme}-signing-enabled", "true" if scheme in wanted else "false"]
            args += ["--out", str(temp), str(apk_in)]
            result = run_tool("apksigner", args)
            if result.returncode != 0:
                raise _refusal(result.stderr + result.stdout, apk_in, key)
            os.chmod(temp, 0o644)  # mkstemp makes 0600; an APK is not secret
            os.replace(temp, apk_out)
        finally:
            temp.unlink(missing_ok=True)
            # apksigner writes an .idsig next to --out only with v4; remove any stray one.
            Path(str(temp) + ".idsig").unlink(missing_ok=True)
    return apk_out


__all__ = ["DEFAULT_SCHEMES", "sign"]
